/* The xor and rs arithmetic of stasis's redundancy sets, simulated in one
 * process (no MPI): the p members' logical files and checksum chunks are
 * buffers, and every stripe plan is applied exactly as the engine does
 * (the gatherer combines every contributor's piece in one kernel call).
 *
 * For every p <= 8 and k <= 3: every pattern of up to k lost members is
 * rebuilt byte for byte, every pattern of k + 1 is refused; for p <= 5
 * every mix of lost files / lost redundancy files agrees with
 * stripe_feasible() and rebuilds; random patterns for p = 16, 32, 64.
 * Sizes include 0, 1, odd, page +- 1 and unequal ones. Also the crc64
 * of files computed by parts as the exchange moves them (crc_combine.c): parts
 * joined equal the crc64 of the whole, fed in any order of segments, with
 * the parts never fed, fed twice or with a gap read from the files. Exit 0/1/77. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <isa-l.h>

#include "internal.h"

struct sim {
	int p, k;
	const struct stripe_kernel *kern;
	uint64_t chunk;
	unsigned char **data; /* [p] logical files, zero padded to (p-k) * chunk */
	unsigned char **csum; /* [p] k checksum chunks */
};

static unsigned long long rng = 88172645463325252ull;
static int failures;

static unsigned long long next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                       \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			failures++;                                                                \
			return -1;                                                                 \
		}                                                                                  \
	} while (0)

static unsigned char *at(struct sim *sm, int s, int pos, uint64_t off)
{
	int d = sm->p - sm->k, x = stripe_member(sm->p, sm->k, s, pos);

	if (pos < d)
		return sm->data[x] + (uint64_t)pos * sm->chunk + off;
	return sm->csum[x] + (uint64_t)(pos - d) * sm->chunk + off;
}

/* What stripe_run() computes, without the messages: piece by piece, the
 * contributors' pieces combined into the rows (combine()), the sinks get
 * the rows. */
static void apply(struct sim *sm, const struct stripe_plan *plans)
{
	size_t piece = stripe_piece(sm->p, sm->k);
	unsigned char *acc = aligned_alloc(64, piece * sm->k);
	unsigned char *rows[MAX_SET], *src[MAX_SET];

	for (int s = 0; s < sm->p; s++) {
		const struct stripe_plan *pl = &plans[s];

		if (!pl->nerased)
			continue;
		for (uint64_t off = 0; off < sm->chunk; off += piece) {
			int len = (int)(sm->chunk - off < piece ? sm->chunk - off : piece);

			for (int r = 0; r < pl->nerased; r++)
				rows[r] = acc + (size_t)r * len;
			for (int i = 0; i < pl->ncontrib; i++)
				src[i] = at(sm, s, pl->contrib[i], off);
			sm->kern->combine(pl, len, src, rows);
			for (int r = 0; r < pl->nerased; r++)
				memcpy(at(sm, s, pl->erased[r], off), acc + (size_t)r * len, len);
		}
	}
	free(acc);
}

static int sim_init(struct sim *sm, int p, int k, const struct stripe_kernel *kern,
		    const uint64_t *size)
{
	uint64_t max = 0;

	sm->p = p;
	sm->k = k;
	sm->kern = kern;
	for (int x = 0; x < p; x++)
		max = size[x] > max ? size[x] : max;
	sm->chunk = stripe_chunk(p, k, max);
	sm->data = calloc(p, sizeof(*sm->data));
	sm->csum = calloc(p, sizeof(*sm->csum));
	for (int x = 0; x < p; x++) {
		size_t db = (size_t)(p - k) * sm->chunk, cb = (size_t)k * sm->chunk;

		sm->data[x] = aligned_alloc(64, db + 64);
		sm->csum[x] = aligned_alloc(64, cb + 64);
		memset(sm->data[x], 0, db);
		memset(sm->csum[x], 0x5a, cb);
		for (uint64_t i = 0; i < size[x]; i++)
			sm->data[x][i] = (unsigned char)next();
	}
	return 0;
}

