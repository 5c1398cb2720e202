/* Frames of packed pages: see codec.h. The codecs are liblz4's and
 * libzstd's, one call each way. */
#include <lz4.h>
#include <string.h>
#include <zstd.h>

#include "codec.h"

#define PAGE ((uint64_t)STASIS_PAGE)
/* zstd's fastest level: the disk is what compression saves time on, so
 * the codec must stay well ahead of it. */
#define ZSTD_LEVEL 1

static uint64_t round_page(uint64_t v)
{
	return (v + PAGE - 1) / PAGE * PAGE;
}

int codec_from_name(const char *name)
{
	if (!strcmp(name, "none"))
		return CODEC_NONE;
	if (!strcmp(name, "lz4"))
		return CODEC_LZ4;
	if (!strcmp(name, "zstd"))
		return CODEC_ZSTD;
	return -1;
}

const char *codec_name(uint32_t codec)
{
	return codec == CODEC_LZ4 ? "lz4" : codec == CODEC_ZSTD ? "zstd" : "none";
}

uint64_t codec_frame_bound(uint64_t raw_bytes)
{
	uint64_t lz = (uint64_t)LZ4_compressBound((int)raw_bytes), zs = ZSTD_compressBound(raw_bytes);
	uint64_t most = lz > zs ? lz : zs;

	return round_page(sizeof(struct packed_frame) + (most > raw_bytes ? most : raw_bytes));
}

uint64_t codec_pack(uint32_t codec, const void *raw, uint64_t raw_bytes, void *out)
{
	struct packed_frame *f = out;
	char *data = (char *)out + sizeof(*f);
	uint64_t n = 0, room = codec_frame_bound(raw_bytes) - sizeof(*f);

	if (codec == CODEC_LZ4) {
		int got = LZ4_compress_default(raw, data, (int)raw_bytes, (int)room);

		n = got > 0 ? (uint64_t)got : 0;
	} else if (codec == CODEC_ZSTD) {
		size_t got = ZSTD_compress(data, room, raw, raw_bytes, ZSTD_LEVEL);

		n = ZSTD_isError(got) ? 0 : got;
	}
	if (!n || n >= raw_bytes) { /* did not shrink: stored as it is */
		memcpy(data, raw, raw_bytes);
		n = raw_bytes;
	}
	f->raw_bytes = (uint32_t)raw_bytes;
	f->packed_bytes = (uint32_t)n;
	memset(data + n, 0, round_page(sizeof(*f) + n) - sizeof(*f) - n);
	return round_page(sizeof(*f) + n);
}

uint64_t codec_frame_length(const void *frame, uint64_t avail)
{
	struct packed_frame f;

	if (avail < sizeof(f))
		return 0;
	memcpy(&f, frame, sizeof(f));
	if (!f.raw_bytes || f.raw_bytes % PAGE || f.raw_bytes > CODEC_FRAME_RAW ||
	    !f.packed_bytes || f.packed_bytes > f.raw_bytes)
		return 0;
	return round_page(sizeof(f) + f.packed_bytes);
}

uint64_t codec_unpack(uint32_t codec, const void *frame, void *raw, uint64_t room)
{
	struct packed_frame f;
	const char *data = (const char *)frame + sizeof(f);

	memcpy(&f, frame, sizeof(f));
	if (!codec_frame_length(frame, sizeof(f)) || f.raw_bytes > room)
		return 0;
	if (f.packed_bytes == f.raw_bytes) {
		memcpy(raw, data, f.raw_bytes);
		return f.raw_bytes;
	}
	if (codec == CODEC_LZ4) {
		int got = LZ4_decompress_safe(data, raw, (int)f.packed_bytes, (int)f.raw_bytes);

		return got == (int)f.raw_bytes ? f.raw_bytes : 0;
	}
	if (codec == CODEC_ZSTD) {
		size_t got = ZSTD_decompress(raw, f.raw_bytes, data, f.packed_bytes);

		return !ZSTD_isError(got) && got == f.raw_bytes ? f.raw_bytes : 0;
	}
	return 0;
}
