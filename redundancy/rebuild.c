/* Rebuild (DESIGN.md section 6): the collective protocol around the
 * scheme's exchange (scheme_exchange) that gives back lost members their
 * files and redundancy files - agreeing on every step's outcome, sharing
 * the records of a member whose redundancy file is valid, checking the
 * survivors' sources as the exchange reads them, and installing what was
 * rebuilt once its crc64 matches its record. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOG_PREFIX "redset: "
#include "fault.h"
#include "log.h"
#include "internal_mpi.h"

/* Opens this member's files at their recorded sizes, or false (they are
 * then rebuilt). Their crc64 is checked by check_mine(), after the
 * exchange has read them. */
static bool open_recorded(const char *dir, const struct member_info *mi, struct lfile *lf)
{
	bool ok = !lfile_alloc(lf, mi->nfiles);
	struct stat st;

	for (int i = 0; ok && i < mi->nfiles; i++) {
		char *path = path_join(dir, mi->name[i], "");

		lf->fd[i] = path ? fsutil_open_private(path, O_RDONLY, NULL) : -1;
		ok = lf->fd[i] >= 0 && !fstat(lf->fd[i], &st) &&
		     (uint64_t)st.st_size == mi->file[i]->size;
		if (!ok)
			pr_warn("%s does not match its record: rebuilding it", path ? path : "?");
		lf->size[i] = mi->file[i]->size;
		lf->total += lf->size[i];
		free(path);
	}
	if (!ok)
		lfile_close(lf);
	return ok;
}

/* This member's files (when mine is not NULL) and loaded redundancy
 * sections (when io->sec_seen) against their records: the caller's
 * have_mine may predate a flipped byte, and a source that does not match
 * would spread the damage to the lost members. The crc64 of what the
 * exchange read is known already; the rest is read now. */
static void check_mine(const char *dir, const char *red, struct scheme_io *io,
		       const struct member_info *mi, const struct crc_parts *mine, int *data_bad,
		       int *red_bad)
{
	uint64_t *crc = calloc(mi->nfiles ? mi->nfiles : 1, sizeof(*crc)), c;

	if (mine && (!crc || crc_parts_finish(mine, &io->lf, crc))) {
		*data_bad = 1;
		pr_warn("%s: the files of member %d cannot be read back: rebuilding them", dir,
			mi->index);
	}
	for (int i = 0; mine && !*data_bad && i < mi->nfiles; i++) {
		*data_bad = crc[i] != mi->file[i]->crc;
		if (*data_bad)
			pr_warn("%s/%s does not match its record: rebuilding it", dir, mi->name[i]);
	}
	for (int i = 0; io->sec_seen && !*red_bad && i < io->nsec; i++) {
		const struct payload_section *seen = &io->sec_seen[i];

		if (seen->size == io->sec[i].size)
			c = seen->crc;
		else if (crc64_range(io->red_fd, io->sec[i].offset, io->sec[i].size, &c))
			c = ~io->sec[i].crc;
		*red_bad = c != io->sec[i].crc;
		if (*red_bad)
			pr_warn("%s: section %d does not match its crc64: rebuilding it", red, i);
	}
	free(crc);
}

/* The members' records and geometry, from the lowest member whose
 * redundancy file is valid. */
static int bcast_meta(const struct redundancy_set *rs, int root, struct set_meta *m)
{
	uint64_t hdr[3] = {m->blob_len, m->max_logical, m->chunk};
	void *blob;
	int ret, ok;

	ret = mpi_ret(PMPI_Bcast(hdr, 3, MPI_UINT64_T, root, rs->comm));
	if (ret)
		return ret;
	if (rs->g.me == root) {
		blob = m->blob;
	} else {
		meta_free(m);
		blob = malloc(hdr[0] ? hdr[0] : 1);
	}
	/* Every member must have room before the broadcast, or one that has
	 * none would leave the others waiting in it. */
	ok = blob != NULL;
	ret = mpi_ret(PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, rs->comm));
	if (!ret && !ok)
		ret = -ENOMEM;
	if (!ret)
		ret = mpi_ret(PMPI_Bcast(blob, (int)hdr[0], MPI_BYTE, root, rs->comm));
	if (rs->g.me == root || !blob)
		return ret;
	m->blob = blob;
	m->blob_len = hdr[0];
	m->max_logical = hdr[1];
	m->chunk = hdr[2];
	return ret ? ret : meta_parse(m, rs->g.p);
}

