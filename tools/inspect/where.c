/* stasis-inspect --where: the SECTION_CALLSTACK of an image (format.h), read
 * and checked by the image reader, symbolised with elfutils' libdwfl from
 * the objects it names, at the addresses they had in the job (address
 * randomisation is off under stasis, and the record keeps each object's
 * load bias): function from the symbol table, file and line from the DWARF
 * line table where the object has debug information. */
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"
#include "inspect.h"

static char *xstrdup(const char *s)
{
	char *d = strdup(s ? s : "");

	if (!d)
		exit(1);
	return d;
}

/* The where record of an image, whole and checked (malloc'd), or NULL. */
static struct where_record *read_record(const char *path, struct why *why)
{
	struct where_record *rec = NULL;
	const struct region_record *r;
	struct image *img;
	size_t i, n;

	if (image_open(path, &img, why))
		return NULL;
	r = image_regions(img);
	n = image_header(img)->nregions;
	for (i = 0; i < n && r[i].kind != SECTION_CALLSTACK; i++)
		;
	if (i == n) {
		why_set(why, -EBADMSG, "%s: no stack recorded in this image", path);
		goto out;
	}
	rec = malloc(r[i].stored_bytes);
	if (!rec || r[i].stored_bytes < sizeof(*rec) || image_read_region(img, i, rec, why)) {
		free(rec);
		rec = NULL;
		goto out;
	}
	/* Checked by its crc, then for sense: nothing in it is trusted. */
	if (memcmp(rec->magic, STASIS_WHERE_MAGIC, sizeof(rec->magic)) ||
	    rec->frame_size != sizeof(struct where_frame) || rec->nframes > STASIS_WHERE_FRAMES ||
	    sizeof(*rec) + rec->nframes * sizeof(struct where_frame) > r[i].stored_bytes) {
		why_set(why, -EBADMSG, "%s: the recorded stack does not make sense", path);
		free(rec);
		rec = NULL;
		goto out;
	}
	for (uint32_t f = 0; f < rec->nframes; f++) {
		rec->frame[f].function[sizeof(rec->frame[f].function) - 1] = '\0';
		rec->frame[f].object[sizeof(rec->frame[f].object) - 1] = '\0';
	}
out:
	image_close(img);
	return rec;
}

static const Dwfl_Callbacks callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
};

/* Report every object of the stack at its load bias, once. */
static Dwfl *report(const struct where_record *rec)
{
	Dwfl *dwfl = dwfl_begin(&callbacks);

	if (!dwfl)
		return NULL;
	dwfl_report_begin(dwfl);
	for (uint32_t f = 0; f < rec->nframes; f++) {
		const struct where_frame *fr = &rec->frame[f];
		bool seen = !fr->object[0];

		for (uint32_t g = 0; g < f && !seen; g++)
			seen = !strcmp(rec->frame[g].object, fr->object);
		if (!seen)
			dwfl_report_elf(dwfl, fr->object, fr->object, -1, fr->object_bias, true);
	}
	dwfl_report_end(dwfl, NULL, NULL);
	return dwfl;
}

int inspect_where(const struct rank_files *rf, struct where_line **lines, struct why *why)
{
	struct where_record *rec;
	struct where_line *out;
	Dwfl *dwfl;
	int n;

	*lines = NULL;
	if (!rf->img) {
		why_set(why, -ENOENT, "no image");
		return -1;
	}
	rec = read_record(rf->img, why);
	if (!rec)
		return -1;
	out = calloc(rec->nframes ? rec->nframes : 1, sizeof(*out));
	if (!out)
		exit(1);
	dwfl = report(rec);
	for (uint32_t f = 0; f < rec->nframes; f++) {
		const struct where_frame *fr = &rec->frame[f];
		/* A return address: the call is the instruction before it. */
		Dwarf_Addr pc = fr->ip - 1;
		Dwfl_Module *mod = dwfl ? dwfl_addrmodule(dwfl, pc) : NULL;
		const char *name = mod ? dwfl_module_addrname(mod, pc) : NULL;
		Dwfl_Line *line = mod ? dwfl_module_getsrc(mod, pc) : NULL;
		const char *file = NULL;
		int lineno = 0;

		if (line)
			file = dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL);
		out[f].function = xstrdup(name ? name : fr->function);
		out[f].file = xstrdup(file);
		out[f].line = file ? lineno : 0;
		out[f].object = xstrdup(fr->object);
		out[f].ip = fr->ip;
	}
	n = (int)rec->nframes;
	if (dwfl)
		dwfl_end(dwfl);
	free(rec);
	*lines = out;
	return n;
}

void inspect_where_free(struct where_line *lines, int n)
{
	for (int i = 0; lines && i < n; i++) {
		free(lines[i].function);
		free(lines[i].file);
		free(lines[i].object);
	}
	free(lines);
}
