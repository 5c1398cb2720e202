/* Encode and rebuild (DESIGN.md section 6): the collective protocol common
 * to all schemes around codec_ops.run - agreeing on every step's outcome,
 * exchanging the members' records, preparing and installing the files - in
 * which encode is the rebuild of every redundancy file from intact files. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <isa-l.h>

#define LOG_PREFIX "redset: "
#include "fault.h"
#include "log.h"
#include "redset_int.h"

/* All members learn the worst result; a member that did not fail itself
 * names the one that did in err. MPI_MINLOC: the most negative errno wins,
 * ties to the lowest member. */
static int agree(const struct redset *rs, int ret, char *err, size_t errlen, const char *what)
{
	struct {
		int v;
		int r;
	} in = {ret, rs->me}, out;

	if (PMPI_Allreduce(&in, &out, 1, MPI_2INT, MPI_MINLOC, rs->comm) != MPI_SUCCESS)
		return -EIO;
	if (out.v && !ret)
		stasis_errf(err, errlen, "%s failed on rank %d (set %d): %s", what,
			      rs->world[out.r], rs->set_id, strerror(-out.v));
	return out.v;
}

/* Opens this member's files for reading, with their sizes. Their crc64 is
 * computed later, as the exchange reads them. */
static int open_mine(const char *dir, const char *const *names, int n, struct lfile *lf, char *err,
		     size_t errlen)
{
	int ret = lf_alloc(lf, n);
	struct stat st;

	for (int i = 0; !ret && i < n; i++) {
		char *path = red_path_join(dir, names[i], "");

		if (!path)
			return -ENOMEM;
		if (!*names[i] || strchr(names[i], '/') || names[i][0] == '.') {
			/* Rebuilt files go to dir/<name>: keep names plain. */
			stasis_errf(err, errlen,
				    "file name '%s' must be non-empty, without '/', not starting "
				    "with '.'",
				    names[i]);
			ret = -EINVAL;
		} else if ((lf->fd[i] = files_open_private(path, O_RDONLY, err, errlen)) < 0) {
			ret = lf->fd[i];
		} else if (fault_hit(FAULT_FAIL_ENCODE_READ) || fstat(lf->fd[i], &st)) {
			ret = -errno;
			stasis_errf(err, errlen, "read %s: %s", path, strerror(errno));
		} else {
			lf->size[i] = st.st_size;
			lf->total += st.st_size;
		}
		free(path);
	}
	return ret;
}

/* The truncate-encode fault point: this member's first file cut to half
 * its size behind the encode's back, once its size went into the records,
 * as another process might. */
static void truncate_behind(const char *dir, const char *name, const struct lfile *lf)
{
	char *path = red_path_join(dir, name, "");

	if (path && lf->n && truncate(path, (off_t)(lf->size[0] / 2)))
		pr_warn("truncate %s: %s", path, strerror(errno));
	free(path);
}

/* The crc64s of the members' files are computed during the exchange,
 * after the records were shared: the step that ends the exchange shares
 * them, with each member's result. Its buffers are made before the
 * exchange, so that no member can fail to take part. */
struct crc_share {
	int *counts, *displs; /* per member: its result, then its crcs */
	uint64_t *all;
	uint64_t *mine;
};

static int share_prepare(const struct redset *rs, const struct set_meta *m, struct crc_share *sh)
{
	int total = 0;

	sh->counts = malloc(sizeof(int) * rs->p);
	sh->displs = malloc(sizeof(int) * rs->p);
	if (!sh->counts || !sh->displs)
		return -ENOMEM;
	for (int x = 0; x < rs->p; x++) {
		sh->counts[x] = 1 + m->m[x].nfiles;
		sh->displs[x] = total;
		total += sh->counts[x];
	}
	sh->all = malloc(sizeof(uint64_t) * total);
	sh->mine = calloc(sh->counts[rs->me], sizeof(uint64_t));
	return sh->all && sh->mine ? 0 : -ENOMEM;
}

