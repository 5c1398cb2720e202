/* The copies of partner (scheme_partner.c) over MPI: each member's
 * logical file sent whole, piece by piece, to the neighbours that keep a
 * copy of it (encode), or from a member that has it to one that lost it
 * (rebuild). */
#include <errno.h>
#include <string.h>

#include <isa-l.h>

#include "internal_mpi.h"

static void src_read(struct scheme_io *io, int sec, uint64_t off, unsigned char *buf, size_t len)
{
	int ret =
	    sec < 0 ? io_read_data(io, off, buf, len) : io_read_section(io, sec, off, buf, len);

	if (ret) {
		io_keep_err(io, ret);
		memset(buf, 0, len);
	}
}

static void dst_write(struct scheme_io *io, int sec, uint64_t off, unsigned char *buf, size_t len)
{
	if (sec < 0) {
		io_keep_err(io, io_write_data(io, off, buf, len));
		return;
	}
	io_keep_err(io, full_pwrite(io->red_fd, buf, len, io->sec[sec].offset + off));
	io->sec[sec].crc = crc64_ecma_refl(io->sec[sec].crc, buf, len);
}

/* Encode: R ring shifts; in shift q every member sends its logical file to
 * x + q and receives x - q's into section q - 1. */
static int copies_encode(struct redundancy_set *rs, struct scheme_io *io, unsigned char *sbuf,
			 unsigned char *rbuf)
{
	const int p = rs->g.p, me = rs->g.me;
	const uint64_t mine = io->meta->m[me].logical;
	struct crc_parts *crc = io->crc;
	int ret = 0;

	for (int q = 1; q <= rs->g.param && !ret; q++) {
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
			int rlen =
			    off < theirs
				? (int)(theirs - off < PARTNER_PIECE ? theirs - off : PARTNER_PIECE)
				: 0;

			if (slen)
				src_read(io, -1, off, sbuf, slen);
			ret =
			    mpi_ret(PMPI_Sendrecv(sbuf, slen, MPI_BYTE, right, q, rbuf, rlen,
						  MPI_BYTE, left, q, rs->comm, MPI_STATUS_IGNORE));
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
static int copy_transfer(struct redundancy_set *rs, struct scheme_io *io, int y, int x, int sec,
			 const bool *data_lost, const bool *red_lost, unsigned char *buf)
{
	uint64_t size = io->meta->m[y].logical;
	int from_sec, src = partner_source(&rs->g, y, data_lost, red_lost, &from_sec);
	int ret = 0;

	if (rs->g.me != src && rs->g.me != x)
		return 0;
	for (uint64_t off = 0; off < size && !ret; off += PARTNER_PIECE) {
		int len = (int)(size - off < PARTNER_PIECE ? size - off : PARTNER_PIECE);

		if (rs->g.me == src) {
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

int copies_run(struct redundancy_set *rs, struct scheme_io *io, const bool *data_lost,
	       const bool *red_lost)
{
	unsigned char *a = kept_buf(KEPT_PIECES, 2 * PARTNER_PIECE);
	bool encode = true;
	int ret = 0;

	if (!a)
		return -ENOMEM;
	for (int x = 0; x < rs->g.p; x++)
		encode = encode && !data_lost[x] && red_lost[x];
	if (encode)
		return copies_encode(rs, io, a, a + PARTNER_PIECE);
	for (int x = 0; x < rs->g.p && !ret; x++) {
		if (data_lost[x])
			ret = copy_transfer(rs, io, x, x, -1, data_lost, red_lost, a);
		for (int q = 1; red_lost[x] && q <= rs->g.param && !ret; q++)
			ret = copy_transfer(rs, io, (x - q + rs->g.p) % rs->g.p, x, q - 1,
					    data_lost, red_lost, a);
	}
	return ret;
}
