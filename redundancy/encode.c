/* Encode (DESIGN.md section 6): the collective protocol around the
 * scheme's exchange (scheme_exchange) that writes every member's
 * redundancy file - agreeing on every step's outcome, exchanging the
 * members' records and the crc64 of their files (computed as the exchange
 * reads them), installing the files only once every member has one. */
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

/* Opens this member's files for reading, with their sizes. Their crc64 is
 * computed later, as the exchange reads them. */
static int open_mine(const char *dir, const char *const *names, int n, struct lfile *lf,
		     struct why *why)
{
	int ret = lfile_alloc(lf, n);
	struct stat st;

	for (int i = 0; !ret && i < n; i++) {
		char *path = path_join(dir, names[i], "");

		if (!path)
			return -ENOMEM;
		if (!*names[i] || strchr(names[i], '/') || names[i][0] == '.') {
			/* Rebuilt files go to dir/<name>: keep names plain. */
			ret = why_set(why, -EINVAL,
				      "file name '%s' must be non-empty, without '/', not starting "
				      "with '.'",
				      names[i]);
		} else if ((lf->fd[i] = fsutil_open_private(path, O_RDONLY, why)) < 0) {
			ret = lf->fd[i];
		} else if (fault_hit(FAULT_FAIL_ENCODE_READ) || fstat(lf->fd[i], &st)) {
			ret = why_set(why, -errno, "read %s: %s", path, strerror(errno));
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
	char *path = path_join(dir, name, "");

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

static int share_prepare(const struct redundancy_set *rs, const struct set_meta *m,
			 struct crc_share *sh)
{
	int total = 0;

	sh->counts = malloc(sizeof(int) * rs->g.p);
	sh->displs = malloc(sizeof(int) * rs->g.p);
	if (!sh->counts || !sh->displs)
		return -ENOMEM;
	for (int x = 0; x < rs->g.p; x++) {
		sh->counts[x] = 1 + m->m[x].nfiles;
		sh->displs[x] = total;
		total += sh->counts[x];
	}
	sh->all = malloc(sizeof(uint64_t) * total);
	sh->mine = calloc(sh->counts[rs->g.me], sizeof(uint64_t));
	return sh->all && sh->mine ? 0 : -ENOMEM;
}

static void share_free(struct crc_share *sh)
{
	free(sh->counts);
	free(sh->displs);
	free(sh->all);
	free(sh->mine);
}

/* The end of the step that ran the exchange: every member's result and
 * crcs in one collective. On success every record gets its crcs; on a
 * failure set_agree() says why everywhere. */
static int share_end(const struct redundancy_set *rs, struct set_meta *m, struct crc_share *sh,
		     int ret, struct why *why, const char *step)
{
	bool failed = false;

	sh->mine[0] = (uint64_t)(int64_t)ret;
	if (PMPI_Allgatherv(sh->mine, sh->counts[rs->g.me], MPI_UINT64_T, sh->all, sh->counts,
			    sh->displs, MPI_UINT64_T, rs->comm) != MPI_SUCCESS)
		return -EIO;
	for (int x = 0; x < rs->g.p; x++)
		failed |= sh->all[sh->displs[x]] != 0;
	if (failed)
		return set_agree(rs, step, ret, why);
	for (int x = 0; x < rs->g.p; x++)
		for (int i = 0; i < m->m[x].nfiles; i++)
			((struct member_file *)m->m[x].file[i])->crc =
			    sh->all[sh->displs[x] + 1 + i];
	return 0;
}

/* Every member gets every member's record (the set is small; keeping all
 * of them in each redundancy file covers any tolerated loss). */
static int gather_meta(const struct redundancy_set *rs, const void *rec, size_t len,
		       struct set_meta *m)
{
	int mine = (int)len, *lens = malloc(sizeof(int) * rs->g.p),
	    *displs = malloc(sizeof(int) * rs->g.p);
	size_t total = 0;
	int ret;

	if (!lens || !displs) {
		ret = -ENOMEM;
		goto out;
	}
	ret = mpi_ret(PMPI_Allgather(&mine, 1, MPI_INT, lens, 1, MPI_INT, rs->comm));
	if (ret)
		goto out;
	for (int x = 0; x < rs->g.p; x++) {
		displs[x] = (int)total;
		total += lens[x];
	}
	m->blob = malloc(total);
	m->blob_len = total;
	if (!m->blob) {
		ret = -ENOMEM;
		goto out;
	}
	ret = mpi_ret(
	    PMPI_Allgatherv(rec, mine, MPI_BYTE, m->blob, lens, displs, MPI_BYTE, rs->comm));
	if (!ret)
		ret = meta_parse(m, rs->g.p);
	for (int x = 0; !ret && x < rs->g.p; x++)
		if (m->m[x].logical > m->max_logical)
			m->max_logical = m->m[x].logical;
	m->chunk = ret ? 0 : rs->g.ops->chunk(&rs->g, m->max_logical);
out:
	free(lens);
	free(displs);
	return ret;
}

static int encode_files(struct redundancy_set *rs, const char *dir, const char *const *names, int n,
			const char *red_name, struct why *why)
{
	struct scheme_io io = {.red_fd = -1, .corrupt_at = UINT64_MAX};
	struct set_meta m = {0};
	struct crc_parts crcs = {0};
	struct crc_share sh = {0};
	bool *data_lost = calloc(rs->g.p, sizeof(bool)), *red_lost = calloc(rs->g.p, sizeof(bool));
	char *red = path_join(dir, red_name, ""), *tmp = path_join(dir, red_name, ".tmp");
	void *rec = NULL;
	size_t reclen = 0;
	int nsec = rs->g.ops->nsections(&rs->g), ret;

	io.sec = calloc(nsec ? nsec : 1, sizeof(*io.sec));
	io.nsec = nsec;
	ret = !data_lost || !red_lost || !red || !tmp || !io.sec ? -ENOMEM : 0;
	if (ret)
		why_set(why, ret, "out of memory");
	if (!ret)
		ret = open_mine(dir, names, n, &io.lf, why);
	/* The crcs in the record are filled in by share_end(). */
	if (!ret && !(rec = record_build(&rs->g, names, n, &io.lf, NULL, &reclen)))
		ret = -ENOMEM;
	ret = set_agree(rs, "reading the files to protect", ret, why);
	if (ret)
		goto out;

	ret = gather_meta(rs, rec, reclen, &m);
	if (ret)
		why_set(why, ret, "exchanging the set's records failed: %s", strerror(-ret));
	else {
		ret = fault_hit(FAULT_FAIL_ENCODE_CREATE)
			  ? -EIO
			  : file_create(tmp, &io.red_fd,
					file_layout(&rs->g, &m, rs->g.me, io.sec, nsec));
		if (ret)
			why_set(why, ret, "create %s: %s", tmp, strerror(-ret));
	}
	if (!ret && (share_prepare(rs, &m, &sh) || crc_parts_init(&crcs, &io.lf, m.chunk)))
		ret = why_set(why, -ENOMEM, "out of memory");
	ret = set_agree(rs, "creating the redundancy file", ret, why);
	if (ret)
		goto out;

	io.meta = &m;
	io.crc = &crcs;
	for (int x = 0; x < rs->g.p; x++)
		red_lost[x] = true;
	if (fault_hit(FAULT_TRUNCATE_ENCODE))
		truncate_behind(dir, names[0], &io.lf);
	/* As a local I/O error in the exchange: the collective still runs. */
	if (fault_hit(FAULT_FAIL_ENCODE_RUN))
		io.err = -EIO;
	ret = scheme_exchange(rs, &io, data_lost, red_lost);
	if (!ret)
		ret = io.err;
	if (!ret)
		ret = crc_parts_finish(&crcs, &io.lf, sh.mine + 1);
	if (ret == -ENODATA)
		why_set(why, ret,
			"encoding %s (scheme %s) failed: a file to protect shrank "
			"while it was read (truncated by another process?)",
			red, rs->g.ops->name);
	else if (ret)
		why_set(why, ret, "encoding %s (scheme %s) failed: %s", red, rs->g.ops->name,
			strerror(-ret));
	/* Each step's failure is agreed once: after it, every member leaves. */
	ret = share_end(rs, &m, &sh, ret, why, "encoding");
	if (ret)
		goto out;
	ret = fault_hit(FAULT_FAIL_ENCODE_FINISH)
		  ? -EIO
		  : file_finish(&rs->g, &m, io.red_fd, io.sec, nsec);
	if (ret)
		why_set(why, ret, "writing %s: %s", tmp, strerror(-ret));
	/* Rename only once every member has a complete file, so that a set
	 * never mixes new and old redundancy files after a failed encode. */
	ret = set_agree(rs, "encoding", ret, why);
	if (ret)
		goto out;
	if (fault_hit(FAULT_FAIL_ENCODE_INSTALL) || rename(tmp, red))
		ret = why_set(why, -errno, "rename %s: %s", tmp, strerror(errno));
	if (!ret)
		ret = fsutil_sync_dir(dir);
	ret = set_agree(rs, "installing the redundancy file", ret, why);
	pr_debug("encoded %s: scheme %s, set %d, S %llu, C %llu", red, rs->g.ops->name,
		 rs->g.set_id, (unsigned long long)m.max_logical, (unsigned long long)m.chunk);
out:
	if (io.red_fd >= 0) {
		close(io.red_fd);
		if (ret)
			unlink(tmp); /* our own temporary, never a user file */
	}
	lfile_close(&io.lf);
	meta_free(&m);
	crc_parts_free(&crcs);
	share_free(&sh);
	free(rec);
	free(io.sec);
	free(data_lost);
	free(red_lost);
	free(red);
	free(tmp);
	return ret;
}

int redundancy_encode(struct redundancy_set *rs, const char *dir, const char *const *names, int n,
		      const char *red_name, struct why *why)
{
	if (!set_protects(&rs->g))
		return 0; /* no redundancy file (set_protects) */
	return encode_files(rs, dir, names, n, red_name, why);
}
