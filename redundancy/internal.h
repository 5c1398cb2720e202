/* The inside of the redundancy layer that needs no MPI: the redundancy
 * file's format, a set's geometry, the table of the schemes, the stripe
 * math and the data path. What needs MPI (a set's communicator, the
 * collective steps, the exchanges) is internal_mpi.h. Not installed; tests
 * include it to drive the pure math.
 *
 * Redundancy file <dir>/<red_name> (0600, fsync'd, written as
 * <red_name>.tmp then renamed), all integers little-endian:
 *   [0, 4096)            struct file_header (zero padded)
 *   [4096, ...)          meta: the set's member records (struct member_record,
 *                        its struct member_file entries and their names, each
 *                        record padded to 8 bytes) for ALL members of the set,
 *                        then struct payload_section[nsections]
 *   4096-aligned         payload sections (struct payload_section says where)
 * header_crc covers the header with header_crc = 0; meta_crc covers the
 * meta bytes; each section has its own crc64 (crc64_ecma_refl(0, ...)).
 *
 * Logical file of a member: its files concatenated in order, padded with
 * zeros (only logically) to the set's largest logical size S.
 *
 * Stripe layout (xor = k 1, rs = k checksum chunks): a logical file is cut
 * into p - k chunks of C bytes (C = ceil(S / (p - k)) rounded up to 4096, so
 * that pieces are whole pages in memory and in the files; files written
 * with C a multiple of 64 read the same, C is taken from the header).
 * There are p stripes; stripe s is one codeword of length p over GF(2^8)
 * in which member x holds position pos = (x - s - k) mod p: positions
 * 0..p-k-1 are data (member x's chunk number pos), positions p-k..p-1 are
 * checksums (member x's payload section pos - (p - k)). Every member thus
 * holds one position of every stripe: p - k data chunks and k checksum
 * chunks. */
#ifndef STASIS_REDUNDANCY_INTERNAL_H
#define STASIS_REDUNDANCY_INTERNAL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fsutil.h"
#include "log.h"
#include "redundancy_read.h"

#define FILE_MAGIC "STASISRD" /* 8 bytes, no NUL stored */
#define FILE_VERSION 1u
#define HEADER_BYTES 4096u
#define MAX_SET 256 /* GF(2^8): codeword length */

struct file_header {
	char magic[8];
	uint32_t version;
	uint32_t header_size; /* sizeof(struct file_header) */
	uint32_t scheme;      /* scheme_ops.id */
	uint32_t set_size;
	uint32_t set_index; /* the member that owns this file */
	uint32_t set_id;
	uint32_t param; /* rs k, partner replicas, xor 1, single 0 */
	uint32_t world_rank;
	uint64_t max_logical; /* S */
	uint64_t chunk;	      /* C (xor, rs), piece-independent */
	uint64_t meta_offset;
	uint64_t meta_bytes;	/* records + section table */
	uint64_t records_bytes; /* records only */
	uint32_t nsections;
	uint32_t reserved;
	uint64_t meta_crc;
	uint64_t header_crc;
};

struct member_record {
	uint32_t index;
	uint32_t world_rank;
	uint32_t nfiles;
	uint32_t bytes; /* this record with its files and names, multiple of 8 */
	uint64_t logical_size;
};

struct member_file {
	uint64_t size;
	uint64_t crc;
	uint32_t name_len; /* including the NUL */
	uint32_t reserved;
};

struct payload_section {
	uint64_t offset;
	uint64_t size;
	uint64_t crc;
};

/* One member's record, parsed (pointers into the set's records blob). */
struct member_info {
	int index;
	int world_rank;
	int nfiles;
	uint64_t logical;
	const struct member_file **file;
	const char **name;
};

struct set_meta {
	int p;
	uint64_t max_logical;
	uint64_t chunk;
	void *blob; /* all member records, as stored */
	size_t blob_len;
	struct member_info *m; /* [p] */
};

/* A member's logical file: open descriptors of its files in order. */
struct lfile {
	int n;
	int *fd;
	uint64_t *size;
	uint64_t total;
};

int lfile_read(const struct lfile *lf, uint64_t off, void *buf, size_t len);
int lfile_write(const struct lfile *lf, uint64_t off, const void *buf, size_t len);
int full_pread(int fd, void *buf, size_t len, uint64_t off);
int full_pwrite(int fd, const void *buf, size_t len, uint64_t off);
/* lfile_alloc: n files, none open yet; lfile_close closes what is open. */
int lfile_alloc(struct lfile *lf, int n);
void lfile_close(struct lfile *lf);

/* A redundancy set as one member sees it, without its communicator: who
 * is in it and how it is protected. A reader makes one from a file's
 * header (info.c); a set made over MPI holds one (internal_mpi.h). */
