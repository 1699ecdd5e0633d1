/* SPDX-License-Identifier: MIT */
/* In-memory dirty bitmap; see bitmap.h for the bit order and the page-tracking contract. */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>

#include "bitmap.h"

struct bitmap {
	uint64_t *words;  /* npages * BITMAP_PAGE_WORDS words, zero past nbits */
	uint64_t *pdirty; /* one bit per page */
	uint64_t nbits;
	uint64_t nwords; /* ceil(nbits / 64) */
	uint64_t npages;
	uint64_t count; /* set bits, kept up to date by every change */
	uint64_t ndirty;
	uint64_t volume_bytes;
	uint32_t block_size;
	unsigned shift;
};

static inline unsigned popcnt(uint64_t x)
{
	return (unsigned)__builtin_popcountll(x);
}

/* Mask of bits [lo, hi) within one word, 0 <= lo < hi <= 64. */
static inline uint64_t word_mask(unsigned lo, unsigned hi)
{
	uint64_t m = hi == 64 ? ~0ull : (1ull << hi) - 1;

	return m & (~0ull << lo);
}

static inline void page_mark(struct bitmap *bm, uint64_t word)
{
	uint64_t p = word / BITMAP_PAGE_WORDS, m = 1ull << (p & 63);

	if (!(bm->pdirty[p >> 6] & m)) {
		bm->pdirty[p >> 6] |= m;
		bm->ndirty++;
	}
}

struct bitmap *bitmap_create(uint64_t volume_bytes, uint32_t block_size)
{
	struct bitmap *bm = NULL;

	if (block_size < BITMAP_BLOCK_MIN || block_size > BITMAP_BLOCK_MAX ||
	    (block_size & (block_size - 1)) || volume_bytes == 0) {
		errno = EINVAL;
		goto out;
	}
	unsigned shift = (unsigned)__builtin_ctz(block_size);
	uint64_t nbits = (volume_bytes >> shift) + ((volume_bytes & (block_size - 1)) != 0);
	if (nbits > BITMAP_MAX_BITS) {
		errno = EFBIG;
		goto out;
	}
	bm = calloc(1, sizeof(*bm));
	if (!bm)
		goto out;
	bm->nbits = nbits;
	bm->nwords = (nbits + 63) / 64;
	bm->npages = (nbits + BITMAP_PAGE_BITS - 1) / BITMAP_PAGE_BITS;
	bm->volume_bytes = volume_bytes;
	bm->block_size = block_size;
	bm->shift = shift;
	/* calloc, not malloc + memset: a 512 MiB bitmap stays untouched zero pages until used. */
	bm->words = calloc(bm->npages * BITMAP_PAGE_WORDS, sizeof(uint64_t));
	bm->pdirty = calloc((bm->npages + 63) / 64, sizeof(uint64_t));
	if (!bm->words || !bm->pdirty) {
		bitmap_free(bm);
		bm = NULL;
		errno = ENOMEM;
	}
out:
	return bm;
}

void bitmap_free(struct bitmap *bm)
{
	if (!bm)
		return;
	free(bm->words);
	free(bm->pdirty);
	free(bm);
}

uint64_t bitmap_nbits(const struct bitmap *bm)
{
	return bm->nbits;
}

uint32_t bitmap_block_size(const struct bitmap *bm)
{
	return bm->block_size;
}

uint64_t bitmap_bit_offset(const struct bitmap *bm, uint64_t bit)
{
	return bit << bm->shift;
}

uint32_t bitmap_bit_length(const struct bitmap *bm, uint64_t bit)
{
	uint64_t off = bit << bm->shift;

	if (bit >= bm->nbits)
		return 0;
	if (bm->volume_bytes - off < bm->block_size)
		return (uint32_t)(bm->volume_bytes - off);
	return bm->block_size;
}

/* Set or clear bits [first, end), end <= nbits, one word at a time. */
static void bits_change(struct bitmap *bm, uint64_t first, uint64_t end, bool set)
{
	if (first >= end)
		return;
	uint64_t w = first / 64, last = (end - 1) / 64;

	for (; w <= last; w++) {
		unsigned lo = w == first / 64 ? (unsigned)(first % 64) : 0;
		unsigned hi = w == last ? (unsigned)((end - 1) % 64) + 1 : 64;
		uint64_t m = word_mask(lo, hi), old = bm->words[w];
		uint64_t nw = set ? old | m : old & ~m;

		if (nw == old)
			continue;
		bm->words[w] = nw;
		if (set)
			bm->count += popcnt(m & ~old);
		else
			bm->count -= popcnt(m & old);
		page_mark(bm, w);
	}
}

/* bits_change on bits [first, first + n), clipped to the bitmap. */
static void bits_change_n(struct bitmap *bm, uint64_t first, uint64_t n, bool set)
{
	if (first < bm->nbits)
		bits_change(bm, first, n > bm->nbits - first ? bm->nbits : first + n, set);
}

void bitmap_set_bits(struct bitmap *bm, uint64_t first, uint64_t n)
{
	bits_change_n(bm, first, n, true);
}

void bitmap_clear_bits(struct bitmap *bm, uint64_t first, uint64_t n)
{
	bits_change_n(bm, first, n, false);
}

/* The end of the byte range [off, off + len) clipped to the volume; false when nothing is left. */
static bool range_clip(const struct bitmap *bm, uint64_t off, uint64_t len, uint64_t *end)
{
	if (len == 0 || off >= bm->volume_bytes)
		return false;
	*end = len > bm->volume_bytes - off ? bm->volume_bytes : off + len;
	return true;
}

void bitmap_set_range(struct bitmap *bm, uint64_t off, uint64_t len)
{
	uint64_t end;

	if (range_clip(bm, off, len, &end))
		bits_change(bm, off >> bm->shift, ((end - 1) >> bm->shift) + 1, true);
}