/* Creates the temporaries a lost member's files are rebuilt into, at their
 * recorded sizes (sparse: the zero tail needs no write). */
static int open_rebuilt(const char *dir, const struct member_info *mi, struct lfile *lf,
			struct why *why)
{
	int ret = lfile_alloc(lf, mi->nfiles);

	if (mkdir(dir, 0700) && errno != EEXIST)
		return why_set(why, -errno, "mkdir %s: %s", dir, strerror(errno));
	for (int i = 0; !ret && i < mi->nfiles; i++) {
		char *path = path_join(dir, mi->name[i], ".rebuild");

		if (!path)
			return -ENOMEM;
		lf->fd[i] =
		    fault_hit(FAULT_FAIL_REBUILD_CREATE)
			? -1
			: open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (lf->fd[i] < 0 || ftruncate(lf->fd[i], (off_t)mi->file[i]->size))
			ret = why_set(why, -errno, "create %s: %s", path, strerror(errno));
		lf->size[i] = mi->file[i]->size;
		lf->total += lf->size[i];
		free(path);
	}
	return ret;
}

/* The corrupt-rebuild fault point: the middle byte of the first non-empty
 * rebuilt file is spoilt as it is decoded (io_write_data). */
static uint64_t corrupt_offset(const struct lfile *lf)
{
	uint64_t start = 0;

	for (int i = 0; i < lf->n; start += lf->size[i], i++)
		if (lf->size[i])
			return fault_hit(FAULT_CORRUPT_REBUILD) ? start + lf->size[i] / 2
								: UINT64_MAX;
	return UINT64_MAX;
}

/* Syncs the rebuilt files, checks them against the recorded crc64 (noted
 * as they were written: the bytes written are the bytes checked, and
 * reading them back from the page cache would check nothing more) and
 * only then moves them to their names. */
static int install_rebuilt(const char *dir, const struct member_info *mi, struct lfile *lf,
			   const struct crc_parts *crcs, struct why *why)
{
	uint64_t *crc = calloc(mi->nfiles ? mi->nfiles : 1, sizeof(*crc));
	int ret = crc ? crc_parts_finish(crcs, lf, crc) : -ENOMEM;

	for (int i = 0; !ret && i < mi->nfiles; i++) {
		if (fsync(lf->fd[i]))
			ret = -errno;
		else if (crc[i] != mi->file[i]->crc)
			ret = why_set(why, -EBADMSG, "rebuilt %s/%s fails its crc64 check", dir,
				      mi->name[i]);
	}
	for (int i = 0; !ret && i < mi->nfiles; i++) {
		char *from = path_join(dir, mi->name[i], ".rebuild");
		char *to = path_join(dir, mi->name[i], "");

		if (!from || !to)
			ret = -ENOMEM;
		else if (fault_hit(FAULT_FAIL_REBUILD_INSTALL) || rename(from, to))
			ret = -errno;
		free(from);
		free(to);
	}
	if (!ret)
		ret = fsutil_sync_dir(dir);
	free(crc);
	return ret;
}

static void remove_rebuilt(const char *dir, const struct member_info *mi)
{
	for (int i = 0; i < mi->nfiles; i++) {
		char *path = path_join(dir, mi->name[i], ".rebuild");

		if (path)
			unlink(path); /* our own temporary */
		free(path);
	}
}