struct set_geometry {
	const struct scheme_ops *ops;
	int p;	/* members */
	int me; /* this member's index in the set */
	int set_id;
	int param;  /* rs k, partner replicas, xor 1, single 0 */
	int *world; /* world rank of each member */
};

/* crc64 of each of a logical file's files, fed by parts as its data passes
 * (crc_combine.c): the file is cut into segments of seg bytes, each segment
 * fed in order (the segments in any order). */
struct crc_parts {
	int n; /* files */
	int nseg;
	uint64_t seg;
	uint64_t *crc; /* [nseg][n] */
	uint64_t *fed; /* [nseg][n] bytes fed */
};

/* What a scheme works on during one encode or rebuild on this member. */
struct scheme_io {
	const struct set_meta *meta;
	struct lfile lf;	     /* this member's logical file (read, or written when lost) */
	int red_fd;		     /* this member's redundancy file */
	struct payload_section *sec; /* its payload sections; crc accumulated while written */
	struct payload_section *sec_seen; /* sections being checked: crc and bytes read in order */
	int nsec;
	struct crc_parts *crc; /* noted as lf's data passes (io_*_data), or NULL */
	uint64_t corrupt_at;   /* corrupt-rebuild: logical offset spoilt, UINT64_MAX none */
	int err;	       /* first local I/O error; the collective still runs on */
};

static inline void io_keep_err(struct scheme_io *io, int ret)
{
	if (ret && !io->err)
		io->err = ret;
}

/* How a scheme's data moves between the members of a set, over MPI
 * (internal_mpi.h): not at all, whole copies to neighbours
 * (exchange_copies.c), or stripes combined by a kernel (exchange.c). The
 * schemes themselves need no MPI, so that a reader can use them. */
enum scheme_exchange { EXCHANGE_NONE, EXCHANGE_COPIES, EXCHANGE_STRIPES };

/* A redundancy scheme. data_lost[x] / red_lost[x]: member x lacks its files
 * / its redundancy file. Encode is "rebuild every redundancy file from
 * intact files". */
struct scheme_ops {
	const char *name;
	uint32_t id; /* in the file header */
	/* Validate params for a set of p members: 0 or -EINVAL with why. */
	int (*check)(const struct redundancy_params *prm, int p, int *param, struct why *why);
	int (*tolerance)(const struct set_geometry *g);
	uint64_t (*chunk)(const struct set_geometry *g, uint64_t max_logical);
	/* Payload sections of member x: count, and each one's size. */
	int (*nsections)(const struct set_geometry *g);
	uint64_t (*section_size)(const struct set_geometry *g, const struct set_meta *m, int x,
				 int sec);
	bool (*feasible)(const struct set_geometry *g, const bool *data_lost, const bool *red_lost);
	enum scheme_exchange exchange;
	const struct stripe_kernel *kernel; /* EXCHANGE_STRIPES: the arithmetic, k = param */
};

/* Whether a set of this geometry protects anything. One whose scheme
 * tolerates no loss (single) writes no redundancy file: nothing could be
 * rebuilt from it, and the files it would describe check themselves (an
 * image has its own sizes and crc64). Its encode and rebuild go through
 * the same calls and only say what is lost. */
static inline bool set_protects(const struct set_geometry *g)
{
	return g->ops->tolerance(g) > 0;
}

/* scheme.c holds the one list of them; the files name them by id. */
extern const struct scheme_ops scheme_single, scheme_partner, scheme_xor, scheme_rs;
const struct scheme_ops *scheme_by_id(uint32_t id);

/* partner (scheme_partner.c), for its copies (exchange_copies.c): where
 * member y's logical file can be read, y itself or the first of its right
 * neighbours holding an intact copy. Returns the member (-1: none) and in
 * *sec its section (-1: the files themselves). */
#define PARTNER_PIECE (256u * 1024u)
int partner_source(const struct set_geometry *g, int y, const bool *data_lost, const bool *red_lost,
		   int *sec);

/* ---- stripe math (stripe_plan.c, no MPI) ---- */

static inline int stripe_pos(int p, int k, int s, int x)
{
	return (((x - s - k) % p) + p) % p;
}

static inline int stripe_member(int p, int k, int s, int pos)
{
	return (s + k + pos) % p;
}

/* Plan of one stripe: which positions are rebuilt (erased) and from which
 * p - k surviving positions (contrib, in codeword order). tables belong to the
 * kernel and may be shared by stripes with the same position pattern. */
struct stripe_plan {
	int ncontrib;
	int nerased;
	short contrib[MAX_SET];
	short erased[MAX_SET];
	unsigned char *tables;
	bool owns_tables;
};

/* The arithmetic of a scheme on a piece of a stripe (len bytes, 64-byte
 * aligned): rows[0..nerased) = the combination that the plan gives of the
 * contributors' pieces src[0..ncontrib), in contributor order. */