static void share_free(struct crc_share *sh)
{
	free(sh->counts);
	free(sh->displs);
	free(sh->all);
	free(sh->mine);
}

/* As agree() (the worst result everywhere, a member that did not fail
 * naming the one that did), and on success every record gets its crcs. */
static int share_end(const struct redset *rs, struct set_meta *m, struct crc_share *sh, int ret,
		     char *err, size_t errlen, const char *what)
{
	int worst = 0, who = 0;

	sh->mine[0] = (uint64_t)(int64_t)ret;
	if (PMPI_Allgatherv(sh->mine, sh->counts[rs->me], MPI_UINT64_T, sh->all, sh->counts,
			    sh->displs, MPI_UINT64_T, rs->comm) != MPI_SUCCESS)
		return -EIO;
	for (int x = 0; x < rs->p; x++) {
		int r = (int)(int64_t)sh->all[sh->displs[x]];

		if (r < worst) {
			worst = r;
			who = x;
		}
	}
	if (worst && !ret)
		stasis_errf(err, errlen, "%s failed on rank %d (set %d): %s", what, rs->world[who],
			    rs->set_id, strerror(-worst));
	for (int x = 0; !worst && x < rs->p; x++)
		for (int i = 0; i < m->m[x].nfiles; i++)
			((struct red_file *)m->m[x].file[i])->crc = sh->all[sh->displs[x] + 1 + i];
	return worst;
}

/* Every member gets every member's record (the set is small; keeping all
 * of them in each redundancy file covers any tolerated loss). */
static int gather_meta(const struct redset *rs, const void *rec, size_t len, struct set_meta *m)
{
	int mine = (int)len, *lens = malloc(sizeof(int) * rs->p), *displs = malloc(sizeof(int) * rs->p);
	size_t total = 0;
	int ret;

	if (!lens || !displs) {
		ret = -ENOMEM;
		goto out;
	}
	ret = redset_mpi_ret(PMPI_Allgather(&mine, 1, MPI_INT, lens, 1, MPI_INT, rs->comm));
	if (ret)
		goto out;
	for (int x = 0; x < rs->p; x++) {
		displs[x] = (int)total;
		total += lens[x];
	}
	m->blob = malloc(total);
	m->blob_len = total;
	if (!m->blob) {
		ret = -ENOMEM;
		goto out;
	}
	ret = redset_mpi_ret(
	    PMPI_Allgatherv(rec, mine, MPI_BYTE, m->blob, lens, displs, MPI_BYTE, rs->comm));
	if (!ret)
		ret = red_meta_parse(m, rs->p);
	for (int x = 0; !ret && x < rs->p; x++)
		if (m->m[x].logical > m->max_logical)
			m->max_logical = m->m[x].logical;
	m->chunk = ret ? 0 : rs->ops->chunk(rs, m->max_logical);
out:
	free(lens);
	free(displs);
	return ret;
}

