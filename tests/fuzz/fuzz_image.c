/* libFuzzer target: the checkpoint image reader (format/image_read.c),
 * image_open + image_verify + image_read_region on any file. Flags (first
 * input byte): 1 recompute every region's data crc, 2 the region table's
 * crc, 4 the header's crc (after setting its uid to ours, as a file of
 * ours would have). See fuzz.h. */
#include <errno.h>
#include <stddef.h>

#include "fuzz.h"
#include "image.h"
#include "image_int.h"

static char path[512];

static void write_seeds(const char *dir)
{
	static uint8_t mem[6 * PAGE] __attribute__((aligned(4096)));
	uint64_t bits = 0x5; /* pages 0 and 2 of the partial region */
	struct image_region r[2] = {
	    {(uintptr_t)mem, 2 * PAGE, REGION_DATA, NULL},
	    {(uintptr_t)mem + 2 * PAGE, 4 * PAGE, REGION_ARENA, &bits},
	};
	struct image_header h;
	struct why why = WHY_INIT;

	for (size_t i = 0; i < sizeof(mem); i++)
		mem[i] = (uint8_t)(i * 131 + 7);
	for (int kind = IMAGE_FULL; kind <= IMAGE_INCREMENTAL; kind++) {
		memset(&h, 0, sizeof(h));
		h.ckpt_id = kind;
		h.parent_id = kind == IMAGE_INCREMENTAL;
		h.kind = kind;
		h.nranks = 2;
		h.state_size = 64;
		if (kind == IMAGE_FULL)
			r[1].dirty = NULL;
		else
			r[1].dirty = &bits;
		if (image_write(path, &h, r, 2, NULL, &why))
			fuzz_die(why.msg);
		fuzz_seed(dir, kind == IMAGE_FULL ? "full" : "incremental", 0, path);
		fuzz_seed(dir, kind == IMAGE_FULL ? "full-fix" : "incremental-fix", 7, path);
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *seeds = getenv("STASIS_FUZZ_SEEDS");

	(void)argc;
	(void)argv;
	fuzz_scratch();
	snprintf(path, sizeof(path), "%s/ckpt-1.r0.img", fuzz_dir);
	if (seeds) {
		write_seeds(seeds);
		exit(0);
	}
	return 0;
}

/* Recompute the checksums the flags ask for, inside the bytes there are. */
static void fix(uint8_t flags, uint8_t *f, size_t len)
{
	struct image_header h;
	struct region_record *t;
	uint64_t n, table_end;

	if (len < PAGE)
		return;
	memcpy(&h, f, sizeof(h));
	n = h.nregions;
	table_end = PAGE + n * sizeof(*t);
	if (n <= MAX_REGIONS && table_end <= len) {
		t = (struct region_record *)(f + PAGE);
		for (uint64_t i = 0; (flags & 1) && i < n; i++) {
			struct region_record rec;

			memcpy(&rec, &t[i], sizeof(rec));
			if (rec.file_offset <= len && rec.stored_bytes <= len - rec.file_offset) {
				rec.data_crc = crc64(0, f + rec.file_offset, rec.stored_bytes);
				memcpy(&t[i], &rec, sizeof(rec));
			}
		}
		if (flags & 2)
			h.table_crc = crc64(0, t, n * sizeof(*t));
	}
	if (flags & 4) {
		h.uid = getuid();
		h.header_crc = 0;
		h.header_crc = crc64(0, &h, sizeof(h));
	}
	memcpy(f, &h, sizeof(h));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct image *img;
	uint8_t *f;

	if (!size)
		return 0;
	f = malloc(size);
	memcpy(f, data + 1, size - 1);
	fix(data[0], f, size - 1);
	fuzz_put(path, f, size - 1);
	free(f);
	if (image_open(path, &img, NULL))
		return 0;
	if (!image_verify(img, NULL)) {
		for (size_t i = 0; i < image_header(img)->nregions; i++) {
			const struct region_record *r = &image_regions(img)[i];
			uint64_t n = image_region_bytes(img, i);
			char *buf = malloc(n ? n : 1);

			/* Verified a moment ago: only the frames of a packed
			 * region, which the crc does not judge, may not unpack. */
			if (image_read_region(img, i, buf, NULL) && !(r->flags & REGION_PACKED))
				abort();
			free(buf);
		}
	}
	image_close(img);
	return 0;
}
