/* stasis-inspect [--verify] [--where] [--json] [--id N] [--job NAME] [DIR...]
 *
 * Lists the jobs and checkpoints under each DIR (a STASIS_DIR, a job
 * directory, or a directory up to two levels above job directories, as
 * node directories are), by default $STASIS_DIR (%n and %r as wildcards)
 * and $STASIS_FLUSH_DIR. Exit status: 0 all good, 1 problems found (each
 * one line on stderr), 2 usage. */
#include <getopt.h>
#include <glob.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "codec.h"
#include "inspect.h"

struct options {
	bool verify, where, json;
	uint64_t id; /* --id, 0: the newest complete */
	const char *job;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: stasis-inspect [--verify] [--where] [--json] [--id N] [--job NAME] [DIR...]\n"
		"\n"
		"Lists each job and checkpoint under DIR (default: $STASIS_DIR, with %%n and %%r\n"
		"matching any node and rank, and $STASIS_FLUSH_DIR): id, time, full or\n"
		"incremental and its chain, bytes per rank and in total, redundancy scheme,\n"
		"complete or not.\n"
		"\n"
		"  --verify     check every checksum, and for each redundancy set whether its\n"
		"               lost or damaged members could be rebuilt (a dry run: nothing\n"
		"               is written); say which checkpoint a restart would resume\n"
		"  --where      where each rank was when the checkpoint was taken (function,\n"
		"               file and line where debug information allows)\n"
		"  --id N       the checkpoint --where shows (default: the newest complete)\n"
		"  --job NAME   only this job (its directory name: STASIS_JOB or the program)\n"
		"  --json       the same as one JSON document on stdout\n"
		"\n"
		"Exit status: 0 all good, 1 problems found (one line each on stderr), 2 usage.\n");
}

/* "0-3,5,7-8" */
static void ranges(char *buf, size_t len, const int *v, int n)
{
	size_t at = 0;

	buf[0] = '\0';
	for (int i = 0; i < n && at < len; i++) {
		int j = i;

		while (j + 1 < n && v[j + 1] == v[j] + 1)
			j++;
		at += snprintf(buf + at, len - at, j > i ? "%s%d-%d" : "%s%d", i ? "," : "", v[i],
			       v[j]);
		i = j;
	}
}

static void human(char *buf, size_t len, double bytes)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int u = 0;

	while (bytes >= 1024 && u < 4) {
		bytes /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", bytes, unit[u]);
}

static void when(char *buf, size_t len, uint64_t ns)
{
	time_t t = ns / 1000000000ull;
	struct tm tm;

	if (!ns || !localtime_r(&t, &tm) || !strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm))
		snprintf(buf, len, "-");
}

/* The chain of c, newest first, into ids (at most max); its length. */
static int chain(struct job *j, struct ckpt *c, uint64_t *ids, int max)
{
	int n = 0;

	for (uint64_t id = c->id; id && n < max;) {
		struct ckpt *p = inspect_find(j, id);

		ids[n++] = id;
		if (!p || !p->parent || p->parent >= id)
			break;
		id = p->parent;
	}
	return n;
}

struct sizes {
	uint64_t min, max, total;
	int images, records;
};

static struct sizes sizes(const struct ckpt *c)
{
	struct sizes s = {.min = UINT64_MAX};

	for (int r = 0; r < c->nranks; r++) {
		const struct rank_files *rf = &c->r[r];

		s.records += rf->record_ok;
		if (!rf->header_ok)
			continue;
		s.images++;
		s.total += rf->img_bytes;
		s.min = rf->img_bytes < s.min ? rf->img_bytes : s.min;
		s.max = rf->img_bytes > s.max ? rf->img_bytes : s.max;
	}
	if (!s.images)
		s.min = 0;
	return s;
}

static const char *kind_name(const struct ckpt *c)
{
	return !c->have_header ? "?" : c->kind == IMAGE_FULL ? "full" : "incremental";
}

