/* stasis-inspect --verify: every checksum of every file, and per
 * redundancy set what a restart would decide (redundancy_rebuild's rules: a
 * member whose image is missing, damaged or not the one its set recorded
 * has lost its data; a member whose redundancy file does not check has lost
 * that), as a dry run: nothing is written. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"
#include "inspect.h"

static void check_image(struct ckpt *c, int rank)
{
	struct rank_files *rf = &c->r[rank];
	struct why why = WHY_INIT;
	struct image *img;
	int ret;

	if (!rf->img) {
		rf->image = FILE_ABSENT;
		return;
	}
	ret = image_open(rf->img, &img, &why);
	if (!ret) {
		const struct image_header *h = image_header(img);

		if (h->ckpt_id != c->id || h->rank != (uint32_t)rank) {
			ret = why_set(&why, -1, "%s: header says rank %u, checkpoint %llu", rf->img,
				      h->rank, (unsigned long long)h->ckpt_id);
		} else {
			ret = image_verify(img, &why);
		}
		image_close(img);
	}
	rf->image = ret ? FILE_BAD : FILE_OK;
	if (ret)
		rf->image_err = strdup(why.msg);
}

static void check_redundancy(struct ckpt *c, int rank)
{
	struct rank_files *rf = &c->r[rank];
	struct why why = WHY_INIT;

	if (!rf->red) {
		rf->redundancy = FILE_ABSENT;
		return;
	}
	if (redundancy_info_read(rf->red, &rf->red_info, &why)) {
		rf->redundancy = FILE_BAD;
		rf->red_err = strdup(why.msg);
		return;
	}
	rf->redundancy = FILE_OK;
}

/* The member's image is the one its set recorded (size and crc64 of the
 * whole file), as redundancy_rebuild's check_mine() requires of a source. */
static bool matches_record(const struct rank_files *rf, const struct redundancy_info *info, int x)
{
	uint64_t crc;

	return rf->image == FILE_OK && rf->img_bytes == info->size[x] &&
	       file_crc64(rf->img, &crc) == 0 && crc == info->crc[x];
}

/* Sets of this checkpoint from the valid redundancy files (the first one
 * read of each set describes it); in_set marks the ranks of some set. */
static void judge_sets(struct ckpt *c)
{
	for (int r = 0; r < c->nranks; r++) {
		const struct redundancy_info *info = &c->r[r].red_info;
		struct set_verdict *v = NULL;

		if (c->r[r].redundancy != FILE_OK)
			continue;
		for (int s = 0; s < c->nsets && !v; s++)
			if (c->sets[s].set_id == info->set_id)
				v = &c->sets[s];
		if (v)
			continue;
		c->sets = realloc(c->sets, (c->nsets + 1) * sizeof(*c->sets));
		if (!c->sets)
			exit(1);
		v = &c->sets[c->nsets++];
		*v = (struct set_verdict){.set_id = info->set_id,
					  .p = info->p,
					  .tolerance = info->tolerance,
					  .scheme = info->scheme};
		v->world = calloc(info->p, sizeof(int));
		v->data_lost = calloc(info->p, sizeof(bool));
		v->red_lost = calloc(info->p, sizeof(bool));
		if (!v->world || !v->data_lost || !v->red_lost)
			exit(1);
		for (int x = 0; x < info->p; x++) {
			int w = info->world[x];
			const struct rank_files *m = w >= 0 && w < c->nranks ? &c->r[w] : NULL;

			v->world[x] = w;
			v->data_lost[x] = !m || !matches_record(m, info, x);
			v->red_lost[x] = !m || m->redundancy != FILE_OK;
			if (m)
				c->r[w].in_set = true;
		}
		v->feasible = redundancy_info_feasible(info, v->data_lost, v->red_lost);
	}
}

static void verify_ckpt(struct job *j, struct ckpt *c)
{
	c->verified = true;
	c->whole = c->nranks > 0;
	for (int r = 0; r < c->nranks; r++) {
		check_image(c, r);
		if (!j->flush)
			check_redundancy(c, r);
		c->whole = c->whole && c->r[r].image == FILE_OK;
	}
	c->rebuildable = !j->flush;
	if (!j->flush)
		judge_sets(c);
	for (int r = 0; r < c->nranks; r++)
		if (c->r[r].image != FILE_OK && !c->r[r].in_set)
			c->rebuildable = false; /* in no set that still knows it */
	for (int s = 0; s < c->nsets; s++) {
		bool lost = false;

		for (int x = 0; x < c->sets[s].p; x++)
			lost = lost || c->sets[s].data_lost[x] || c->sets[s].red_lost[x];
		if (lost && !c->sets[s].feasible)
			c->rebuildable = false;
	}
}