void bitmap_clear_range(struct bitmap *bm, uint64_t off, uint64_t len)
{
	uint64_t end;

	if (!range_clip(bm, off, len, &end))
		return;
	uint64_t first = (off + bm->block_size - 1) >> bm->shift;
	uint64_t last = end == bm->volume_bytes ? bm->nbits : end >> bm->shift;

	bits_change(bm, first, last, false);
}

void bitmap_set_bit(struct bitmap *bm, uint64_t bit)
{
	bits_change_n(bm, bit, 1, true);
}

void bitmap_clear_bit(struct bitmap *bm, uint64_t bit)
{
	bits_change_n(bm, bit, 1, false);
}

bool bitmap_test(const struct bitmap *bm, uint64_t bit)
{
	return bit < bm->nbits && (bm->words[bit / 64] >> (bit % 64) & 1);
}

void bitmap_set_all(struct bitmap *bm)
{
	bits_change(bm, 0, bm->nbits, true);
}

void bitmap_clear_all(struct bitmap *bm)
{
	bits_change(bm, 0, bm->nbits, false);
}

uint64_t bitmap_count(const struct bitmap *bm)
{
	return bm->count;
}

/* First index >= from whose bit, XOR flip, is 1; nbits when none. */
static uint64_t scan(const uint64_t *words, uint64_t nbits, uint64_t from, uint64_t flip)
{
	if (from >= nbits)
		return nbits;
	uint64_t nwords = (nbits + 63) / 64, i = from / 64;
	uint64_t x = (words[i] ^ flip) & (~0ull << (from % 64));

	while (!x) {
		if (++i >= nwords)
			return nbits;
		x = words[i] ^ flip;
	}
	uint64_t r = i * 64 + (uint64_t)__builtin_ctzll(x);
	/* Flipped padding past nbits reads as set; it is not a block. */
	return r < nbits ? r : nbits;
}

uint64_t bitmap_find_next_set(const struct bitmap *bm, uint64_t from)
{
	return scan(bm->words, bm->nbits, from, 0);
}

uint64_t bitmap_find_next_clear(const struct bitmap *bm, uint64_t from)
{
	return scan(bm->words, bm->nbits, from, ~0ull);
}

/* scan() stops at its nbits and clamps what it finds beyond it: a shorter nbits is the limit. */
uint64_t bitmap_find_next_set_before(const struct bitmap *bm, uint64_t from, uint64_t limit)
{
	return scan(bm->words, limit < bm->nbits ? limit : bm->nbits, from, 0);
}

uint64_t bitmap_find_next_clear_before(const struct bitmap *bm, uint64_t from, uint64_t limit)
{
	return scan(bm->words, limit < bm->nbits ? limit : bm->nbits, from, ~0ull);
}

/* Bits past nbits in the last word must stay zero. */
static uint64_t tail_mask(const struct bitmap *bm, uint64_t w)
{
	if (w == bm->nwords - 1 && bm->nbits % 64)
		return word_mask(0, (unsigned)(bm->nbits % 64));
	return ~0ull;
}

static int words_fit(const struct bitmap *bm, uint64_t first_word, size_t n)
{
	if (first_word > bm->nwords || n > bm->nwords - first_word) {
		errno = ERANGE;
		return -1;
	}
	return 0;
}

/* OR (merge) or copy n little-endian words in at first_word; a merge dirties the pages it
 * changes, a load from disk does not. */
static int words_in(struct bitmap *bm, uint64_t first_word, const uint64_t *words_le, size_t n,
                    bool merge)
{
	if (words_fit(bm, first_word, n) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		uint64_t w = first_word + i, old = bm->words[w];
		uint64_t nw = le64toh(words_le[i]) & tail_mask(bm, w);

		if (merge)
			nw |= old;
		if (nw == old)
			continue;
		bm->count = bm->count - popcnt(old) + popcnt(nw);
		bm->words[w] = nw;
		if (merge)
			page_mark(bm, w);
	}
	return 0;
}

int bitmap_merge_words(struct bitmap *bm, uint64_t first_word, const uint64_t *words_le, size_t n)
{
	return words_in(bm, first_word, words_le, n, true);
}

int bitmap_load_words(struct bitmap *bm, uint64_t first_word, const uint64_t *words_le, size_t n)
{
	return words_in(bm, first_word, words_le, n, false);
}

const uint64_t *bitmap_words(const struct bitmap *bm, size_t *nwords)
{
	if (nwords)
		*nwords = (size_t)bm->nwords;
	return bm->words;
}

uint64_t bitmap_npages(const struct bitmap *bm)
{
	return bm->npages;
}

uint64_t bitmap_dirty_pages(const struct bitmap *bm)
{
	return bm->ndirty;
}

uint64_t bitmap_next_dirty_page(const struct bitmap *bm, uint64_t from)
{
	return scan(bm->pdirty, bm->npages, from, 0);
}

void bitmap_page_clean(struct bitmap *bm, uint64_t page)
{
	if (page >= bm->npages)
		return;
	uint64_t m = 1ull << (page & 63);

	if (bm->pdirty[page >> 6] & m) {
		bm->pdirty[page >> 6] &= ~m;
		bm->ndirty--;
	}
}

void bitmap_mark_all_clean(struct bitmap *bm)
{
	for (uint64_t i = 0; i < (bm->npages + 63) / 64; i++)
		bm->pdirty[i] = 0;
	bm->ndirty = 0;
}

void bitmap_mark_all_dirty(struct bitmap *bm)
{
	for (uint64_t p = 0; p < bm->npages; p++)
		page_mark(bm, p * BITMAP_PAGE_WORDS);
}
