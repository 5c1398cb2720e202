/* libFuzzer target: the redundancy-file parser (redundancy/file_format.c,
 * file_load and the member records' meta_parse) on any file. The set it
 * is read for (scheme, size, member, parameter) is taken from the file's
 * own header when the scheme accepts it, so that the geometry checks can
 * pass. Flags (first input byte): 1 recompute each payload section's crc,
 * 2 the meta crc, 4 the header crc. See fuzz.h. */
#include <stddef.h>

#include <isa-l/crc64.h>

#include "fuzz.h"
#include "internal.h"

static char path[512];
static int world[MAX_SET];

/* A set for scheme ops of p members, param k, seen from member me. */
static int make_set(struct set_geometry *g, const struct scheme_ops *ops, int p, int me, uint32_t k)
{
	struct redundancy_params prm = {ops, p, (int)k, (int)k};
	int param;

	if (p < 1 || p > 16 || me < 0 || me >= p || k > MAX_SET ||
	    ops->check(&prm, p, &param, NULL))
		return -1;
	*g = (struct set_geometry){.ops = ops, .p = p, .me = me, .param = param, .world = world};
	return 0;
}

/* A valid redundancy file of member me of a set, made by file_finish. */
static void write_file(const struct scheme_ops *ops, int p, int me, int k, const char *seeds,
		       const char *name)
{
	static const char *const names[] = {"ckpt-3.r0.img"};
	struct set_geometry g;
	struct set_meta m = {0};
	struct payload_section sec[MAX_SET];
	size_t len[MAX_SET], at = 0;
	void *rec[MAX_SET];
	uint64_t crc = 0x1234;
	int nsec, fd;

	if (make_set(&g, ops, p, me, k))
		fuzz_die("make_set");
	for (int x = 0; x < p; x++) {
		struct lfile lf = {0};

		lfile_alloc(&lf, 1);
		lf.size[0] = lf.total = 4096 * (x + 1) + 100;
		g.me = x;
		rec[x] = record_build(&g, names, 1, &lf, &crc, &len[x]);
		m.blob_len += len[x];
		lfile_close(&lf);
	}
	g.me = me;
	m.blob = malloc(m.blob_len);
	for (int x = 0; x < p; x++) {
		memcpy((char *)m.blob + at, rec[x], len[x]);
		at += len[x];
		free(rec[x]);
	}
	if (meta_parse(&m, p))
		fuzz_die("meta_parse");
	for (int x = 0; x < p; x++)
		if (m.m[x].logical > m.max_logical)
			m.max_logical = m.m[x].logical;
	m.chunk = ops->chunk(&g, m.max_logical);
	nsec = ops->nsections(&g);
	if (file_create(path, &fd, file_layout(&g, &m, me, sec, nsec)))
		fuzz_die(path);
	for (int i = 0; i < nsec; i++) {
		unsigned char *b = malloc(sec[i].size + 1);

		for (uint64_t j = 0; j < sec[i].size; j++)
			b[j] = (unsigned char)(j * 7 + i);
		if (full_pwrite(fd, b, sec[i].size, sec[i].offset))
			fuzz_die(path);
		sec[i].crc = crc64_ecma_refl(0, b, sec[i].size);
		free(b);
	}
	if (file_finish(&g, &m, fd, sec, nsec))
		fuzz_die("file_finish");
	close(fd);
	meta_free(&m);
	fuzz_seed(seeds, name, 0, path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *seeds = getenv("STASIS_FUZZ_SEEDS");

	(void)argc;
	(void)argv;
	fuzz_scratch();
	snprintf(path, sizeof(path), "%s/ckpt-3.r0.red", fuzz_dir);
	for (int x = 0; x < MAX_SET; x++)
		world[x] = x;
	if (seeds) {
		write_file(&scheme_single, 2, 1, 0, seeds, "single");
		write_file(&scheme_partner, 3, 0, 1, seeds, "partner");
		write_file(&scheme_xor, 4, 2, 1, seeds, "xor");
		write_file(&scheme_rs, 5, 3, 2, seeds, "rs");
		exit(0);
	}
	return 0;
}

/* Recompute the checksums the flags ask for, inside the bytes there are. */
static void fix(uint8_t flags, uint8_t *f, size_t len, int nsec)
{
	struct file_header h;
	uint64_t mo, mb, rb;

	if (len < HEADER_BYTES)
		return;
	memcpy(&h, f, sizeof(h));
	mo = h.meta_offset;
	mb = h.meta_bytes;
	rb = h.records_bytes;
	if (mo <= len && mb <= len - mo) {
		if ((flags & 1) && rb <= mb &&
		    (uint64_t)nsec * sizeof(struct payload_section) <= mb - rb) {
			for (int i = 0; i < nsec; i++) {
				struct payload_section s;
				uint8_t *at = f + mo + rb + i * sizeof(s);

				memcpy(&s, at, sizeof(s));
				if (s.offset <= len && s.size <= len - s.offset) {
					s.crc = crc64_ecma_refl(0, f + s.offset, s.size);
					memcpy(at, &s, sizeof(s));
				}
			}
		}
		if (flags & 2)
			h.meta_crc = crc64_ecma_refl(0, f + mo, mb);
	}
	if (flags & 4) {
		h.header_crc = 0;
		h.header_crc = crc64_ecma_refl(0, (const unsigned char *)&h, sizeof(h));
	}
	memcpy(f, &h, sizeof(h));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct scheme_ops *ops = &scheme_xor;
	struct file_header h = {{0}};
	struct set_geometry g;
	struct set_meta m = {0};
	struct payload_section *sec = NULL;
	uint8_t *f;
	int fd = -1;

	if (!size)
		return 0;
	if (size > sizeof(h))
		memcpy(&h, data + 1, sizeof(h));
	if (scheme_by_id(h.scheme))
		ops = scheme_by_id(h.scheme);
	if (make_set(&g, ops, (int)h.set_size, (int)h.set_index, h.param) &&
	    make_set(&g, &scheme_xor, 4, 0, 1))
		abort();
	f = malloc(size);
	memcpy(f, data + 1, size - 1);
	fix(data[0], f, size - 1, g.ops->nsections(&g));
	fuzz_put(path, f, size - 1);
	free(f);
	if (file_load(&g, path, &m, &sec, &fd, true) == 0) {
		close(fd);
		meta_free(&m);
		free(sec);
	}
	return 0;
}