int redset_encode(struct redset *rs, const char *dir, const char *const *names, int n,
		  const char *red_name, char *err, size_t errlen)
{
	struct codec_io io = {.red_fd = -1, .red_dfd = -1, .corrupt_at = UINT64_MAX};
	struct set_meta m = {0};
	struct red_crc crcs = {0};
	struct crc_share sh = {0};
	bool *data_lost = calloc(rs->p, sizeof(bool)), *red_lost = calloc(rs->p, sizeof(bool));
	char *red = red_path_join(dir, red_name, ""), *tmp = red_path_join(dir, red_name, ".tmp");
	void *rec = NULL;
	size_t reclen = 0;
	int nsec = rs->ops->nsections(rs), ret;

	io.sec = calloc(nsec ? nsec : 1, sizeof(*io.sec));
	io.nsec = nsec;
	ret = !data_lost || !red_lost || !red || !tmp || !io.sec ? -ENOMEM : 0;
	if (ret)
		stasis_errf(err, errlen, "out of memory");
	if (!ret)
		ret = open_mine(dir, names, n, &io.lf, err, errlen);
	/* The crcs in the record are filled in by share_end(). */
	if (!ret && !(rec = red_build_record(rs, names, n, &io.lf, NULL, &reclen)))
		ret = -ENOMEM;
	ret = agree(rs, ret, err, errlen, "reading the files to protect");
	if (ret)
		goto out;

	ret = gather_meta(rs, rec, reclen, &m);
	if (ret)
		stasis_errf(err, errlen, "exchanging the set's records failed: %s",
			      strerror(-ret));
	else {
		ret = fault_hit(FAULT_FAIL_ENCODE_CREATE)
			  ? -EIO
			  : red_create(tmp, &io.red_fd, red_layout(rs, &m, rs->me, io.sec, nsec));
		if (ret)
			stasis_errf(err, errlen, "create %s: %s", tmp, strerror(-ret));
	}
	if (!ret && (share_prepare(rs, &m, &sh) || red_crc_init(&crcs, &io.lf, m.chunk))) {
		ret = -ENOMEM;
		stasis_errf(err, errlen, "out of memory");
	}
	ret = agree(rs, ret, err, errlen, "creating the redundancy file");
	if (ret)
		goto out;

	io.meta = &m;
	io.crc = &crcs;
	io.red_dfd = red_open_direct(io.red_fd);
	io.red_direct = io.red_dfd >= 0;
	for (int x = 0; x < rs->p; x++)
		red_lost[x] = true;
	if (fault_hit(FAULT_TRUNCATE_ENCODE))
		truncate_behind(dir, names[0], &io.lf);
	/* As a local I/O error in the exchange: the collective still runs. */
	if (fault_hit(FAULT_FAIL_ENCODE_RUN))
		io.err = -EIO;
	ret = rs->ops->run(rs, &io, data_lost, red_lost);
	if (!ret)
		ret = io.err;
	if (!ret)
		ret = red_crc_finish(&crcs, &io.lf, sh.mine + 1);
	if (ret == -ENODATA)
		stasis_errf(err, errlen,
			    "encoding %s (scheme %s) failed: a file to protect shrank "
			    "while it was read (truncated by another process?)",
			    red, rs->ops->name);
	else if (ret)
		stasis_errf(err, errlen, "encoding %s (scheme %s) failed: %s", red, rs->ops->name,
			    strerror(-ret));
	ret = share_end(rs, &m, &sh, ret, err, errlen, "encoding");
	if (!ret) {
		ret = fault_hit(FAULT_FAIL_ENCODE_FINISH)
			  ? -EIO
			  : red_finish(rs, &m, io.red_fd, io.sec, nsec);
		if (ret)
			stasis_errf(err, errlen, "writing %s: %s", tmp, strerror(-ret));
	}
	/* Rename only once every member has a complete file, so that a set
	 * never mixes new and old redundancy files after a failed encode. */
	ret = agree(rs, ret, err, errlen, "encoding");
	if (!ret && (fault_hit(FAULT_FAIL_ENCODE_INSTALL) || rename(tmp, red))) {
		ret = -errno;
		stasis_errf(err, errlen, "rename %s: %s", tmp, strerror(errno));
	}
	if (!ret)
		ret = files_sync_dir(dir);
	ret = agree(rs, ret, err, errlen, "installing the redundancy file");
	pr_debug("encoded %s: scheme %s, set %d, S %llu, C %llu", red, rs->ops->name, rs->set_id,
		 (unsigned long long)m.max_logical, (unsigned long long)m.chunk);
out:
	if (io.red_dfd >= 0)
		close(io.red_dfd);
	if (io.red_fd >= 0) {
		close(io.red_fd);
		if (ret)
			unlink(tmp); /* our own temporary, never a user file */
	}
	lf_close(&io.lf);
	red_meta_free(&m);
	red_crc_free(&crcs);
	share_free(&sh);
	free(rec);
	free(io.sec);
	free(data_lost);
	free(red_lost);
	free(red);
	free(tmp);
	return ret;
}

/* ---- rebuild ---- */