/* The kind column: "full", or "incremental+zstd" for compressed images. */
static const char *kind_column(char *buf, size_t len, const struct ckpt *c)
{
	snprintf(buf, len, "%s%s%s", kind_name(c), c->have_header && c->codec ? "+" : "",
		 c->have_header && c->codec ? codec_name(c->codec) : "");
	return buf;
}

static void state(char *buf, size_t len, const struct job *j, const struct ckpt *c)
{
	struct sizes s = sizes(c);

	if (c->complete)
		snprintf(buf, len, "complete");
	else if (j->flush)
		snprintf(buf, len, "incomplete (flushed by %d of %d ranks)", s.records, c->nranks);
	else
		snprintf(buf, len, "incomplete (%d of %d images, no commit record)", s.images,
			 c->nranks);
}

static void list_text(struct inspect *in, struct job *j)
{
	fprintf(stdout, "job %s (%s, %d ranks, scheme %s", j->name,
		j->flush ? "flush level" : "node-local level", j->nranks, j->scheme);
	if (j->set_size)
		fprintf(stdout, ", sets of %d, tolerates %d", j->set_size, j->tolerance);
	fprintf(stdout, ")\n  in");
	for (int i = 0; i < j->ndirs; i++)
		fprintf(stdout, " %s", j->dirs[i]);
	fprintf(stdout, "\n");
	if (j->nck) /* a job with Fenix snapshots only has no checkpoint */
		fprintf(stdout, "  %6s  %-19s  %-16s  %-14s  %-21s  %-10s  %s\n", "id", "taken",
			"kind", "chain", "bytes per rank", "total", "state");
	for (int k = 0; k < j->nck; k++) {
		struct ckpt *c = &j->ck[k];
		struct sizes s = sizes(c);
		char t[32], ch[128] = "", lo[32], hi[32], per[48], tot[32], st[96], kc[32];
		uint64_t ids[64];
		int n = chain(j, c, ids, 64);
		size_t at = 0;

		for (int i = 0; i < n && at < sizeof(ch); i++)
			at += snprintf(ch + at, sizeof(ch) - at, "%s%llu", i ? "<" : "",
				       (unsigned long long)ids[i]);
		when(t, sizeof(t), c->created_ns);
		human(lo, sizeof(lo), s.min);
		human(hi, sizeof(hi), s.max);
		snprintf(per, sizeof(per), strcmp(lo, hi) ? "%s-%s" : "%s", lo, hi);
		human(tot, sizeof(tot), s.total);
		state(st, sizeof(st), j, c);
		fprintf(stdout, "  %6llu  %-19s  %-16s  %-14s  %-21s  %-10s  %s\n",
			(unsigned long long)c->id, t, kind_column(kc, sizeof(kc), c), ch, per, tot,
			st);
	}
	(void)in;
}

/* --where: one block per group of ranks with the same stack. */
struct stack {
	struct where_line *lines;
	int n;
	struct why why;
};

static bool same_stack(const struct stack *a, const struct stack *b)
{
	if (a->n != b->n || (a->n < 0 && strcmp(a->why.msg, b->why.msg)))
		return false;
	for (int i = 0; i < a->n; i++)
		if (strcmp(a->lines[i].function, b->lines[i].function) ||
		    strcmp(a->lines[i].file, b->lines[i].file) || a->lines[i].line != b->lines[i].line)
			return false;
	return true;
}

