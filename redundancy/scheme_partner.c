/* partner: full copies of each member's logical file on the next R members
 * of the set (1 <= R <= p - 1). Payload section q - 1 of member x is the
 * copy of member x - q, at its own (unpadded) logical size. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l.h>

#define LOG_PREFIX "redset: "
#include "log.h"
#include "internal.h"

#define PARTNER_PIECE (256u * 1024u)

static int partner_check(const struct redundancy_params *prm, int p, int *param, char *err,
			 size_t errlen)
{
	if (prm->replicas < 1 || prm->replicas > p - 1) {
		snprintf(err, errlen,
			 "scheme partner needs 1 <= STASIS_PARTNER_REPLICAS <= set size - 1 = %d, "
			 "got %d",
			 p - 1, prm->replicas);
		return -EINVAL;
	}
	*param = prm->replicas;
	return 0;
}

static int partner_tolerance(const struct redundancy_set *rs)
{
	return rs->param;
}

static uint64_t partner_chunk(const struct redundancy_set *rs, uint64_t max_logical)
{
	(void)rs;
	(void)max_logical;
	return 0;
}

static int partner_nsections(const struct redundancy_set *rs)
{
	return rs->param;
}

static uint64_t partner_section_size(const struct redundancy_set *rs, const struct set_meta *m, int x,
				     int sec)
{
	return m->m[(x - (sec + 1) + rs->p) % rs->p].logical;
}

/* Where member y's logical file can be read: y itself, or the first of its
 * right neighbours holding an intact copy. Returns the member (-1: none)
 * and in *sec its section (-1: the files themselves). */
static int partner_source(const struct redundancy_set *rs, int y, const bool *data_lost,
			  const bool *red_lost, int *sec)
{
	*sec = -1;
	if (!data_lost[y])
		return y;
	for (int j = 1; j <= rs->param; j++) {
		int h = (y + j) % rs->p;

		if (!red_lost[h]) {
			*sec = j - 1;
			return h;
		}
	}
	return -1;
}

/* Exact rather than "at most R lost": every file needed by a lost member
 * (its own, and for a lost redundancy file its R left neighbours') must
 * have an intact source. */
static bool partner_feasible(const struct redundancy_set *rs, const bool *data_lost, const bool *red_lost)
{
	int sec;

	for (int x = 0; x < rs->p; x++) {
		if (data_lost[x] && partner_source(rs, x, data_lost, red_lost, &sec) < 0)
			return false;
		for (int q = 1; red_lost[x] && q <= rs->param; q++)
			if (partner_source(rs, (x - q + rs->p) % rs->p, data_lost, red_lost,
					   &sec) < 0)
				return false;
	}
	return true;
}

static void keep_err(struct scheme_io *io, int ret)
{
	if (ret && !io->err)
		io->err = ret;
}

static void src_read(struct scheme_io *io, int sec, uint64_t off, unsigned char *buf, size_t len)
{
	int ret = sec < 0 ? io_read_data(io, off, buf, len) : io_read_section(io, sec, off, buf, len);

	if (ret) {
		keep_err(io, ret);
		memset(buf, 0, len);
	}
}

static void dst_write(struct scheme_io *io, int sec, uint64_t off, unsigned char *buf, size_t len)
{
	if (sec < 0) {
		keep_err(io, io_write_data(io, off, buf, len));
		return;
	}
	keep_err(io, full_pwrite(io->red_fd, buf, len, io->sec[sec].offset + off));
	io->sec[sec].crc = crc64_ecma_refl(io->sec[sec].crc, buf, len);
}

/* Encode: R ring shifts; in shift q every member sends its logical file to
 * x + q and receives x - q's into section q - 1. */
