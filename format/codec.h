/* Compression of memory regions in images (STASIS_COMPRESS, format.h
 * version 7): lz4 or zstd, frame by frame. A packed region's pages (its
 * stored pages, after its bitmaps) are cut into frames of at most
 * CODEC_FRAME_RAW bytes; each frame is a struct packed_frame, its packed
 * bytes, and zeros up to a page (so every write stays O_DIRECT-aligned
 * and every frame starts on a page). A frame that would not shrink is
 * stored as it is (packed_bytes == raw_bytes). */
#ifndef STASIS_CODEC_H
#define STASIS_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

#define CODEC_FRAME_RAW ((uint64_t)1 << 20)

/* "lz4", "zstd" -> enum image_codec; -1 for another name ("none" is 0). */
int codec_from_name(const char *name);
const char *codec_name(uint32_t codec);

/* Room a frame of raw_bytes may need: header, the codec's bound, padding. */
uint64_t codec_frame_bound(uint64_t raw_bytes);

/* Pack raw (raw_bytes, a page multiple, <= CODEC_FRAME_RAW) into out
 * (codec_frame_bound(raw_bytes) bytes): the frame's length (a page
 * multiple), with its padding zeroed. */
uint64_t codec_pack(uint32_t codec, const void *raw, uint64_t raw_bytes, void *out);

/* The frame header at the start of a frame (avail bytes of it read, at
 * least sizeof(struct packed_frame)): its whole length, or 0 when the
 * header is not one this writer could have made. */
uint64_t codec_frame_length(const void *frame, uint64_t avail);

/* Unpack a whole frame (codec_frame_length bytes) into raw (room for
 * room bytes): its raw bytes, or 0 when they would not fit or it does not
 * decode to exactly the raw length its header says. */
uint64_t codec_unpack(uint32_t codec, const void *frame, void *raw, uint64_t room);

#endif