static void where(struct inspect *in, struct job *j, const struct options *o, struct json *js)
{
	uint64_t id = o->id ? o->id : inspect_newest_complete(j);
	struct ckpt *c = id ? inspect_find(j, id) : NULL;
	struct stack *st;
	int *members, *group;

	if (!c) {
		if (o->id)
			inspect_problem(in, "job %s: no checkpoint %llu in %s", j->name,
					(unsigned long long)o->id, j->dirs[0]);
		else
			inspect_problem(in, "job %s: no complete checkpoint to show", j->name);
		return;
	}
	st = calloc(c->nranks + 1, sizeof(*st));
	members = calloc(c->nranks + 1, sizeof(int));
	group = calloc(c->nranks + 1, sizeof(int));
	if (!st || !members || !group)
		exit(1);
	for (int r = 0; r < c->nranks; r++) {
		st[r].n = inspect_where(&c->r[r], &st[r].lines, &st[r].why);
		if (st[r].n < 0)
			inspect_problem(in, "job %s, checkpoint %llu, rank %d: %s", j->name,
					(unsigned long long)id, r, st[r].why.msg);
		group[r] = -1;
	}
	if (js) {
		json_u64(js, "where_checkpoint", id);
		json_open(js, "where", '[');
	} else {
		fprintf(stdout, "job %s, checkpoint %llu (%s): where the ranks were\n", j->name,
			(unsigned long long)id, j->flush ? "flush level" : "node-local level");
	}
	for (int r = 0; r < c->nranks; r++) {
		char rs[1024];
		int n = 0;

		if (group[r] >= 0 || st[r].n < 0)
			continue;
		for (int q = r; q < c->nranks; q++)
			if (group[q] < 0 && same_stack(&st[r], &st[q])) {
				group[q] = r;
				members[n++] = q;
			}
		ranges(rs, sizeof(rs), members, n);
		if (js) {
			json_open(js, NULL, '{');
			json_open(js, "ranks", '[');
			for (int i = 0; i < n; i++)
				json_int(js, NULL, members[i]);
			json_close(js, ']');
			json_open(js, "frames", '[');
		} else {
			fprintf(stdout, "  rank%s %s:\n", n > 1 ? "s" : "", rs);
		}
		for (int f = 0; f < st[r].n; f++) {
			const struct where_line *l = &st[r].lines[f];
			char addr[32];

			snprintf(addr, sizeof(addr), "0x%llx", (unsigned long long)l->ip);
			if (js) {
				json_open(js, NULL, '{');
				json_str(js, "function", l->function[0] ? l->function : NULL);
				json_str(js, "file", l->file[0] ? l->file : NULL);
				if (l->line)
					json_int(js, "line", l->line);
				else
					json_null(js, "line");
				json_str(js, "object", l->object);
				json_str(js, "address", addr);
				json_close(js, '}');
			} else if (l->file[0]) {
				fprintf(stdout, "    #%-2d %s at %s:%d (%s)\n", f,
					l->function[0] ? l->function : "??", l->file, l->line, l->object);
			} else {
				fprintf(stdout, "    #%-2d %s %s (%s)\n", f,
					l->function[0] ? l->function : "??", addr, l->object);
			}
		}
		if (js) {
			json_close(js, ']');
			json_close(js, '}');
		}
	}
	if (js)
		json_close(js, ']');
	for (int r = 0; r < c->nranks; r++)
		inspect_where_free(st[r].lines, st[r].n);
	free(st);
	free(members);
	free(group);
}

static void ckpt_json(struct job *j, struct ckpt *c, struct json *js, bool verify)
{
	struct sizes s = sizes(c);
	uint64_t ids[256];
	int n = chain(j, c, ids, 256);
	char t[32];

	json_open(js, NULL, '{');
	json_u64(js, "id", c->id);
	when(t, sizeof(t), c->created_ns);
	json_str(js, "time", c->created_ns ? t : NULL);
	json_u64(js, "created_ns", c->created_ns);
	json_str(js, "kind", c->have_header ? kind_name(c) : NULL);
	json_str(js, "codec", c->have_header ? codec_name(c->codec) : NULL);
	if (c->parent)
		json_u64(js, "parent", c->parent);
	else
		json_null(js, "parent");
	json_open(js, "chain", '[');
	for (int i = 0; i < n; i++)
		json_u64(js, NULL, ids[i]);
	json_close(js, ']');
	json_bool(js, "complete", c->complete);
	json_int(js, "ranks", c->nranks);
	json_int(js, "images", s.images);
	json_int(js, "commit_records", s.records);
	json_u64(js, "bytes_total", s.total);
	json_open(js, "bytes_per_rank", '[');
	for (int r = 0; r < c->nranks; r++)
		if (c->r[r].header_ok)
			json_u64(js, NULL, c->r[r].img_bytes);
		else
			json_null(js, NULL);
	json_close(js, ']');
	if (verify && c->verified) {
		static const char *const states[] = {"missing", "ok", "damaged"};

		json_open(js, "verify", '{');
		json_bool(js, "whole", c->whole);
		json_bool(js, "restorable", c->restorable);
		json_open(js, "ranks", '[');
		for (int r = 0; r < c->nranks; r++) {
			json_open(js, NULL, '{');
			json_int(js, "rank", r);
			json_str(js, "image", states[c->r[r].image]);
			json_str(js, "image_error", c->r[r].image_err);
			if (!j->flush)
				json_str(js, "redundancy", states[c->r[r].redundancy]);
			json_close(js, '}');
		}
		json_close(js, ']');
		json_open(js, "sets", '[');
		for (int k = 0; k < c->nsets; k++)
			inspect_set_json(js, &c->sets[k], "ranks");
		json_close(js, ']');
		json_close(js, '}');
	}
	json_close(js, '}');
}