static void sim_free(struct sim *sm)
{
	for (int x = 0; x < sm->p; x++) {
		free(sm->data[x]);
		free(sm->csum[x]);
	}
	free(sm->data);
	free(sm->csum);
}

static int encode(struct sim *sm)
{
	bool none[MAX_SET] = {0}, all[MAX_SET];
	struct stripe_plan *plans = calloc(sm->p, sizeof(*plans));
	int ret;

	for (int x = 0; x < sm->p; x++)
		all[x] = true;
	ret = stripe_plans_make(sm->p, sm->k, sm->kern, none, all, plans);
	CHECK(!ret, "encode plans p %d k %d: %d", sm->p, sm->k, ret);
	apply(sm, plans);
	stripe_plans_free(sm->p, plans);
	free(plans);
	return 0;
}

/* Erase (scribble over) what the pattern loses, rebuild, compare. */
static int try_pattern(struct sim *sm, const bool *dl, const bool *rl)
{
	int p = sm->p, k = sm->k, ret;
	size_t db = (size_t)(p - k) * sm->chunk, cb = (size_t)k * sm->chunk;
	struct stripe_plan *plans = calloc(p, sizeof(*plans));
	unsigned char **sd = calloc(p, sizeof(*sd)), **sc = calloc(p, sizeof(*sc));
	bool feasible = stripe_feasible(p, k, dl, rl);

	ret = stripe_plans_make(p, k, sm->kern, dl, rl, plans);
	CHECK(feasible == (ret == 0), "p %d k %d: feasible %d but plans %d", p, k, feasible, ret);
	if (ret) {
		CHECK(ret == -EUCLEAN, "p %d k %d: plans %d, want -EUCLEAN", p, k, ret);
		goto out;
	}
	for (int x = 0; x < p; x++) {
		sd[x] = malloc(db + 1);
		sc[x] = malloc(cb + 1);
		memcpy(sd[x], sm->data[x], db);
		memcpy(sc[x], sm->csum[x], cb);
		if (dl[x])
			memset(sm->data[x], 0xee, db);
		if (rl[x])
			memset(sm->csum[x], 0xdd, cb);
	}
	apply(sm, plans);
	for (int x = 0; x < p; x++) {
		int bad = memcmp(sd[x], sm->data[x], db) || memcmp(sc[x], sm->csum[x], cb);

		memcpy(sm->data[x], sd[x], db);
		memcpy(sm->csum[x], sc[x], cb);
		if (bad) {
			fprintf(stderr, "FAIL: p %d k %d member %d (files lost %d, red lost %d) "
					"differs after rebuild\n",
				p, k, x, dl[x], rl[x]);
			failures++;
			ret = -1;
			break;
		}
	}
out:
	for (int x = 0; x < p; x++) {
		free(sd[x]);
		free(sc[x]);
	}
	free(sd);
	free(sc);
	stripe_plans_free(p, plans);
	free(plans);
	return ret == -EUCLEAN ? 0 : ret;
}

static void sizes_for(int p, int variant, uint64_t *size)
{
	static const uint64_t odd[] = {0, 1, 63, 4095, 4097, 12345, 65537, 100003};

	for (int x = 0; x < p; x++) {
		switch (variant) {
		case 0: /* unequal, including 0 and odd sizes */
			size[x] = odd[(x + p) % 8];
			break;
		case 1: /* all equal, page multiple */
			size[x] = 8192;
			break;
		case 2: /* random, one member empty */
			size[x] = x == 1 ? 0 : next() % 50000;
			break;
		default: /* all empty: nothing to code */
			size[x] = 0;
		}
	}
}

static int popcount(unsigned v)
{
	return __builtin_popcount(v);
}