struct stripe_kernel {
	int (*prepare)(int p, int k, struct stripe_plan *pl);
	void (*combine)(const struct stripe_plan *pl, int len, unsigned char **src,
			unsigned char **rows);
};

extern const struct stripe_kernel stripe_kernel_xor, stripe_kernel_rs;

/* Plans of the p stripes for members' losses; -EUCLEAN when a stripe has
 * more than k erased positions, -ENOMEM. plans[] is filled on success. */
int stripe_plans_make(int p, int k, const struct stripe_kernel *kern, const bool *data_lost,
		      const bool *red_lost, struct stripe_plan *plans);
void stripe_plans_free(int p, struct stripe_plan *plans);
/* Whether every stripe has at most k erased positions. */
bool stripe_feasible(int p, int k, const bool *data_lost, const bool *red_lost);
uint64_t stripe_chunk(int p, int k, uint64_t max_logical);
/* Bytes per piece: a few pieces of every stripe this member touches stay
 * in cache together. Same on all members for the same p, k. */
size_t stripe_piece(int p, int k);

#define PASS_PIECE (1u << 20) /* buffer of the crc passes over whole files */

/* ---- the data path (io.c, crc_combine.c) ---- */

/* Buffers kept warm for the life of the process, one per use: the
 * exchange's pieces, and the crc passes over whole files. A buffer of at
 * least bytes (its contents undefined), or NULL. */
enum kept_use { KEPT_PIECES, KEPT_PASS, KEPT_USES };
unsigned char *kept_buf(enum kept_use use, size_t bytes);

/* len bytes of io's logical file at lo read into buf / written from buf,
 * their crc noted when io->crc (a write also applies io->corrupt_at). */
int io_read_data(struct scheme_io *io, uint64_t lo, unsigned char *buf, size_t len);
int io_write_data(struct scheme_io *io, uint64_t lo, unsigned char *buf, size_t len);
/* What io_write_data does before writing (the fault point, the crc). */
void io_note_data(struct scheme_io *io, uint64_t lo, unsigned char *buf, size_t len);
/* Where len bytes of lf at lo go when that is one write: true with fd,
 * off and n (0 when all of it is the zero padding past the files), false
 * when they span files. */
bool lfile_place(const struct lfile *lf, uint64_t lo, size_t len, int *fd, uint64_t *off, size_t *n);
/* len bytes at off of payload section i of io's redundancy file, their crc
 * noted when io->sec_seen. */
int io_read_section(struct scheme_io *io, int i, uint64_t off, unsigned char *buf, size_t len);

/* A write through io_uring. ring_write_start: 0 when in flight (the caller
 * keeps w until ring_write_reap returns it), 1 when already done (without
 * io_uring), res then holds 0 or -errno. */
struct ring_write {
	int fd;
	const unsigned char *buf;
	size_t len;
	uint64_t off;
	int res;
};
int ring_write_start(struct ring_write *w);
/* A finished write (res set), or NULL when none is in flight or, without
 * wait, none has finished. */
struct ring_write *ring_write_reap(bool wait);
unsigned ring_write_inflight(void);

/* crc(A || B) from crc(A), crc(B) and |B| (crc64_ecma_refl, seed 0). */
uint64_t crc64_combine(uint64_t crc_a, uint64_t crc_b, uint64_t len_b);
/* seg 0: one segment. */
int crc_parts_init(struct crc_parts *t, const struct lfile *lf, uint64_t seg);
void crc_parts_free(struct crc_parts *t);
void crc_parts_feed(struct crc_parts *t, const struct lfile *lf, uint64_t lo,
		    const unsigned char *buf, size_t len);
/* Each file's crc64 into crc[n]; the parts not fed whole, once and in
 * order, are read from the files. */
int crc_parts_finish(const struct crc_parts *t, const struct lfile *lf, uint64_t *crc);
/* crc64 of size bytes of fd from off, read into the kept pass buffer. */
int crc64_range(int fd, uint64_t off, uint64_t size, uint64_t *crc);

/* ---- the redundancy file (file_format.c) ---- */

char *path_join(const char *dir, const char *name, const char *suffix); /* malloc'd */
void *record_build(const struct set_geometry *g, const char *const *names, int n,
		   const struct lfile *lf, const uint64_t *crc, size_t *len);
int meta_parse(struct set_meta *m, int p);
void meta_free(struct set_meta *m);
uint64_t file_layout(const struct set_geometry *g, const struct set_meta *m, int x,
		     struct payload_section *sec, int nsec);
int file_create(const char *path, int *fd, uint64_t size);
int file_finish(const struct set_geometry *g, const struct set_meta *m, int fd,
		const struct payload_section *sec, int nsec);
int file_load(const struct set_geometry *g, const char *path, struct set_meta *m,
	      struct payload_section **secp, int *fdp, bool payload);

#endif