void inspect_set_json(struct json *js, const struct set_verdict *v, const char *members)
{
	json_open(js, NULL, '{');
	json_int(js, "set", v->set_id);
	json_str(js, "scheme", v->scheme);
	json_int(js, "tolerance", v->tolerance);
	json_open(js, members, '[');
	for (int x = 0; x < v->p; x++)
		json_int(js, NULL, v->world[x]);
	json_close(js, ']');
	json_open(js, "lost", '[');
	for (int x = 0; x < v->p; x++)
		if (v->data_lost[x] || v->red_lost[x])
			json_int(js, NULL, v->world[x]);
	json_close(js, ']');
	json_bool(js, "rebuildable", v->feasible);
	json_close(js, '}');
}

static void job_json(struct inspect *in, struct job *j, const struct options *o, struct json *js)
{
	json_open(js, NULL, '{');
	json_str(js, "name", j->name);
	json_str(js, "level", j->flush ? "flush" : "local");
	json_open(js, "directories", '[');
	for (int i = 0; i < j->ndirs; i++)
		json_str(js, NULL, j->dirs[i]);
	json_close(js, ']');
	json_int(js, "ranks", j->nranks);
	json_str(js, "scheme", j->scheme);
	if (j->set_size) {
		json_int(js, "set_size", j->set_size);
		json_int(js, "tolerance", j->tolerance);
	}
	json_open(js, "checkpoints", '[');
	for (int k = 0; k < j->nck; k++)
		ckpt_json(j, &j->ck[k], js, o->verify);
	json_close(js, ']');
	if (o->verify) {
		bool flush;
		uint64_t from = inspect_restart_from(in, j->name, &flush);

		if (from) {
			json_u64(js, "restart_from", from);
			json_str(js, "restart_level", flush ? "flush" : "local");
		} else {
			json_null(js, "restart_from");
		}
	}
	if (o->where)
		where(in, j, o, js);
	inspect_fenix(in, j, o->verify, js);
	json_close(js, '}');
}

/* The default places: $STASIS_DIR (its %n, %r matching anything) or the
 * default directory, and $STASIS_FLUSH_DIR. */
static int default_roots(struct inspect *in)
{
	const char *dir = getenv("STASIS_DIR"), *flush = getenv("STASIS_FLUSH_DIR");
	const char *patterns[2] = {NULL, flush && *flush ? flush : NULL};
	char def[4096], pat[4096];
	int found = 0;

	if (dir && *dir) {
		patterns[0] = dir;
	} else {
		/* As util/config.c's default_dir. */
		const char *tmp = getenv("TMPDIR"), *user = getenv("USER");
		struct passwd *pw = user && *user ? NULL : getpwuid(getuid());

		snprintf(def, sizeof(def), "%s/stasis-%s", tmp && *tmp ? tmp : "/tmp",
			 user && *user ? user : pw ? pw->pw_name : "unknown");
		patterns[0] = def;
	}
	for (int p = 0; p < 2; p++) {
		glob_t g;
		size_t n = 0;

		if (!patterns[p])
			continue;
		for (const char *s = patterns[p]; *s && n + 2 < sizeof(pat); s++) {
			if (*s == '%' && (s[1] == 'n' || s[1] == 'r')) {
				pat[n++] = '*';
				s++;
			} else {
				pat[n++] = *s;
			}
		}
		pat[n] = '\0';
		if (glob(pat, GLOB_NOSORT, NULL, &g)) {
			inspect_problem(in, "%s (%s): no such directory", patterns[p],
					p ? "STASIS_FLUSH_DIR" : dir && *dir ? "STASIS_DIR" : "default STASIS_DIR");
			continue;
		}
		for (size_t i = 0; i < g.gl_pathc; i++)
			found += inspect_scan(in, g.gl_pathv[i]);
		globfree(&g);
	}
	return found;
}