static int run_exhaustive(int p, int k, const struct stripe_kernel *kern)
{
	uint64_t size[MAX_SET];
	int rebuilt = 0, refused = 0;

	for (int variant = 0; variant < 4; variant++) {
		struct sim sm;

		sizes_for(p, variant, size);
		sim_init(&sm, p, k, kern, size);
		if (encode(&sm)) {
			sim_free(&sm);
			return -1;
		}
		/* whole members lost: every pattern up to k + 1 */
		for (unsigned mask = 1; mask < 1u << p; mask++) {
			bool dl[MAX_SET], rl[MAX_SET];
			int n = popcount(mask);

			if (n > k + 1)
				continue;
			for (int x = 0; x < p; x++)
				dl[x] = rl[x] = mask >> x & 1;
			if (n > k && stripe_feasible(p, k, dl, rl)) {
				fprintf(stderr, "FAIL: p %d k %d: %d lost accepted\n", p, k, n);
				failures++;
			}
			if (try_pattern(&sm, dl, rl))
				break;
			rebuilt += n <= k;
			refused += n > k;
		}
		/* files and redundancy files lost independently */
		for (unsigned mask = 1; p <= 5 && mask < 1u << (2 * p); mask++) {
			bool dl[MAX_SET], rl[MAX_SET];

			for (int x = 0; x < p; x++) {
				dl[x] = mask >> x & 1;
				rl[x] = mask >> (p + x) & 1;
			}
			if (try_pattern(&sm, dl, rl))
				break;
		}
		sim_free(&sm);
	}
	printf("p %2d k %d %-3s: %5d patterns rebuilt, %4d refused beyond tolerance\n", p, k,
	       kern == &stripe_kernel_xor ? "xor" : "rs", rebuilt, refused);
	return 0;
}

static int run_random(int p, int k, const struct stripe_kernel *kern, int trials)
{
	uint64_t size[MAX_SET];
	struct sim sm;

	sizes_for(p, 2, size);
	sim_init(&sm, p, k, kern, size);
	if (encode(&sm)) {
		sim_free(&sm);
		return -1;
	}
	for (int t = 0; t < trials; t++) {
		bool dl[MAX_SET] = {0}, rl[MAX_SET] = {0};
		int n = 1 + t % (k + 1);

		for (int i = 0; i < n; i++) {
			int x = next() % p;

			while (dl[x])
				x = (x + 1) % p;
			dl[x] = rl[x] = true;
		}
		if (n > k && stripe_feasible(p, k, dl, rl)) {
			fprintf(stderr, "FAIL: p %d k %d: %d lost accepted\n", p, k, n);
			failures++;
		}
		if (try_pattern(&sm, dl, rl))
			break;
	}
	sim_free(&sm);
	printf("p %2d k %d %-3s: %d random patterns\n", p, k,
	       kern == &stripe_kernel_xor ? "xor" : "rs", trials);
	return 0;
}

/* Files of random sizes (some 0) as one logical file, fed to a crc
 * tracker segment by segment in a shuffled order and in random pieces,
 * some segments left out, some pieces fed twice or skipped (those parts
 * are read back from the files by crc_parts_finish). */