static int partner_encode(struct redundancy_set *rs, struct scheme_io *io, unsigned char *sbuf,
			  unsigned char *rbuf)
{
	const int p = rs->p, me = rs->me;
	const uint64_t mine = io->meta->m[me].logical;
	struct crc_parts *crc = io->crc;
	int ret = 0;

	for (int q = 1; q <= rs->param && !ret; q++) {
		int right = (me + q) % p, left = (me - q + p) % p;
		uint64_t theirs = io->meta->m[left].logical;
		/* Same number of rounds on every member (the largest file), so
		 * that each Sendrecv meets its neighbours' on both sides. */
		uint64_t end = io->meta->max_logical;

		/* Each shift reads the file again: its crc is noted once. */
		io->crc = q == 1 ? crc : NULL;
		for (uint64_t off = 0; off < end && !ret; off += PARTNER_PIECE) {
			int slen = off < mine ? (int)(mine - off < PARTNER_PIECE ? mine - off
										: PARTNER_PIECE)
					      : 0;
			int rlen = off < theirs ? (int)(theirs - off < PARTNER_PIECE ? theirs - off
										    : PARTNER_PIECE)
						: 0;

			if (slen)
				src_read(io, -1, off, sbuf, slen);
			ret = mpi_ret(PMPI_Sendrecv(sbuf, slen, MPI_BYTE, right, q, rbuf, rlen,
						    MPI_BYTE, left, q, rs->comm,
						    MPI_STATUS_IGNORE));
			if (!ret && rlen)
				dst_write(io, q - 1, off, rbuf, rlen);
		}
	}
	io->crc = crc;
	return ret;
}

/* One copy of y's logical file from its source to member x (target section
 * sec of x, -1: x's own files). Everybody walks the same list of transfers
 * in the same order, so the blocking point-to-point calls cannot cross. */
static int partner_transfer(struct redundancy_set *rs, struct scheme_io *io, int y, int x, int sec,
			    const bool *data_lost, const bool *red_lost, unsigned char *buf)
{
	uint64_t size = io->meta->m[y].logical;
	int from_sec, src = partner_source(rs, y, data_lost, red_lost, &from_sec);
	int ret = 0;

	if (rs->me != src && rs->me != x)
		return 0;
	for (uint64_t off = 0; off < size && !ret; off += PARTNER_PIECE) {
		int len = (int)(size - off < PARTNER_PIECE ? size - off : PARTNER_PIECE);

		if (rs->me == src) {
			src_read(io, from_sec, off, buf, len);
			ret = mpi_ret(PMPI_Send(buf, len, MPI_BYTE, x, 0, rs->comm));
		} else {
			ret = mpi_ret(
				PMPI_Recv(buf, len, MPI_BYTE, src, 0, rs->comm, MPI_STATUS_IGNORE));
			if (!ret)
				dst_write(io, sec, off, buf, len);
		}
	}
	return ret;
}

static int partner_run(struct redundancy_set *rs, struct scheme_io *io, const bool *data_lost,
		       const bool *red_lost)
{
	unsigned char *a = kept_buf(KEPT_PIECES, 2 * PARTNER_PIECE);
	bool encode = true;
	int ret = 0;

	if (!a)
		return -ENOMEM;
	for (int x = 0; x < rs->p; x++)
		encode = encode && !data_lost[x] && red_lost[x];
	if (encode)
		return partner_encode(rs, io, a, a + PARTNER_PIECE);
	for (int x = 0; x < rs->p && !ret; x++) {
		if (data_lost[x])
			ret = partner_transfer(rs, io, x, x, -1, data_lost, red_lost, a);
		for (int q = 1; red_lost[x] && q <= rs->param && !ret; q++)
			ret = partner_transfer(rs, io, (x - q + rs->p) % rs->p, x, q - 1,
					       data_lost, red_lost, a);
	}
	return ret;
}

const struct scheme_ops scheme_partner = {
	.name = "partner",
	.id = 2,
	.check = partner_check,
	.tolerance = partner_tolerance,
	.chunk = partner_chunk,
	.nsections = partner_nsections,
	.section_size = partner_section_size,
	.feasible = partner_feasible,
	.run = partner_run,
};