/* Checks this member's files against its record (size and crc64): the
 * caller's have_mine may predate a flipped byte, and rebuilding from a
 * corrupt source would spread the damage to the lost members. */
static bool verify_mine(const char *dir, const struct member_info *mi, struct lfile *lf)
{
	bool ok = !lf_alloc(lf, mi->nfiles);
	uint64_t crc;
	struct stat st;

	for (int i = 0; ok && i < mi->nfiles; i++) {
		char *path = red_path_join(dir, mi->name[i], "");

		lf->fd[i] = path ? files_open_private(path, O_RDONLY, NULL, 0) : -1;
		ok = lf->fd[i] >= 0 && !fstat(lf->fd[i], &st) &&
		     (uint64_t)st.st_size == mi->file[i]->size &&
		     !red_range_crc(lf->fd[i], 0, mi->file[i]->size, &crc) &&
		     crc == mi->file[i]->crc;
		if (!ok)
			pr_warn("%s does not match its record: rebuilding it", path ? path : "?");
		lf->size[i] = mi->file[i]->size;
		lf->total += lf->size[i];
		free(path);
	}
	if (!ok)
		lf_close(lf);
	return ok;
}

/* The members' records and geometry, from the lowest member whose
 * redundancy file is valid. */
static int bcast_meta(const struct redset *rs, int root, struct set_meta *m)
{
	uint64_t hdr[3] = {m->blob_len, m->max_logical, m->chunk};
	void *blob;
	int ret, ok;

	ret = redset_mpi_ret(PMPI_Bcast(hdr, 3, MPI_UINT64_T, root, rs->comm));
	if (ret)
		return ret;
	if (rs->me == root) {
		blob = m->blob;
	} else {
		red_meta_free(m);
		blob = malloc(hdr[0] ? hdr[0] : 1);
	}
	/* Every member must have room before the broadcast, or one that has
	 * none would leave the others waiting in it. */
	ok = blob != NULL;
	ret = redset_mpi_ret(PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, rs->comm));
	if (!ret && !ok)
		ret = -ENOMEM;
	if (!ret)
		ret = redset_mpi_ret(PMPI_Bcast(blob, (int)hdr[0], MPI_BYTE, root, rs->comm));
	if (rs->me == root || !blob)
		return ret;
	m->blob = blob;
	m->blob_len = hdr[0];
	m->max_logical = hdr[1];
	m->chunk = hdr[2];
	return ret ? ret : red_meta_parse(m, rs->p);
}

/* Creates the temporaries a lost member's files are rebuilt into, at their
 * recorded sizes (sparse: the zero tail needs no write). */
static int open_rebuilt(const char *dir, const struct member_info *mi, struct lfile *lf,
			char *err, size_t errlen)
{
	int ret = lf_alloc(lf, mi->nfiles);

	if (mkdir(dir, 0700) && errno != EEXIST) {
		stasis_errf(err, errlen, "mkdir %s: %s", dir, strerror(errno));
		return -errno;
	}
	for (int i = 0; !ret && i < mi->nfiles; i++) {
		char *path = red_path_join(dir, mi->name[i], ".rebuild");

		if (!path)
			return -ENOMEM;
		lf->fd[i] =
		    fault_hit(FAULT_FAIL_REBUILD_CREATE)
			? -1
			: open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (lf->fd[i] < 0 || ftruncate(lf->fd[i], (off_t)mi->file[i]->size)) {
			ret = -errno;
			stasis_errf(err, errlen, "create %s: %s", path, strerror(errno));
		}
		lf->size[i] = mi->file[i]->size;
		lf->total += lf->size[i];
		free(path);
	}
	return ret;
}

