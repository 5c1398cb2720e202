/* stasis-inspect: the Fenix groups and snapshots of a job (libfenix's files
 * in <job dir>/fenix/, fenix_int.h), read through fenix/'s own readers
 * (fx_file.h). --verify checks every crc of every .dat, .red and .done and
 * judges, per redundancy set, whether a lost or damaged slot could be
 * rebuilt, writing nothing. Text, or with --json the same as the job's
 * "fenix_groups". */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fx_file.h"
#include "image.h"
#include "inspect.h"

struct fxf {
	int gid, ts, slot;
	char ext[8];
	const char *dir; /* .../fenix */
};

struct fxs {
	struct fxf *f;
	int n;
	char **dirs;
	int ndirs;
};

static const struct fxf *find(const struct fxs *x, int gid, int ts, int slot, const char *ext)
{
	for (int i = 0; i < x->n; i++)
		if (x->f[i].gid == gid && x->f[i].ts == ts && x->f[i].slot == slot &&
		    !strcmp(x->f[i].ext, ext))
			return &x->f[i];
	return NULL;
}

static void collect(struct inspect *in, const struct job *j, struct fxs *x)
{
	x->dirs = calloc(j->ndirs + 1, sizeof(char *));
	for (int i = 0; i < j->ndirs; i++) {
		char dir[4200];
		struct dirent *de;
		DIR *d;

		snprintf(dir, sizeof(dir), "%s/fenix", j->dirs[i]);
		if (!(d = opendir(dir)))
			continue;
		x->dirs[x->ndirs++] = strdup(dir);
		while ((de = readdir(d))) {
			struct fxf f = {.dir = x->dirs[x->ndirs - 1]};
			const struct fxf *o;

			if (!fx_parse_name(de->d_name, &f.gid, &f.ts, &f.slot, f.ext, sizeof(f.ext)))
				continue;
			if ((o = find(x, f.gid, f.ts, f.slot, f.ext)) && f.ts >= 0) {
				inspect_problem(in, "%s/%s: also in %s; the first is read", dir,
						de->d_name, o->dir);
				continue;
			}
			x->f = realloc(x->f, (x->n + 1) * sizeof(*x->f));
			if (!x->f)
				exit(1);
			x->f[x->n++] = f;
		}
		closedir(d);
	}
}

static int by_int(const void *a, const void *b)
{
	int p = *(const int *)a, q = *(const int *)b;
	return (p > q) - (p < q);
}

/* Distinct values of gid (ts < 0) or of ts within gid, ascending. */
static int distinct(const struct fxs *x, int gid, int *out)
{
	int n = 0;

	for (int i = 0; i < x->n; i++) {
		int v = gid < 0 ? x->f[i].gid : x->f[i].ts, k = 0;

		if ((gid >= 0 && (x->f[i].gid != gid || x->f[i].ts < 0)))
			continue;
		while (k < n && out[k] != v)
			k++;
		if (k == n)
			out[n++] = v;
	}
	qsort(out, n, sizeof(int), by_int);
	return n;
}

static const char *const scheme[] = {"partner", "xor", "rs"};

struct slotv {
	int dat, red, done; /* 0 missing, 1 ok, 2 damaged */
	char err[160];
	struct redundancy_info info;
	char path[4400];
	uint64_t bytes;
};

#define MAX_MEMBERS 64
struct member {
	unsigned id, count, dtsize;
};

static const char *st(int v)
{
	return v == 1 ? "ok" : v == 2 ? "DAMAGED" : "missing";
}