static void beyond_tolerance(const struct redundancy_set *rs, const bool *data_lost,
			     const bool *red_lost, struct why *why)
{
	char buf[1024];
	size_t n = 0;

	n += snprintf(buf + n, sizeof(buf) - n, "set %d (ranks ", rs->g.set_id);
	for (int x = 0; x < rs->g.p && n < sizeof(buf); x++)
		n += snprintf(buf + n, sizeof(buf) - n, "%s%d", x ? "," : "", rs->g.world[x]);
	if (n < sizeof(buf))
		n += snprintf(buf + n, sizeof(buf) - n, "): lost ranks ");
	for (int x = 0, first = 1; x < rs->g.p && n < sizeof(buf); x++) {
		if (!data_lost[x] && !red_lost[x])
			continue;
		n += snprintf(buf + n, sizeof(buf) - n, "%s%d%s", first ? "" : ",", rs->g.world[x],
			      data_lost[x] ? "" : " (redundancy file)");
		first = 0;
	}
	if (n < sizeof(buf))
		snprintf(buf + n, sizeof(buf) - n, "; scheme %s tolerates %d", rs->g.ops->name,
			 rs->g.ops->tolerance(&rs->g));
	why_set(why, -EUCLEAN, "%s", buf);
}

/* What this member writes in one attempt of a rebuild: its files (into
 * temporaries, their crc64 noted as they are written) and its redundancy
 * file, when lost. */
static int prepare_outputs(const struct redundancy_set *rs, const char *dir, const char *tmp,
			   const struct set_meta *m, struct scheme_io *io, struct crc_parts *crcs,
			   bool data_new, bool red_new, struct why *why)
{
	int ret = 0;

	if (data_new) {
		ret = open_rebuilt(dir, &m->m[rs->g.me], &io->lf, why);
		if (!ret && crc_parts_init(crcs, &io->lf, m->chunk))
			ret = -ENOMEM;
		io->crc = crcs;
		io->corrupt_at = ret ? UINT64_MAX : corrupt_offset(&io->lf);
	}
	if (!ret && red_new) {
		free(io->sec);
		io->sec = calloc(io->nsec ? io->nsec : 1, sizeof(*io->sec));
		if (!io->sec)
			ret = -ENOMEM;
		else if (mkdir(dir, 0700) && errno != EEXIST)
			ret = -errno;
		else
			ret = file_create(tmp, &io->red_fd,
					  file_layout(&rs->g, m, rs->g.me, io->sec, io->nsec));
		if (ret)
			why_set(why, ret, "create %s: %s", tmp, strerror(-ret));
	}
	return ret;
}

/* Undoes prepare_outputs (an attempt given up): nothing but our own
 * temporaries is removed. */
static void drop_outputs(const char *dir, const char *tmp, const struct member_info *mi,
			 struct scheme_io *io, struct crc_parts *crcs, bool data_new, bool red_new)
{
	if (data_new) {
		remove_rebuilt(dir, mi);
		lfile_close(&io->lf);
		crc_parts_free(crcs);
		io->crc = NULL;
		io->corrupt_at = UINT64_MAX;
	}
	if (red_new) {
		if (io->red_fd >= 0)
			close(io->red_fd);
		io->red_fd = -1;
		unlink(tmp); /* our own temporary */
	}
}

/* After an attempt: which members found their own files or redundancy
 * file damaged, and whether the attempt failed anywhere (then
 * set_agree() says why everywhere), in one collective. */
static int share_checks(const struct redundancy_set *rs, int ret, int data_bad, int red_bad,
			int *flags, struct why *why)
{
	int mine[3] = {ret, data_bad, red_bad};
	bool failed = false;

	if (PMPI_Allgather(mine, 3, MPI_INT, flags, 3, MPI_INT, rs->comm) != MPI_SUCCESS)
		return -EIO;
	for (int x = 0; x < rs->g.p; x++)
		failed |= flags[3 * x] != 0;
	return failed ? set_agree(rs, "rebuild", ret, why) : 0;
}

/* A set that protects nothing (set_protects) has no redundancy file: what
 * a member lost stays lost, and every member says which. */