/* The corrupt-rebuild fault point: the middle byte of the first non-empty
 * rebuilt file is spoilt as it is decoded (red_data_write). */
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
			   const struct red_crc *crcs, char *err, size_t errlen)
{
	uint64_t *crc = calloc(mi->nfiles ? mi->nfiles : 1, sizeof(*crc));
	int ret = crc ? red_crc_finish(crcs, lf, crc) : -ENOMEM;

	for (int i = 0; !ret && i < mi->nfiles; i++) {
		if (fsync(lf->fd[i]))
			ret = -errno;
		else if (crc[i] != mi->file[i]->crc) {
			stasis_errf(err, errlen, "rebuilt %s/%s fails its crc64 check", dir,
				      mi->name[i]);
			ret = -EBADMSG;
		}
	}
	for (int i = 0; !ret && i < mi->nfiles; i++) {
		char *from = red_path_join(dir, mi->name[i], ".rebuild");
		char *to = red_path_join(dir, mi->name[i], "");

		if (!from || !to)
			ret = -ENOMEM;
		else if (fault_hit(FAULT_FAIL_REBUILD_INSTALL) || rename(from, to))
			ret = -errno;
		free(from);
		free(to);
	}
	if (!ret)
		ret = files_sync_dir(dir);
	free(crc);
	return ret;
}

static void remove_rebuilt(const char *dir, const struct member_info *mi)
{
	for (int i = 0; i < mi->nfiles; i++) {
		char *path = red_path_join(dir, mi->name[i], ".rebuild");

		if (path)
			unlink(path); /* our own temporary */
		free(path);
	}
}

static void beyond_tolerance(const struct redset *rs, const bool *data_lost, const bool *red_lost,
			     char *err, size_t errlen)
{
	char buf[1024];
	size_t n = 0;

	n += snprintf(buf + n, sizeof(buf) - n, "set %d (ranks ", rs->set_id);
	for (int x = 0; x < rs->p && n < sizeof(buf); x++)
		n += snprintf(buf + n, sizeof(buf) - n, "%s%d", x ? "," : "", rs->world[x]);
	if (n < sizeof(buf))
		n += snprintf(buf + n, sizeof(buf) - n, "): lost ranks ");
	for (int x = 0, first = 1; x < rs->p && n < sizeof(buf); x++) {
		if (!data_lost[x] && !red_lost[x])
			continue;
		n += snprintf(buf + n, sizeof(buf) - n, "%s%d%s", first ? "" : ",", rs->world[x],
			      data_lost[x] ? "" : " (redundancy file)");
		first = 0;
	}
	if (n < sizeof(buf))
		snprintf(buf + n, sizeof(buf) - n, "; scheme %s tolerates %d", rs->ops->name,
			 rs->ops->tolerance(rs));
	stasis_errf(err, errlen, "%s", buf);
}