int main(int argc, char **argv)
{
	static const struct option longs[] = {
		{"verify", no_argument, NULL, 'v'}, {"where", no_argument, NULL, 'w'},
		{"json", no_argument, NULL, 'j'},   {"id", required_argument, NULL, 'i'},
		{"job", required_argument, NULL, 'J'}, {"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct inspect in = {.text = stdout};
	struct options o = {0};
	struct json js;
	char *end;
	int c;

	while ((c = getopt_long(argc, argv, "h", longs, NULL)) != -1) {
		switch (c) {
		case 'v': o.verify = true; break;
		case 'w': o.where = true; break;
		case 'j': o.json = true; break;
		case 'J': o.job = optarg; break;
		case 'i':
			o.id = strtoull(optarg, &end, 10);
			if (!*optarg || *end || !o.id || optarg[0] == '-') {
				fprintf(stderr, "stasis-inspect: --id '%s': expected a checkpoint id >= 1\n",
					optarg);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	in.json = o.json;
	if (optind == argc)
		default_roots(&in);
	for (int i = optind; i < argc; i++)
		inspect_scan(&in, argv[i]);
	inspect_read(&in);
	if (o.job) {
		int kept = 0;

		for (int i = 0; i < in.njobs; i++)
			if (!strcmp(in.jobs[i].name, o.job))
				in.jobs[kept++] = in.jobs[i];
		if (!kept && in.njobs)
			inspect_problem(&in, "no job '%s' here", o.job);
		in.njobs = kept;
	}
	/* Every job is verified before any is shown: a restart's choice spans
	 * both levels. The verdicts wait for their job's listing. */
	for (int i = 0; o.verify && i < in.njobs; i++) {
		size_t len;
		FILE *m = o.json ? NULL : open_memstream(&in.jobs[i].verdicts, &len);

		in.text = m ? m : stderr;
		inspect_verify(&in, &in.jobs[i]);
		if (m)
			fclose(m);
	}
	in.text = o.json ? stderr : stdout;
	if (o.json) {
		json_begin(&js, stdout);
		json_open(&js, NULL, '{');
		json_open(&js, "jobs", '[');
		for (int i = 0; i < in.njobs; i++)
			job_json(&in, &in.jobs[i], &o, &js);
		json_close(&js, ']');
		json_bool(&js, "ok", !in.problems);
		json_close(&js, '}');
		json_end(&js);
		return in.problems ? 1 : 0;
	}
	for (int i = 0; i < in.njobs; i++) {
		struct job *j = &in.jobs[i];

		list_text(&in, j);
		if (j->verdicts)
			fputs(j->verdicts, stdout);
		inspect_fenix(&in, j, o.verify, NULL);
		if (o.verify) {
			bool flush;
			uint64_t from = inspect_restart_from(&in, j->name, &flush);

			if (from)
				fprintf(stdout, "  verified: a restart would resume from checkpoint %llu (%s)\n",
					(unsigned long long)from, flush ? "flush level" : "node-local level");
			else if (j->nck)
				inspect_problem(&in, "job %s: no checkpoint a restart could use", j->name);
		}
		if (o.where)
			where(&in, j, &o, NULL);
	}
	return in.problems ? 1 : 0;
}
