/* A small JSON writer for stasis-inspect --json: nesting, commas and string
 * escapes (RFC 8259), nothing else. */
#include <stdio.h>

#include "inspect.h"

static void put_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

/* A comma before every member but the first; then the key, in objects. */
static void sep(struct json *js, const char *key)
{
	if (!js->first[js->depth])
		fputc(',', js->f);
	js->first[js->depth] = false;
	if (key) {
		put_string(js->f, key);
		fputc(':', js->f);
	}
}

void json_begin(struct json *js, FILE *f)
{
	*js = (struct json){.f = f};
	js->first[0] = true;
}

void json_open(struct json *js, const char *key, char bracket)
{
	sep(js, key);
	fputc(bracket, js->f);
	if (js->depth + 1 < (int)(sizeof(js->first) / sizeof(js->first[0])))
		js->depth++;
	js->first[js->depth] = true;
}

void json_close(struct json *js, char bracket)
{
	fputc(bracket, js->f);
	if (js->depth > 0)
		js->depth--;
}

void json_str(struct json *js, const char *key, const char *v)
{
	sep(js, key);
	if (v)
		put_string(js->f, v);
	else
		fputs("null", js->f);
}

void json_u64(struct json *js, const char *key, uint64_t v)
{
	sep(js, key);
	fprintf(js->f, "%llu", (unsigned long long)v);
}

void json_int(struct json *js, const char *key, long long v)
{
	sep(js, key);
	fprintf(js->f, "%lld", v);
}

void json_bool(struct json *js, const char *key, bool v)
{
	sep(js, key);
	fputs(v ? "true" : "false", js->f);
}

void json_null(struct json *js, const char *key)
{
	sep(js, key);
	fputs("null", js->f);
}

void json_end(struct json *js)
{
	fputc('\n', js->f);
}