static int crc_trial(const char *dir, int trial)
{
	static const unsigned char buf_zero[100];
	int n = 1 + next() % 3, ret = 0;
	uint64_t seg = next() % 3 ? 4096 * (1 + next() % 40) : 0, crc[3], total = 0;
	unsigned char *all, *data[3];
	struct lfile lf = {0};
	struct crc_parts t;
	int order[400];

	CHECK(!lfile_alloc(&lf, n), "lfile_alloc");
	for (int i = 0; i < n; i++) {
		char path[600];

		lf.size[i] = next() % 4 ? next() % 500000 : (uint64_t)(next() % 3);
		data[i] = malloc(lf.size[i] + 1);
		for (uint64_t j = 0; j < lf.size[i]; j++)
			data[i][j] = (unsigned char)next();
		snprintf(path, sizeof(path), "%s/f%d", dir, i);
		lf.fd[i] = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
		CHECK(lf.fd[i] >= 0 && !full_pwrite(lf.fd[i], data[i], lf.size[i], 0), "%s", path);
		total += lf.size[i];
	}
	lf.total = total;
	all = malloc(total + 1);
	for (int i = 0, at = 0; i < n; at += lf.size[i], i++)
		memcpy(all + at, data[i], lf.size[i]);
	CHECK(!crc_parts_init(&t, &lf, seg), "crc_parts_init");
	CHECK(t.nseg <= 400, "%d segments", t.nseg);
	for (int j = 0; j < t.nseg; j++)
		order[j] = j;
	for (int j = t.nseg - 1; j > 0; j--) {
		int r = next() % (j + 1), x = order[j];

		order[j] = order[r];
		order[r] = x;
	}
	for (int q = 0; q < t.nseg; q++) {
		uint64_t lo = (uint64_t)order[q] * t.seg, hi = lo + t.seg;

		if (!(next() % 4))
			continue; /* never fed: read back */
		hi = hi < total ? hi : total;
		while (lo < hi) {
			uint64_t end = lo + 1 + next() % 70000;

			end = end < hi ? end : hi;
			crc_parts_feed(&t, &lf, lo, all + lo, end - lo);
			/* Now and then a piece again, or one skipped: that part
			 * is read back from the file. */
			if (!(next() % 50))
				crc_parts_feed(&t, &lf, lo, all + lo, end - lo);
			else if (!(next() % 50))
				end += (hi - end) / 2;
			lo = end;
		}
		/* Past the end: the logical zero padding, ignored. */
		if (hi == total)
			crc_parts_feed(&t, &lf, total, buf_zero, sizeof(buf_zero));
	}
	CHECK(!crc_parts_finish(&t, &lf, crc), "crc_parts_finish");
	for (int i = 0; i < n; i++)
		CHECK(crc[i] == crc64_ecma_refl(0, data[i], lf.size[i]),
		      "trial %d file %d of %d (size %llu, seg %llu): crc by parts differs", trial,
		      i, n, (unsigned long long)lf.size[i], (unsigned long long)seg);
	crc_parts_free(&t);
	for (int i = 0; i < n; i++)
		free(data[i]);
	free(all);
	lfile_close(&lf);
	return ret;
}

static int run_crc(void)
{
	char dir[] = "/tmp/stasis-crc-XXXXXX", cmd[64];
	const unsigned char check[] = "123456789";
	unsigned char buf[1000];

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)next();
	/* ISA-L's crc64_ecma_refl with seed 0 is CRC-64/XZ. */
	CHECK(crc64_ecma_refl(0, check, 9) == 0x995dc9bbdf1939faull, "CRC-64/XZ check value");
	for (size_t a = 0; a <= sizeof(buf); a += 1 + next() % 37)
		CHECK(crc64_combine(crc64_ecma_refl(0, buf, a),
				    crc64_ecma_refl(0, buf + a, 1000 - a),
				    1000 - a) == crc64_ecma_refl(0, buf, 1000),
		      "join at %zu", a);
	if (!mkdtemp(dir))
		return 77;
	for (int trial = 0; trial < 200 && !failures; trial++)
		crc_trial(dir, trial);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		(void)0;
	printf("crc64 by parts: 200 random trials\n");
	return 0;
}

int main(void)
{
	run_crc();
	for (int p = 2; p <= 8; p++) {
		run_exhaustive(p, 1, &stripe_kernel_xor);
		for (int k = 1; k <= 3 && k < p; k++)
			run_exhaustive(p, k, &stripe_kernel_rs);
	}
	for (int p = 16; p <= 64; p *= 2) {
		run_random(p, 1, &stripe_kernel_xor, 12);
		for (int k = 1; k <= 3; k++)
			run_random(p, k, &stripe_kernel_rs, 12);
	}
	if (failures) {
		printf("FAIL: %d failures\n", failures);
		return 1;
	}
	printf("PASS\n");
	return 0;
}