/* One snapshot of group gid: listing line, and with verify every file. */
static void snapshot(struct inspect *in, const struct job *j, const struct fxs *x, int gid, int ts,
		     int size, bool verify, struct json *js)
{
	struct slotv *v = calloc(size + 1, sizeof(*v));
	int records = 0;
	uint64_t total = 0;
	char members[512] = "";
	bool have_members = false;
	struct member m[MAX_MEMBERS];
	int nm = 0;

	for (int s = 0; s < size; s++) {
		const struct fxf *d = find(x, gid, ts, s, "dat"), *r = find(x, gid, ts, s, "red"),
				 *c = find(x, gid, ts, s, "done");
		struct fx_done_rec rec;
		struct fx_dat dat;

		if (c)
			v[s].done = fx_done_load(c->dir, gid, ts, s, &rec, NULL) ? 2 : 1;
		records += v[s].done == 1;
		if (d) {
			snprintf(v[s].path, sizeof(v[s].path), "%s/g%d-t%d.c%d.dat", d->dir, gid, ts, s);
			v[s].dat = fx_dat_load(d->dir, gid, ts, s, &dat, v[s].err, sizeof(v[s].err)) ? 2
															 : 1;
		}
		if (v[s].dat == 1) {
			struct fx_sec sec;
			size_t at = 0;

			v[s].bytes = dat.len;
			total += dat.len;
			for (fx_dat_first(&dat, &sec); !have_members && fx_dat_next(&dat, &sec);) {
				at += snprintf(members + at, at < sizeof(members) ? sizeof(members) - at : 0,
					       " %u:%ux%uB", sec.s.mid, sec.s.count, sec.s.dtsize);
				if (nm < MAX_MEMBERS)
					m[nm++] = (struct member){sec.s.mid, sec.s.count, sec.s.dtsize};
			}
			have_members = true;
			fx_dat_free(&dat);
		}
		if (r) {
			char p[4400];
			struct why why = WHY_INIT;

			snprintf(p, sizeof(p), "%s/g%d-t%d.c%d.red", r->dir, gid, ts, s);
			v[s].red = redundancy_info_read(p, &v[s].info, &why) ? 2 : 1;
			if (v[s].red == 2)
				inspect_problem(in, "job %s, fenix group %d ts %d slot %d: %s", j->name, gid,
						ts, s, why.msg);
		}
	}
	if (js) {
		json_open(js, NULL, '{');
		json_int(js, "ts", ts);
		json_open(js, "members", '[');
		for (int i = 0; i < nm; i++) {
			json_open(js, NULL, '{');
			json_int(js, "id", m[i].id);
			json_int(js, "count", m[i].count);
			json_int(js, "dtsize", m[i].dtsize);
			json_close(js, '}');
		}
		json_close(js, ']');
		json_u64(js, "bytes", total);
		json_int(js, "commit_records", records);
		json_bool(js, "complete", records == size);
	} else {
		fprintf(stdout, "    ts %d: members%s; %llu bytes in %d slot file(s); %s", ts,
			have_members ? members : " ?", (unsigned long long)total, size,
			records == size ? "complete\n" : "");
		if (records != size)
			fprintf(stdout, "incomplete (%d of %d commit records)\n", records, size);
	}
	if (!verify || !records)
		goto out;
	if (js)
		json_open(js, "slots", '[');
	for (int s = 0; s < size; s++) {
		if (js) {
			json_open(js, NULL, '{');
			json_int(js, "slot", s);
			json_str(js, "dat", st(v[s].dat));
			json_str(js, "red", st(v[s].red));
			json_str(js, "done", st(v[s].done));
			json_str(js, "error", v[s].dat == 2 ? v[s].err : NULL);
			json_close(js, '}');
		} else {
			fprintf(stdout, "      slot %d: dat %s, red %s, done %s%s%s\n", s,
				st(v[s].dat), st(v[s].red), st(v[s].done), v[s].dat == 2 ? ": " : "",
				v[s].dat == 2 ? v[s].err : "");
		}
		if (v[s].dat == 2)
			inspect_problem(in, "job %s, fenix group %d ts %d slot %d: %s damaged: %s",
					j->name, gid, ts, s, v[s].path, v[s].err);
		else if (v[s].dat == 0)
			inspect_problem(in, "job %s, fenix group %d ts %d slot %d: snapshot file missing",
					j->name, gid, ts, s);
		if (v[s].done == 2)
			inspect_problem(in, "job %s, fenix group %d ts %d slot %d: commit record damaged",
					j->name, gid, ts, s);
	}
	if (js) {
		json_close(js, ']');
		json_open(js, "lost_sets", '[');
	}
	/* Each set once, as its first valid redundancy file describes it. */
	for (int s = 0; s < size; s++) {
		const struct redundancy_info *info = &v[s].info;
		bool seen = false, lost = false;
		bool *dl, *rl;
		char ranks[256] = "", lostl[256] = "";
		size_t a = 0, b = 0;

		if (v[s].red != 1)
			continue;
		for (int q = 0; q < s; q++)
			seen |= v[q].red == 1 && v[q].info.set_id == info->set_id;
		if (seen)
			continue;
		dl = calloc(info->p + 1, sizeof(bool));
		rl = calloc(info->p + 1, sizeof(bool));
		for (int m = 0; m < info->p; m++) {
			int w = info->world[m];
			uint64_t crc = 0;
			bool ok = w >= 0 && w < size && v[w].dat == 1 && v[w].bytes == info->size[m] &&
				  !file_crc64(v[w].path, &crc) && crc == info->crc[m];

			dl[m] = !ok;
			rl[m] = !(w >= 0 && w < size && v[w].red == 1);
			lost |= dl[m] || rl[m];
			a += snprintf(ranks + a, a < sizeof(ranks) ? sizeof(ranks) - a : 0, "%s%d",
				      m ? "," : "", w);
			if (dl[m] || rl[m])
				b += snprintf(lostl + b, b < sizeof(lostl) ? sizeof(lostl) - b : 0,
					      "%s%d%s", b ? "," : "", w, dl[m] ? "" : " (redundancy file)");
		}
		if (lost) {
			bool ok = redundancy_info_feasible(info, dl, rl);

			if (js) {
				struct set_verdict sv = {info->set_id, info->p, info->tolerance,
							 info->scheme, info->world, dl, rl, ok};

				inspect_set_json(js, &sv, "slots");
			} else {
				fprintf(stdout,
					"      set %d (slots %s): lost %s; scheme %s tolerates %d: %s\n",
					info->set_id, ranks, lostl, info->scheme, info->tolerance,
					ok ? "can be rebuilt" : "CANNOT be rebuilt");
			}
			if (!ok)
				inspect_problem(in, "job %s, fenix group %d ts %d: set %d lost %s beyond "
						    "what %s rebuilds (tolerates %d)",
						j->name, gid, ts, info->set_id, lostl, info->scheme,
						info->tolerance);
		}
		free(dl);
		free(rl);
	}
	if (js)
		json_close(js, ']');
out:
	if (js)
		json_close(js, '}');
	for (int s = 0; s < size; s++)
		if (v[s].red == 1)
			redundancy_info_free(&v[s].info);
	free(v);
}

