/* The on-disk format of Fenix snapshot files (fenix_int.h lists the files)
 * and its readers, without MPI: libfenix and stasis-inspect read the files
 * through these, so that there is one parser. Functions return 0 or -errno
 * (-EBADMSG: damaged). */
#ifndef STASIS_FX_FILE_H
#define STASIS_FX_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FX_DAT_MAGIC "STFENIXD"
#define FX_DONE_MAGIC "STFENIXC"

struct fx_dat_hdr {
	char magic[8];
	uint32_t version, gid, ts, slot, size, nm;
	uint64_t crc; /* of this header with crc = 0 */
};

struct fx_dat_sec {
	uint32_t mid, dtsize, count, nblocks;
	uint64_t bytes; /* data bytes after the blocks */
	uint64_t crc;	/* of this header (crc = 0), the blocks and the data */
};

struct fx_done_rec {
	char magic[8];
	uint32_t gid, ts, slot, size, nm, reserved;
	uint64_t crc; /* of this record (crc = 0) and the member ids after it */
};

/* A .dat read whole and checked (every crc), and a walk over its
 * sections: for (fx_dat_first(&d, &s); fx_dat_next(&d, &s);) ... */
struct fx_dat {
	unsigned char *buf;
	size_t len;
	struct fx_dat_hdr h;
};
struct fx_sec {
	struct fx_dat_sec s;
	const unsigned char *blocks; /* nblocks pairs of int32 (first, last) */
	const unsigned char *data;   /* s.bytes */
	size_t at;		     /* iterator state */
	uint32_t i;
};

/* Read dir/g<gid>-t<ts>.c<slot>.dat and check it all; err (may be NULL)
 * gets what is wrong. */
int fx_dat_load(const char *dir, int gid, int ts, int slot, struct fx_dat *d, char *err,
		size_t errlen);
void fx_dat_free(struct fx_dat *d);
void fx_dat_first(const struct fx_dat *d, struct fx_sec *s);
bool fx_dat_next(const struct fx_dat *d, struct fx_sec *s);

/* The commit record of (gid, ts, slot): group size and member ids
 * (*mids malloc'd, NULL when nm is 0). */
int fx_done_load(const char *dir, int gid, int ts, int slot, struct fx_done_rec *r,
		 uint32_t **mids);

/* The group record g<gid>.meta: version 1 holds the policy; version 2
 * adds depth and start_ts (-2 when not recorded). */
struct fx_meta {
	int32_t version, policy[3], depth, start_ts;
};
int fx_meta_load(const char *dir, int gid, struct fx_meta *m);

/* "g<gid>-t<ts>.c<slot>.<ext>" (ext dat, red or done) or "g<gid>.meta"
 * (*ts = -1); false for anything else (tmp files included). */
bool fx_parse_name(const char *name, int *gid, int *ts, int *slot, char *ext, size_t extlen);

#endif