int redset_rebuild(struct redset *rs, const char *dir, const char *red_name, bool have_mine,
		   char *err, size_t errlen)
{
	struct codec_io io = {.red_fd = -1, .red_dfd = -1, .corrupt_at = UINT64_MAX};
	struct set_meta m = {0};
	struct red_crc crcs = {0};
	int nsec = rs->ops->nsections(rs), p = rs->p, root = -1, nlost = 0, ret;
	int *flags = calloc((size_t)2 * p, sizeof(int)), mine[2];
	bool *data_lost = calloc(p, sizeof(bool)), *red_lost = calloc(p, sizeof(bool));
	char *red = red_path_join(dir, red_name, ""), *tmp = red_path_join(dir, red_name, ".tmp");
	bool red_ok, red_new = false, data_new = false;
	int have;

	ret = !flags || !data_lost || !red_lost || !red || !tmp ? -ENOMEM : 0;
	if (ret)
		stasis_errf(err, errlen, "out of memory");
	/* Collective: a member that stopped here alone would hang the others. */
	ret = agree(rs, ret, err, errlen, "starting the rebuild");
	if (ret)
		goto out;

	red_ok = red_load(rs, red, &m, &io.sec, &io.red_fd) == 0;
	if (!red_ok)
		pr_info("%s: missing or not valid", red);
	mine[0] = red_ok;
	mine[1] = have_mine;
	ret = redset_mpi_ret(PMPI_Allgather(mine, 2, MPI_INT, flags, 2, MPI_INT, rs->comm));
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
		beyond_tolerance(rs, data_lost, red_lost, err, errlen);
		ret = -EUCLEAN;
		goto out;
	}
	ret = bcast_meta(rs, root, &m);
	if (ret) {
		stasis_errf(err, errlen, "exchanging the set's records failed: %s",
			      strerror(-ret));
		agree(rs, ret, err, errlen, "rebuild");
		goto out;
	}

	have = have_mine && verify_mine(dir, &m.m[rs->me], &io.lf);
	ret = redset_mpi_ret(PMPI_Allgather(&have, 1, MPI_INT, flags, 1, MPI_INT, rs->comm));
	if (ret)
		goto out;
	for (int x = 0; x < p; x++) {
		data_lost[x] = !flags[x];
		nlost += data_lost[x] || red_lost[x];
	}
	if (!nlost)
		goto out;
	if (!rs->ops->feasible(rs, data_lost, red_lost)) {
		beyond_tolerance(rs, data_lost, red_lost, err, errlen);
		ret = -EUCLEAN;
		goto out;
	}
	pr_info("set %d: rebuilding %d member(s), scheme %s", rs->set_id, nlost, rs->ops->name);

	data_new = data_lost[rs->me];
	red_new = red_lost[rs->me];
	if (data_new) {
		ret = open_rebuilt(dir, &m.m[rs->me], &io.lf, err, errlen);
		if (!ret && red_crc_init(&crcs, &io.lf, m.chunk))
			ret = -ENOMEM;
		io.crc = &crcs;
		io.corrupt_at = ret ? UINT64_MAX : corrupt_offset(&io.lf);
	}
	if (!ret && red_new) {
		free(io.sec);
		io.sec = calloc(nsec ? nsec : 1, sizeof(*io.sec));
		if (!io.sec)
			ret = -ENOMEM;
		else if (mkdir(dir, 0700) && errno != EEXIST)
			ret = -errno;
		else
			ret = red_create(tmp, &io.red_fd, red_layout(rs, &m, rs->me, io.sec, nsec));
		if (ret)
			stasis_errf(err, errlen, "create %s: %s", tmp, strerror(-ret));
		io.red_dfd = ret ? -1 : red_open_direct(io.red_fd);
		io.red_direct = io.red_dfd >= 0;
	}
	io.nsec = nsec;
	io.meta = &m;
	ret = agree(rs, ret, err, errlen, "preparing the rebuild");
	if (ret)
		goto out;

	if (fault_hit(FAULT_FAIL_REBUILD_RUN))
		io.err = -EIO; /* as a local I/O error in the exchange */
	ret = rs->ops->run(rs, &io, data_lost, red_lost);
	if (!ret)
		ret = io.err;
	if (ret)
		stasis_errf(err, errlen, "rebuild (scheme %s) failed: %s", rs->ops->name,
			      strerror(-ret));
	if (!ret && data_new)
		ret = install_rebuilt(dir, &m.m[rs->me], &io.lf, &crcs, err, errlen);
	if (!ret && red_new) {
		ret = red_finish(rs, &m, io.red_fd, io.sec, nsec);
		if (!ret && rename(tmp, red))
			ret = -errno;
		if (!ret)
			ret = files_sync_dir(dir);
		if (ret)
			stasis_errf(err, errlen, "writing %s: %s", red, strerror(-ret));
	}
	ret = agree(rs, ret, err, errlen, "rebuild");
out:
	if (ret && data_new)
		remove_rebuilt(dir, &m.m[rs->me]);
	if (io.red_dfd >= 0)
		close(io.red_dfd);
	if (io.red_fd >= 0)
		close(io.red_fd);
	if (ret && red_new)
		unlink(tmp); /* our own temporary */
	lf_close(&io.lf);
	red_meta_free(&m);
	red_crc_free(&crcs);
	free(io.sec);
	free(flags);
	free(data_lost);
	free(red_lost);
	free(red);
	free(tmp);
	return ret;
}
