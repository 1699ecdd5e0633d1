/* SPDX-License-Identifier: MIT */
/*
 * The in-memory dirty bitmap of one volume: one bit per block of bitmap_block_size bytes (a power
 * of two, 4 KiB..1 MiB), set while the peer misses that block, cleared once it has it. Volumes of
 * up to 2^32 blocks (16 TiB at 4 KiB), so bit indexes are uint64_t.
 *
 * Bit i lives in word i / 64, at bit position i % 64. Stored little-endian, that is byte i / 8,
 * bit i % 8: the on-disk format of meta.c and the order in which words travel between peers.
 * Bits past nbits are always zero, so a word-wise OR or popcount never sees phantom blocks.
 *
 * Persistence works in pages of 4096 bytes (512 words, 32768 bits): every call that changes a
 * word marks its page dirty, so meta_flush_bitmap() writes only what changed since the last flush.
 * Loading from disk (bitmap_load_words) does not dirty pages.
 *
 * Loop-thread only, no locking. Out-of-range bits and ranges are clipped, never a crash.
 */
#ifndef HAK_BITMAP_H
#define HAK_BITMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BITMAP_BLOCK_MIN     4096u
#define BITMAP_BLOCK_MAX     (1u << 20)
#define BITMAP_BLOCK_DEFAULT 4096u
#define BITMAP_MAX_BITS      (1ull << 32)
#define BITMAP_PAGE_BYTES    4096u
#define BITMAP_PAGE_WORDS    (BITMAP_PAGE_BYTES / 8)
#define BITMAP_PAGE_BITS     (BITMAP_PAGE_BYTES * 8)

struct bitmap;

/*
 * A cleared bitmap for a volume of volume_bytes (> 0; the last block may be short), or NULL with
 * errno: EINVAL (bad block size or zero size), EFBIG (more than 2^32 blocks), ENOMEM.
 */
struct bitmap *bitmap_create(uint64_t volume_bytes, uint32_t block_size);
void bitmap_free(struct bitmap *bm);

uint64_t bitmap_nbits(const struct bitmap *bm);
uint32_t bitmap_block_size(const struct bitmap *bm);
/* Byte offset and length of the block behind a bit (the last block may be shorter). */
uint64_t bitmap_bit_offset(const struct bitmap *bm, uint64_t bit);
uint32_t bitmap_bit_length(const struct bitmap *bm, uint64_t bit);

/* Set every block the byte range [off, off + len) touches, even partly. */
void bitmap_set_range(struct bitmap *bm, uint64_t off, uint64_t len);
/*
 * Clear only the blocks the byte range covers completely: a block partly outside it keeps its bit,
 * because its other part may still differ. The short last block counts as covered when the range
 * reaches the end of the volume.
 */
void bitmap_clear_range(struct bitmap *bm, uint64_t off, uint64_t len);
/* The same in bit indexes: bits [first, first + n). */
void bitmap_set_bits(struct bitmap *bm, uint64_t first, uint64_t n);
void bitmap_clear_bits(struct bitmap *bm, uint64_t first, uint64_t n);
void bitmap_set_bit(struct bitmap *bm, uint64_t bit);
void bitmap_clear_bit(struct bitmap *bm, uint64_t bit);
bool bitmap_test(const struct bitmap *bm, uint64_t bit);
void bitmap_set_all(struct bitmap *bm);
void bitmap_clear_all(struct bitmap *bm);

/* Number of set bits, O(1). */
uint64_t bitmap_count(const struct bitmap *bm);
/* First set (clear) bit at index >= from, or nbits when there is none. */
uint64_t bitmap_find_next_set(const struct bitmap *bm, uint64_t from);
uint64_t bitmap_find_next_clear(const struct bitmap *bm, uint64_t from);
/* The first set (clear) bit in [from, limit), or limit (nbits if limit is beyond it), found
 * without scanning past limit. A resync looking for the end of its next run in a full bitmap,
 * or a read asking whether its few blocks are dirty in a clean one, used to scan all the rest of
 * a bitmap that is 32 MiB for a 1 TiB volume, every time. */
uint64_t bitmap_find_next_set_before(const struct bitmap *bm, uint64_t from, uint64_t limit);
uint64_t bitmap_find_next_clear_before(const struct bitmap *bm, uint64_t from, uint64_t limit);

/*
 * OR n little-endian words into the bitmap starting at word first_word (a peer's bitmap, or a
 * saved one). Bits past nbits are dropped. Returns 0, or -1 with errno=ERANGE (nothing merged)
 * when the words do not fit.
 */
int bitmap_merge_words(struct bitmap *bm, uint64_t first_word, const uint64_t *words_le, size_t n);
/* Replace words instead of OR-ing them, without dirtying pages (loading from disk). */
int bitmap_load_words(struct bitmap *bm, uint64_t first_word, const uint64_t *words_le, size_t n);
/*
 * The words in host order, *nwords = ceil(nbits / 64). The array is padded with zero words to a
 * whole number of pages, so page p is always the 512 words at words + p * 512.
 */
const uint64_t *bitmap_words(const struct bitmap *bm, size_t *nwords);

/* Dirty-page tracking for persistence. */
uint64_t bitmap_npages(const struct bitmap *bm);
uint64_t bitmap_dirty_pages(const struct bitmap *bm);
/* First dirty page >= from, or npages when none. */
uint64_t bitmap_next_dirty_page(const struct bitmap *bm, uint64_t from);
void bitmap_page_clean(struct bitmap *bm, uint64_t page);
void bitmap_mark_all_clean(struct bitmap *bm);
/* Every page dirty: the next flush rewrites the whole on-disk bitmap. */
void bitmap_mark_all_dirty(struct bitmap *bm);

#endif
