/* libFuzzer target: the commit-record reader (format/store.c,
 * store_read_commit) on any file. Flag 1 (first input byte): recompute the
 * record's crc. The checkpoint id asked for is the one the record names, so
 * that the reader's last check can pass too. See fuzz.h. */
#include <stddef.h>

#include <isa-l/crc64.h>

#include "fuzz.h"
#include "store.h"

static struct store st;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *seeds = getenv("STASIS_FUZZ_SEEDS");
	struct commit_record rec = {
	    .ckpt_id = 7, .parent_id = 6, .nranks = 4, .image_bytes = 1 << 20};
	char path[4200];

	(void)argc;
	(void)argv;
	fuzz_scratch();
	snprintf(st.dir, sizeof(st.dir), "%s", fuzz_dir);
	if (seeds) {
		if (store_commit(&st, &rec, NULL))
			fuzz_die("store_commit");
		store_path(&st, 7, STORE_COMMIT, path, sizeof(path));
		fuzz_seed(seeds, "record", 0, path);
		fuzz_seed(seeds, "record-fix", 1, path);
		exit(0);
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct commit_record c, got;
	uint64_t id = 1;
	char path[4200];

	if (!size)
		return 0;
	size--;
	if (size >= sizeof(c)) {
		memcpy(&c, data + 1, sizeof(c));
		id = c.ckpt_id;
		if (data[0] & 1) {
			c.crc = 0;
			c.crc = crc64_ecma_refl(0, (const unsigned char *)&c, sizeof(c));
		}
	}
	store_path(&st, id, STORE_COMMIT, path, sizeof(path));
	if (size >= sizeof(c)) {
		uint8_t *f = malloc(size);

		memcpy(f, data + 1, size);
		memcpy(f, &c, sizeof(c));
		fuzz_put(path, f, size);
		free(f);
	} else {
		fuzz_put(path, data + 1, size);
	}
	if (!store_read_commit(&st, id, &got, NULL) && got.ckpt_id != id)
		abort();
	unlink(path);
	return 0;
}