/* A group's object, left open in its "snapshots" array. */
static void group_json(struct json *js, int gid, int size, const struct fx_meta *m)
{
	json_open(js, NULL, '{');
	json_int(js, "group", gid);
	json_int(js, "slots", size);
	if (m && m->policy[0] >= 0 && m->policy[0] <= 2) {
		json_str(js, "policy", scheme[m->policy[0]]);
		json_int(js, "set_size", m->policy[1] > 0 && m->policy[1] < size ? m->policy[1] : size);
		if (m->policy[0] == 2)
			json_int(js, "k", m->policy[2] > 0 ? m->policy[2] : 2);
	} else {
		json_null(js, "policy");
	}
	if (m && m->depth >= -1) {
		json_int(js, "depth", m->depth);
		json_int(js, "start_ts", m->start_ts);
	}
	json_open(js, "snapshots", '[');
}

void inspect_fenix(struct inspect *in, const struct job *j, bool verify, struct json *js)
{
	struct fxs x = {0};
	int gids[256], ng;

	collect(in, j, &x);
	ng = distinct(&x, -1, gids);
	if (js)
		json_open(js, "fenix_groups", '[');
	for (int g = 0; g < ng && g < 256; g++) {
		int ts[1024], nt = distinct(&x, gids[g], ts), size = 0;
		struct fx_meta m;
		bool meta = false;

		for (int i = 0; i < x.n && !meta; i++)
			if (x.f[i].gid == gids[g] && x.f[i].ts < 0 &&
			    !fx_meta_load(x.f[i].dir, gids[g], &m))
				meta = true;
		/* The group's size: from the commit records and headers. */
		for (int i = 0; i < x.n; i++) {
			struct fx_done_rec r;

			if (x.f[i].gid == gids[g] && !strcmp(x.f[i].ext, "done") &&
			    !fx_done_load(x.f[i].dir, gids[g], x.f[i].ts, x.f[i].slot, &r, NULL) &&
			    (int)r.size > size)
				size = r.size;
			if (x.f[i].gid == gids[g] && x.f[i].slot >= size)
				size = x.f[i].slot + 1;
		}
		if (js) {
			group_json(js, gids[g], size, meta ? &m : NULL);
			for (int t = 0; t < nt && t < 1024; t++)
				snapshot(in, j, &x, gids[g], ts[t], size, verify, js);
			json_close(js, ']');
			json_close(js, '}');
			continue;
		}
		fprintf(stdout, "  fenix group %d: %d slot(s), ", gids[g], size);
		if (!meta)
			fprintf(stdout, "policy ? (no readable g%d.meta)", gids[g]);
		else
			fprintf(stdout, "policy %s, set size %d",
				m.policy[0] >= 0 && m.policy[0] <= 2 ? scheme[m.policy[0]] : "?",
				m.policy[1] > 0 && m.policy[1] < size ? m.policy[1] : size);
		if (meta && m.policy[0] == 2)
			fprintf(stdout, ", k %d", m.policy[2] > 0 ? m.policy[2] : 2);
		if (meta && m.depth >= -1)
			fprintf(stdout, ", depth %d, start ts %d", m.depth, m.start_ts);
		fprintf(stdout, ", %d snapshot(s)\n", nt);
		for (int t = 0; t < nt && t < 1024; t++)
			snapshot(in, j, &x, gids[g], ts[t], size, verify, NULL);
	}
	if (js)
		json_close(js, ']');
	for (int i = 0; i < x.ndirs; i++)
		free(x.dirs[i]);
	free(x.dirs);
	free(x.f);
}
