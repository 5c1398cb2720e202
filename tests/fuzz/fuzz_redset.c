/* libFuzzer target: the redundancy-file parser (codecs/redset_file.c,
 * red_load and the member records' red_meta_parse) on any file. The set it
 * is read for (scheme, size, member, parameter) is taken from the file's
 * own header when the codec accepts it, so that the geometry checks can
 * pass. Flags (first input byte): 1 recompute each payload section's crc,
 * 2 the meta crc, 4 the header crc. See fuzz.h. */
#include <stddef.h>

#include <isa-l/crc64.h>

#include "fuzz.h"
#include "internal.h"

static const struct codec_ops *const codecs[] = {&codec_single_ops, &codec_partner_ops,
						 &codec_xor_ops, &codec_rs_ops};
static char path[512];
static int world[RED_MAX_SET];

/* A set for scheme ops of p members, param k, seen from member me. */
static int make_set(struct redset *rs, const struct codec_ops *ops, int p, int me, uint32_t k)
{
	struct redset_params prm = {ops->name, p, (int)k, (int)k};
	char err[256];
	int param;

	if (p < 1 || p > 16 || me < 0 || me >= p || k > RED_MAX_SET ||
	    ops->check(&prm, p, &param, err, sizeof(err)))
		return -1;
	*rs = (struct redset){.ops = ops, .p = p, .me = me, .param = param, .world = world};
	return 0;
}

/* A valid redundancy file of member me of a set, made by red_finish. */
static void write_file(const struct codec_ops *ops, int p, int me, int k, const char *seeds,
		       const char *name)
{
	static const char *const names[] = {"ckpt-3.r0.img"};
	struct redset rs;
	struct set_meta m = {0};
	struct red_section sec[RED_MAX_SET];
	size_t len[RED_MAX_SET], at = 0;
	void *rec[RED_MAX_SET];
	uint64_t crc = 0x1234;
	int nsec, fd;

	if (make_set(&rs, ops, p, me, k))
		fuzz_die("make_set");
	for (int x = 0; x < p; x++) {
		struct lfile lf = {0};

		lf_alloc(&lf, 1);
		lf.size[0] = lf.total = 4096 * (x + 1) + 100;
		rs.me = x;
		rec[x] = red_build_record(&rs, names, 1, &lf, &crc, &len[x]);
		m.blob_len += len[x];
		lf_close(&lf);
	}
	rs.me = me;
	m.blob = malloc(m.blob_len);
	for (int x = 0; x < p; x++) {
		memcpy((char *)m.blob + at, rec[x], len[x]);
		at += len[x];
		free(rec[x]);
	}
	if (red_meta_parse(&m, p))
		fuzz_die("red_meta_parse");
	for (int x = 0; x < p; x++)
		if (m.m[x].logical > m.max_logical)
			m.max_logical = m.m[x].logical;
	m.chunk = ops->chunk(&rs, m.max_logical);
	nsec = ops->nsections(&rs);
	if (red_create(path, &fd, red_layout(&rs, &m, me, sec, nsec)))
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
	if (red_finish(&rs, &m, fd, sec, nsec))
		fuzz_die("red_finish");
	close(fd);
	red_meta_free(&m);
	fuzz_seed(seeds, name, 0, path);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *seeds = getenv("STASIS_FUZZ_SEEDS");

	(void)argc;
	(void)argv;
	fuzz_scratch();
	snprintf(path, sizeof(path), "%s/ckpt-3.r0.red", fuzz_dir);
	for (int x = 0; x < RED_MAX_SET; x++)
		world[x] = x;
	if (seeds) {
		write_file(&codec_single_ops, 2, 1, 0, seeds, "single");
		write_file(&codec_partner_ops, 3, 0, 1, seeds, "partner");
		write_file(&codec_xor_ops, 4, 2, 1, seeds, "xor");
		write_file(&codec_rs_ops, 5, 3, 2, seeds, "rs");
		exit(0);
	}
	return 0;
}

/* Recompute the checksums the flags ask for, inside the bytes there are. */
static void fix(uint8_t flags, uint8_t *f, size_t len, int nsec)
{
	struct red_header h;
	uint64_t mo, mb, rb;

	if (len < RED_HEADER_BYTES)
		return;
	memcpy(&h, f, sizeof(h));
	mo = h.meta_offset;
	mb = h.meta_bytes;
	rb = h.records_bytes;
	if (mo <= len && mb <= len - mo) {
		if ((flags & 1) && rb <= mb &&
		    (uint64_t)nsec * sizeof(struct red_section) <= mb - rb) {
			for (int i = 0; i < nsec; i++) {
				struct red_section s;
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
	const struct codec_ops *ops = &codec_xor_ops;
	struct red_header h = {{0}};
	struct redset rs;
	struct set_meta m = {0};
	struct red_section *sec = NULL;
	uint8_t *f;
	int fd = -1;

	if (!size)
		return 0;
	if (size > sizeof(h))
		memcpy(&h, data + 1, sizeof(h));
	for (size_t i = 0; i < sizeof(codecs) / sizeof(codecs[0]); i++)
		if (codecs[i]->id == h.scheme)
			ops = codecs[i];
	if (make_set(&rs, ops, (int)h.set_size, (int)h.set_index, h.param) &&
	    make_set(&rs, &codec_xor_ops, 4, 0, 1))
		abort();
	f = malloc(size);
	memcpy(f, data + 1, size - 1);
	fix(data[0], f, size - 1, rs.ops->nsections(&rs));
	fuzz_put(path, f, size - 1);
	free(f);
	if (red_load(&rs, path, &m, &sec, &fd, true) == 0) {
		close(fd);
		red_meta_free(&m);
		free(sec);
	}
	return 0;
}