/* Restorable: complete, every image whole or rebuildable, and so on down
 * its chain to a full image. */
static bool restorable(struct job *j, struct ckpt *c, int depth)
{
	struct ckpt *parent;

	if (!c->complete || !(c->whole || c->rebuildable) || depth > 256)
		return false;
	if (!c->parent)
		return true;
	parent = inspect_find(j, c->parent);
	return parent && parent->verified && restorable(j, parent, depth + 1);
}

static void report(struct inspect *in, struct job *j, struct ckpt *c)
{
	const char *level = j->flush ? "flush level" : "node-local level";

	for (int r = 0; r < c->nranks; r++) {
		struct rank_files *rf = &c->r[r];

		if (rf->image == FILE_ABSENT)
			inspect_problem(in, "job %s, checkpoint %llu (%s): rank %d: image missing",
					j->name, (unsigned long long)c->id, level, r);
		else if (rf->image == FILE_BAD)
			inspect_problem(in, "job %s, checkpoint %llu (%s): rank %d: image damaged: %s",
					j->name, (unsigned long long)c->id, level, r, rf->image_err);
		if (!j->flush && rf->redundancy == FILE_BAD)
			inspect_problem(in, "job %s, checkpoint %llu: rank %d: %s", j->name,
					(unsigned long long)c->id, r, rf->red_err);
		else if (!j->flush && rf->redundancy == FILE_ABSENT && j->set_size)
			inspect_problem(in, "job %s, checkpoint %llu: rank %d: redundancy file missing",
					j->name, (unsigned long long)c->id, r);
		if (rf->image != FILE_OK && !j->flush && !rf->in_set)
			fprintf(in->text,
				"job %s, checkpoint %llu: rank %d: %s: cannot be rebuilt\n", j->name,
				(unsigned long long)c->id, r,
				j->set_size ? "no redundancy file of its set survives"
					    : "no redundancy (scheme single)");
		if (rf->done && !rf->record_ok)
			inspect_problem(in, "job %s, checkpoint %llu: rank %d: commit record %s damaged",
					j->name, (unsigned long long)c->id, r, rf->done);
	}
	for (int s = 0; s < c->nsets; s++) {
		const struct set_verdict *v = &c->sets[s];
		char ranks[512] = "", lost[512] = "";
		size_t a = 0, b = 0;

		for (int x = 0; x < v->p; x++) {
			a += snprintf(ranks + a, a < sizeof(ranks) ? sizeof(ranks) - a : 0, "%s%d",
				      x ? "," : "", v->world[x]);
			if (v->data_lost[x] || v->red_lost[x])
				b += snprintf(lost + b, b < sizeof(lost) ? sizeof(lost) - b : 0,
					      "%s%d%s", b ? "," : "", v->world[x],
					      v->data_lost[x] ? "" : " (redundancy file)");
		}
		if (b)
			fprintf(in->text,
				"job %s, checkpoint %llu: set %d (ranks %s): lost %s; scheme %s "
				"tolerates %d: %s\n",
				j->name, (unsigned long long)c->id, v->set_id, ranks, lost, v->scheme,
				v->tolerance, v->feasible ? "can be rebuilt" : "CANNOT be rebuilt");
	}
	if (!c->restorable)
		inspect_problem(in, "job %s, checkpoint %llu (%s): cannot be restored%s", j->name,
				(unsigned long long)c->id, level,
				!(c->whole || c->rebuildable)
				    ? ": lost files beyond what its redundancy rebuilds"
				    : ": a checkpoint of its chain cannot");
}

void inspect_verify(struct inspect *in, struct job *j)
{
	for (int k = 0; k < j->nck; k++)
		if (j->ck[k].complete)
			verify_ckpt(j, &j->ck[k]);
	for (int k = 0; k < j->nck; k++) {
		struct ckpt *c = &j->ck[k];

		if (!c->complete)
			continue;
		c->restorable = restorable(j, c, 0);
		report(in, j, c);
	}
}

uint64_t inspect_restart_from(const struct inspect *in, const char *name, bool *flush)
{
	uint64_t best = 0;

	*flush = false;
	for (int i = 0; i < in->njobs; i++) {
		const struct job *j = &in->jobs[i];

		if (strcmp(j->name, name))
			continue;
		for (int k = 0; k < j->nck; k++)
			if (j->ck[k].restorable &&
			    (j->ck[k].id > best || (j->ck[k].id == best && *flush && !j->flush))) {
				best = j->ck[k].id;
				*flush = j->flush;
			}
	}
	return best;
}