static int rebuild_nothing(const struct redundancy_set *rs, bool have_mine, struct why *why)
{
	bool data_lost[MAX_SET] = {0}, red_lost[MAX_SET] = {0}, lost_any = false;
	int mine = have_mine, have[MAX_SET], ret;

	ret = mpi_ret(PMPI_Allgather(&mine, 1, MPI_INT, have, 1, MPI_INT, rs->comm));
	for (int x = 0; !ret && x < rs->g.p; x++) {
		data_lost[x] = !have[x];
		lost_any |= data_lost[x];
	}
	if (!ret && lost_any) {
		beyond_tolerance(rs, data_lost, red_lost, why);
		ret = -EUCLEAN;
	}
	return ret;
}

static int rebuild_set(struct redundancy_set *rs, const char *dir, const char *red_name,
		       bool have_mine, struct why *why)
{
	struct scheme_io io = {.red_fd = -1, .corrupt_at = UINT64_MAX};
	struct set_meta m = {0};
	struct crc_parts crcs = {0}, mine_crcs = {0};
	int nsec = rs->g.ops->nsections(&rs->g), p = rs->g.p, root = -1, ret;
	int *flags = calloc((size_t)3 * p, sizeof(int)), mine[2];
	bool *data_lost = calloc(p, sizeof(bool)), *red_lost = calloc(p, sizeof(bool));
	char *red = path_join(dir, red_name, ""), *tmp = path_join(dir, red_name, ".tmp");
	struct payload_section *seen = calloc(nsec ? nsec : 1, sizeof(*seen));
	bool red_ok, red_new = false, data_new = false, checked = false, lost_any = false;
	int have;

	ret = !flags || !data_lost || !red_lost || !red || !tmp || !seen ? -ENOMEM : 0;
	if (ret)
		why_set(why, ret, "out of memory");
	/* Collective: a member that stopped here alone would hang the others. */
	ret = set_agree(rs, "starting the rebuild", ret, why);
	if (ret)
		goto out;

	/* The sections' crc64 is checked as the exchange reads them. */
	red_ok = file_load(&rs->g, red, &m, &io.sec, &io.red_fd, false) == 0;
	if (!red_ok)
		pr_info("%s: missing or not valid", red);
	io.nsec = nsec;
	io.sec_seen = red_ok ? seen : NULL;
	mine[0] = red_ok;
	mine[1] = have_mine;
	ret = mpi_ret(PMPI_Allgather(mine, 2, MPI_INT, flags, 2, MPI_INT, rs->comm));
	if (ret)
		goto out;
	for (int x = p - 1; x >= 0; x--) {
		red_lost[x] = !flags[2 * x];
		data_lost[x] = !flags[2 * x + 1];
		if (flags[2 * x])
			root = x;
	}
	if (root < 0) {
		/* Nobody knows the names and sizes: nothing can be rebuilt. */
		beyond_tolerance(rs, data_lost, red_lost, why);
		ret = -EUCLEAN;
		goto out;
	}
	ret = bcast_meta(rs, root, &m);
	if (ret)
		why_set(why, ret, "exchanging the set's records failed: %s", strerror(-ret));
	ret = set_agree(rs, "rebuild", ret, why);
	if (ret)
		goto out;

	have = have_mine && open_recorded(dir, &m.m[rs->g.me], &io.lf) &&
	       !crc_parts_init(&mine_crcs, &io.lf, m.chunk);
	if (!have)
		lfile_close(&io.lf);
	io.crc = have ? &mine_crcs : NULL;
	ret = mpi_ret(PMPI_Allgather(&have, 1, MPI_INT, flags, 1, MPI_INT, rs->comm));
	if (ret)
		goto out;
	for (int x = 0; x < p; x++)
		data_lost[x] = !flags[x];

	/* Attempts: decode with the sources as they are, their crc64 checked
	 * on the way; a source that turns out damaged is lost, and the
	 * decoding runs again without it (each member is checked once). */
	for (;;) {
		int nlost = 0, data_bad = 0, red_bad = 0;

		for (int x = 0; x < p; x++)
			nlost += data_lost[x] || red_lost[x];
		if (nlost && !rs->g.ops->feasible(&rs->g, data_lost, red_lost)) {
			beyond_tolerance(rs, data_lost, red_lost, why);
			ret = -EUCLEAN;
			goto out;
		}
		data_new = data_lost[rs->g.me];
		red_new = red_lost[rs->g.me];
		io.meta = &m;
		if (nlost) {
			pr_info("set %d: rebuilding %d member(s), scheme %s", rs->g.set_id, nlost,
				rs->g.ops->name);
			ret = prepare_outputs(rs, dir, tmp, &m, &io, &crcs, data_new, red_new, why);
			ret = set_agree(rs, "preparing the rebuild", ret, why);
			if (ret)
				goto out;
			if (fault_hit(FAULT_FAIL_REBUILD_RUN))
				io.err = -EIO; /* as a local I/O error in the exchange */
			ret = scheme_exchange(rs, &io, data_lost, red_lost);
			if (!ret)
				ret = io.err;
			if (ret)
				why_set(why, ret, "rebuild (scheme %s) failed: %s", rs->g.ops->name,
					strerror(-ret));
		}
		if (!ret && !checked)
			check_mine(dir, red, &io, &m.m[rs->g.me], data_new ? NULL : &mine_crcs,
				   &data_bad, &red_bad);
		checked = true;
		ret = share_checks(rs, ret, data_bad, red_bad, flags, why);
		if (ret)
			goto out;
		/* Nothing checked that was not known: the outputs stand. */
		data_bad = red_bad = 0;
		for (int x = 0; x < p; x++) {
			data_bad |= flags[3 * x + 1];
			red_bad |= flags[3 * x + 2];
		}
		if (!data_bad && !red_bad)
			break;
		drop_outputs(dir, tmp, &m.m[rs->g.me], &io, &crcs, data_new, red_new);
		if (flags[3 * rs->g.me + 1])
			lfile_close(&io.lf);
		if (flags[3 * rs->g.me + 2] && io.red_fd >= 0) {
			close(io.red_fd);
			io.red_fd = -1;
		}
		for (int x = 0; x < p; x++) {
			data_lost[x] |= flags[3 * x + 1];
			red_lost[x] |= flags[3 * x + 2];
		}
		io.crc = NULL;
		io.sec_seen = NULL;
		io.err = 0;
		data_new = red_new = false;
	}
	/* Nothing lost and every source as recorded: nothing to install. */
	for (int x = 0; x < p; x++)
		lost_any |= data_lost[x] || red_lost[x];
	if (!lost_any)
		goto out;
	if (data_new)
		ret = install_rebuilt(dir, &m.m[rs->g.me], &io.lf, &crcs, why);
	if (!ret && red_new) {
		ret = file_finish(&rs->g, &m, io.red_fd, io.sec, nsec);
		if (!ret && rename(tmp, red))
			ret = -errno;
		if (!ret)
			ret = fsutil_sync_dir(dir);
		if (ret)
			why_set(why, ret, "writing %s: %s", red, strerror(-ret));
	}
	ret = set_agree(rs, "rebuild", ret, why);
out:
	if (ret && (data_new || red_new))
		drop_outputs(dir, tmp, &m.m[rs->g.me], &io, &crcs, data_new, red_new);
	if (io.red_fd >= 0)
		close(io.red_fd);
	lfile_close(&io.lf);
	meta_free(&m);
	crc_parts_free(&crcs);
	crc_parts_free(&mine_crcs);
	free(seen);
	free(io.sec);
	free(flags);
	free(data_lost);
	free(red_lost);
	free(red);
	free(tmp);
	return ret;
}

int redundancy_rebuild(struct redundancy_set *rs, const char *dir, const char *red_name,
		       bool have_mine, struct why *why)
{
	if (!set_protects(&rs->g))
		return rebuild_nothing(rs, have_mine, why);
	return rebuild_set(rs, dir, red_name, have_mine, why);
}
