/* SPDX-License-Identifier: MIT */
/* Unit tests for the dirty bitmap: boundaries, clear rules, a reference model, page tracking. */
#include <check.h>
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "meta/bitmap.h"

#define KiB 1024ull
#define TiB (1024ull * 1024 * 1024 * 1024)

static uint64_t rng_state;

static uint64_t rnd(void)
{
	/* xorshift64*: fixed seed, the same sequence on every run and platform. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1Dull;
}

START_TEST(create_limits)
{
	const uint32_t bad[] = {0, 2048, 4097, 3 * 4096, 2u << 20};
	struct bitmap *bm;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errno = 0;
		ck_assert_ptr_null(bitmap_create(1 << 20, bad[i]));
		ck_assert_int_eq(errno, EINVAL);
	}
	errno = 0;
	ck_assert_ptr_null(bitmap_create(0, 4096));
	ck_assert_int_eq(errno, EINVAL);
	errno = 0;
	ck_assert_ptr_null(bitmap_create(16 * TiB + 1, 4096));
	ck_assert_int_eq(errno, EFBIG);

	/* A short last block: 10000 bytes are 3 blocks, the last one 1808 bytes. */
	bm = bitmap_create(10000, 4096);
	ck_assert_ptr_nonnull(bm);
	ck_assert_uint_eq(bitmap_nbits(bm), 3);
	ck_assert_uint_eq(bitmap_block_size(bm), 4096);
	ck_assert_uint_eq(bitmap_npages(bm), 1);
	ck_assert_uint_eq(bitmap_bit_offset(bm, 2), 8192);
	ck_assert_uint_eq(bitmap_bit_length(bm, 1), 4096);
	ck_assert_uint_eq(bitmap_bit_length(bm, 2), 1808);
	ck_assert_uint_eq(bitmap_bit_length(bm, 3), 0);
	bitmap_free(bm);

	/* The largest bitmap: 16 TiB at 4 KiB = 2^32 bits, 512 MiB, mostly untouched pages. */
	bm = bitmap_create(16 * TiB, 4096);
	ck_assert_ptr_nonnull(bm);
	ck_assert_uint_eq(bitmap_nbits(bm), 1ull << 32);
	ck_assert_uint_eq(bitmap_npages(bm), 1ull << 17);
	bitmap_set_range(bm, 16 * TiB - 1, 1);
	ck_assert(bitmap_test(bm, (1ull << 32) - 1));
	ck_assert_uint_eq(bitmap_find_next_set(bm, 0), (1ull << 32) - 1);
	ck_assert_uint_eq(bitmap_next_dirty_page(bm, 0), (1ull << 17) - 1);
	ck_assert_uint_eq(bitmap_count(bm), 1);
	bitmap_free(bm);
}
END_TEST

START_TEST(ranges_at_boundaries)
{
	/* 3 pages and 100 bits, so the last word and the last page are partial. */
	uint64_t nbits = 3 * BITMAP_PAGE_BITS + 100, vol = nbits * 4096;
	struct bitmap *bm = bitmap_create(vol, 4096);

	ck_assert_ptr_nonnull(bm);
	/* A range straddling a word boundary by one byte on each side touches two blocks. */
	bitmap_set_range(bm, 64 * 4096 - 1, 2);
	ck_assert(bitmap_test(bm, 63) && bitmap_test(bm, 64));
	ck_assert(!bitmap_test(bm, 62) && !bitmap_test(bm, 65));
	ck_assert_uint_eq(bitmap_count(bm), 2);
	/* Exactly one block, aligned: one bit. */
	bitmap_set_range(bm, 200 * 4096, 4096);
	ck_assert_uint_eq(bitmap_count(bm), 3);
	ck_assert(!bitmap_test(bm, 201));
	/* Across a page boundary: both pages dirty, nothing else. */
	bitmap_mark_all_clean(bm);
	bitmap_set_range(bm, (uint64_t)(BITMAP_PAGE_BITS - 1) * 4096, 8192);
	ck_assert(bitmap_test(bm, BITMAP_PAGE_BITS - 1) && bitmap_test(bm, BITMAP_PAGE_BITS));
	ck_assert_uint_eq(bitmap_dirty_pages(bm), 2);
	ck_assert_uint_eq(bitmap_next_dirty_page(bm, 0), 0);
	ck_assert_uint_eq(bitmap_next_dirty_page(bm, 1), 1);
	ck_assert_uint_eq(bitmap_next_dirty_page(bm, 2), bitmap_npages(bm));
	ck_assert_uint_eq(bitmap_count(bm), 5);
	/* Empty, past-the-end and overflowing ranges. */
	bitmap_set_range(bm, 5 * 4096, 0);
	bitmap_set_range(bm, vol, 4096);
	bitmap_set_range(bm, UINT64_MAX - 10, 100);
	ck_assert_uint_eq(bitmap_count(bm), 5);
	bitmap_set_range(bm, vol - 1, UINT64_MAX);
	ck_assert(bitmap_test(bm, nbits - 1));
	ck_assert_uint_eq(bitmap_count(bm), 6);
	/* A range of whole words and pages in the middle. */
	bitmap_clear_all(bm);
	bitmap_set_range(bm, 64 * 4096, (uint64_t)2 * BITMAP_PAGE_BITS * 4096);
	ck_assert_uint_eq(bitmap_count(bm), 2 * BITMAP_PAGE_BITS);
	ck_assert_uint_eq(bitmap_find_next_set(bm, 0), 64);
	ck_assert_uint_eq(bitmap_find_next_clear(bm, 64), 64 + 2 * BITMAP_PAGE_BITS);
	/* Everything from byte 5 on: bit 0 too, because the range touches it. */
	bitmap_set_range(bm, 5, UINT64_MAX);
	ck_assert_uint_eq(bitmap_count(bm), nbits);
	ck_assert_uint_eq(bitmap_find_next_clear(bm, 0), nbits);
	/* The bit forms of the ranges, clipped at nbits. */
	bitmap_clear_bits(bm, nbits - 10, 1000);
	ck_assert_uint_eq(bitmap_count(bm), nbits - 10);
	bitmap_set_bits(bm, nbits - 3, UINT64_MAX);
	ck_assert_uint_eq(bitmap_count(bm), nbits - 7);
	bitmap_set_bit(bm, nbits);
	bitmap_clear_bit(bm, nbits + 1000);
	ck_assert(!bitmap_test(bm, nbits));
	ck_assert_uint_eq(bitmap_count(bm), nbits - 7);
	bitmap_free(bm);
}
END_TEST

START_TEST(clear_only_full_blocks)
{
	struct bitmap *bm =
	    bitmap_create(10000, 4096); /* blocks [0,4096) [4096,8192) [8192,10000) */

	ck_assert_ptr_nonnull(bm);
	bitmap_set_all(bm);
	ck_assert_uint_eq(bitmap_count(bm), 3);
	/* Partly covers blocks 0 and 1, fully covers none. */
	bitmap_clear_range(bm, 100, 4096);
	ck_assert_uint_eq(bitmap_count(bm), 3);
	bitmap_clear_range(bm, 4096, 4095);
	ck_assert(bitmap_test(bm, 1));
	/* One byte early, one byte late: still block 1 fully. */
	bitmap_clear_range(bm, 4095, 4098);
	ck_assert(bitmap_test(bm, 0) && !bitmap_test(bm, 1) && bitmap_test(bm, 2));
	/* The short last block is covered when the range reaches the end of the volume. */
	bitmap_clear_range(bm, 8192, 1000);
	ck_assert(bitmap_test(bm, 2));
	bitmap_clear_range(bm, 8192, 1808);
	ck_assert(!bitmap_test(bm, 2));
	bitmap_set_all(bm);
	bitmap_clear_range(bm, 8193, UINT64_MAX);
	ck_assert(bitmap_test(bm, 2));
	bitmap_clear_range(bm, 0, UINT64_MAX);
	ck_assert_uint_eq(bitmap_count(bm), 0);
	bitmap_free(bm);

	/* Word- and page-wide clears leave the neighbours alone. */
	bm = bitmap_create((uint64_t)3 * BITMAP_PAGE_BITS * 8192, 8192);
	ck_assert_ptr_nonnull(bm);
	bitmap_set_all(bm);
	bitmap_clear_range(bm, 64 * 8192, (uint64_t)BITMAP_PAGE_BITS * 8192);
	ck_assert_uint_eq(bitmap_count(bm), 2 * BITMAP_PAGE_BITS);
	ck_assert_uint_eq(bitmap_find_next_clear(bm, 0), 64);
	ck_assert_uint_eq(bitmap_find_next_set(bm, 64), 64 + BITMAP_PAGE_BITS);
	bitmap_free(bm);
}
END_TEST

START_TEST(find_across_words)
{
	uint64_t nbits = 2 * BITMAP_PAGE_BITS + 77;
	const uint64_t bits[] = {
	    0,          1,        63, 64, 127, 133, 1000, BITMAP_PAGE_BITS - 1, BITMAP_PAGE_BITS,
	    nbits - 65, nbits - 1};
	size_t n = sizeof(bits) / sizeof(bits[0]);
	struct bitmap *bm = bitmap_create(nbits * 4096, 4096);
	uint64_t b;
	size_t i;

	ck_assert_ptr_nonnull(bm);
	ck_assert_uint_eq(bitmap_find_next_set(bm, 0), nbits);
	ck_assert_uint_eq(bitmap_find_next_clear(bm, 0), 0);
	for (i = 0; i < n; i++)
		bitmap_set_bit(bm, bits[i]);
	ck_assert_uint_eq(bitmap_count(bm), n);
	for (i = 0, b = bitmap_find_next_set(bm, 0); b < nbits;
	     b = bitmap_find_next_set(bm, b + 1), i++) {
		ck_assert_uint_lt(i, n);
		ck_assert_uint_eq(b, bits[i]);
	}
	ck_assert_uint_eq(i, n);
	ck_assert_uint_eq(bitmap_find_next_set(bm, nbits), nbits);
	ck_assert_uint_eq(bitmap_find_next_set(bm, UINT64_MAX), nbits);

	/* The complement: clear bits on a full bitmap; the zero padding past nbits is no block. */
	bitmap_set_all(bm);
	ck_assert_uint_eq(bitmap_count(bm), nbits);
	ck_assert_uint_eq(bitmap_find_next_clear(bm, 0), nbits);
	for (i = 0; i < n; i++)
		bitmap_clear_bit(bm, bits[i]);
	for (i = 0, b = bitmap_find_next_clear(bm, 0); b < nbits;
	     b = bitmap_find_next_clear(bm, b + 1), i++) {
		ck_assert_uint_lt(i, n);
		ck_assert_uint_eq(b, bits[i]);
	}
	ck_assert_uint_eq(i, n);
	ck_assert_uint_eq(bitmap_find_next_clear(bm, nbits - 64), nbits - 1);
	ck_assert_uint_eq(bitmap_count(bm), nbits - n);
	bitmap_free(bm);
}
END_TEST

/* The bounded searches stop at their limit, find what lies before it, and never pass nbits. */
START_TEST(find_before_limit)
{
	uint64_t nbits = 3 * 64 + 10;
	struct bitmap *bm = bitmap_create(nbits * 4096, 4096);
	ck_assert_ptr_nonnull(bm);
	/* empty: no set bit before any limit; the first clear bit is from itself */
	ck_assert_uint_eq(bitmap_find_next_set_before(bm, 5, 100), 100);
	ck_assert_uint_eq(bitmap_find_next_set_before(bm, 5, 1000), nbits);
	ck_assert_uint_eq(bitmap_find_next_clear_before(bm, 5, 100), 5);
	bitmap_set_bit(bm, 130);
	ck_assert_uint_eq(bitmap_find_next_set_before(bm, 5, 130), 130); /* the limit itself */
	ck_assert_uint_eq(bitmap_find_next_set_before(bm, 5, 131), 130);
	ck_assert_uint_eq(bitmap_find_next_set_before(bm, 131, 150), 150);
	/* full: a run ends at the limit, or at a clear bit before it, or at nbits */
	bitmap_set_all(bm);
	ck_assert_uint_eq(bitmap_find_next_clear_before(bm, 10, 70), 70);
	ck_assert_uint_eq(bitmap_find_next_clear_before(bm, 10, 1000), nbits);
	ck_assert_uint_eq(bitmap_find_next_clear_before(bm, nbits - 3, nbits + 64), nbits);
	bitmap_clear_bit(bm, 65);
	ck_assert_uint_eq(bitmap_find_next_clear_before(bm, 10, 70), 65);
	ck_assert_uint_eq(bitmap_find_next_clear_before(bm, 66, 66), 66); /* empty window */
	ck_assert_uint_eq(bitmap_find_next_clear_before(bm, nbits, nbits + 5), nbits);
	bitmap_free(bm);
}
END_TEST

START_TEST(dirty_pages)
{
	struct bitmap *bm = bitmap_create((uint64_t)4 * BITMAP_PAGE_BITS * 4096, 4096);
	uint64_t w[4] = {0};

	ck_assert_ptr_nonnull(bm);
	ck_assert_uint_eq(bitmap_npages(bm), 4);
	ck_assert_uint_eq(bitmap_dirty_pages(bm), 0);
	ck_assert_uint_eq(bitmap_next_dirty_page(bm, 0), 4);
	bitmap_set_bit(bm, 5);
	ck_assert_uint_eq(bitmap_dirty_pages(bm), 1);
	ck_assert_uint_eq(bitmap_next_dirty_page(bm, 0), 0);
	bitmap_page_clean(bm, 0);
	ck_assert_uint_eq(bitmap_dirty_pages(bm), 0);
	/* No change, no dirt: setting a set bit, clearing a clear one, merging what is there. */
	bitmap_set_bit(bm, 5);
	bitmap_clear_bit(bm, 6);
	bitmap_clear_range(bm, (uint64_t)BITMAP_PAGE_BITS * 4096,
	                   (uint64_t)BITMAP_PAGE_BITS * 4096);
	w[0] = htole64(1ull << 5);
	ck_assert_int_eq(bitmap_merge_words(bm, 0, w, 1), 0);
	ck_assert_uint_eq(bitmap_dirty_pages(bm), 0);
	/* The last word of page 2 and the first of page 3. */
	bitmap_set_bits(bm, 3 * BITMAP_PAGE_BITS - 1, 2);
	ck_assert_uint_eq(bitmap_dirty_pages(bm), 2);
	ck_assert_uint_eq(bitmap_next_dirty_page(bm, 0), 2);
	ck_assert_uint_eq(bitmap_next_dirty_page(bm, 3), 3);
	bitmap_page_clean(bm, 2);
	bitmap_page_clean(bm, 2);
	bitmap_page_clean(bm, 99);
	ck_assert_uint_eq(bitmap_dirty_pages(bm), 1);
	bitmap_mark_all_dirty(bm);
	ck_assert_uint_eq(bitmap_dirty_pages(bm), 4);
	bitmap_mark_all_clean(bm);
	ck_assert_uint_eq(bitmap_dirty_pages(bm), 0);
	/* Loading replaces words without dirtying pages. */
	w[0] = htole64(0xff);
	ck_assert_int_eq(bitmap_load_words(bm, BITMAP_PAGE_WORDS, w, 1), 0);
	ck_assert_uint_eq(bitmap_dirty_pages(bm), 0);
	ck_assert_uint_eq(bitmap_count(bm), 1 + 2 + 8);
	/* clear_all dirties only the pages that had bits. */
	bitmap_clear_all(bm);
	ck_assert_uint_eq(bitmap_dirty_pages(bm), 4);
	bitmap_mark_all_clean(bm);
	bitmap_clear_all(bm);
	ck_assert_uint_eq(bitmap_dirty_pages(bm), 0);
	bitmap_free(bm);
}
END_TEST

START_TEST(merge_and_load)
{
	uint64_t nbits = BITMAP_PAGE_BITS + 70; /* last word holds 6 bits */
	struct bitmap *a = bitmap_create(nbits * 4096, 4096);
	struct bitmap *b = bitmap_create(nbits * 4096, 4096);
	const uint64_t *wa;
	size_t nw;
	uint64_t ones[3] = {~0ull, ~0ull, ~0ull};

	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	bitmap_set_bits(a, 10, 100);
	bitmap_set_bits(b, 50, 100);
	bitmap_set_bit(b, nbits - 1);
	wa = bitmap_words(b, &nw);
	ck_assert_uint_eq(nw, (nbits + 63) / 64);
	/* Host-order words from bitmap_words, converted for the little-endian interface. */
	uint64_t *le = malloc(nw * sizeof(*le));
	ck_assert_ptr_nonnull(le);
	for (size_t i = 0; i < nw; i++)
		le[i] = htole64(wa[i]);
	ck_assert_int_eq(bitmap_merge_words(a, 0, le, nw), 0);
	ck_assert_uint_eq(bitmap_count(a), 140 + 1);
	ck_assert_uint_eq(bitmap_find_next_clear(a, 10), 150);
	ck_assert(bitmap_test(a, nbits - 1));
	free(le);

	/* Out of range: nothing merged. */
	errno = 0;
	ck_assert_int_eq(bitmap_merge_words(a, nw - 1, ones, 2), -1);
	ck_assert_int_eq(errno, ERANGE);
	ck_assert_int_eq(bitmap_merge_words(a, UINT64_MAX, ones, 1), -1);
	ck_assert_uint_eq(bitmap_count(a), 141);

	/* Bits past nbits in the last word are dropped. */
	ck_assert_int_eq(bitmap_merge_words(a, nw - 2, ones, 2), 0);
	wa = bitmap_words(a, NULL);
	ck_assert_uint_eq(wa[nw - 1], (1ull << (nbits % 64)) - 1);
	ck_assert_uint_eq(bitmap_find_next_clear(a, (nw - 2) * 64), nbits);
	ck_assert_uint_eq(bitmap_count(a), 141 + 64 + 6 - 1);

	/* Loading replaces: the words become exactly what was given. */
	uint64_t pat[2] = {htole64(0x8000000000000001ull), 0};
	ck_assert_int_eq(bitmap_load_words(a, nw - 2, pat, 2), 0);
	ck_assert_uint_eq(bitmap_count(a), 140 + 2);
	ck_assert(bitmap_test(a, (nw - 2) * 64) && bitmap_test(a, (nw - 1) * 64 - 1));
	ck_assert(!bitmap_test(a, nbits - 1));
	bitmap_free(a);
	bitmap_free(b);
}
END_TEST

START_TEST(large_ranges)
{
	/* 1 TiB at 4 KiB: 2^28 bits, 32 MiB; whole-word set and clear stay fast. */
	uint64_t vol = TiB, nbits = 1ull << 28;
	struct bitmap *bm = bitmap_create(vol, 4096);

	ck_assert_ptr_nonnull(bm);
	bitmap_set_range(bm, 0, vol);
	ck_assert_uint_eq(bitmap_count(bm), nbits);
	ck_assert_uint_eq(bitmap_dirty_pages(bm), bitmap_npages(bm));
	bitmap_clear_range(bm, 4096, vol - 8192);
	ck_assert_uint_eq(bitmap_count(bm), 2);
	ck_assert_uint_eq(bitmap_find_next_set(bm, 1), nbits - 1);
	bitmap_set_all(bm);
	bitmap_clear_all(bm);
	ck_assert_uint_eq(bitmap_count(bm), 0);
	ck_assert_uint_eq(bitmap_find_next_set(bm, 0), nbits);
	bitmap_free(bm);
}
END_TEST

/* ---- reference model ------------------------------------------------------------------ */

struct model {
	struct bitmap *bm;
	uint8_t *ref;
	uint64_t nbits, vol, count;
	uint64_t bad;   /* operations whose result differed from the model */
	uint64_t *snap; /* words at the last clean-all, to check page dirtiness */
};

static void ref_set(struct model *m, uint64_t b, bool v)
{
	if (b >= m->nbits || m->ref[b] == v)
		return;
	m->ref[b] = v;
	m->count += v ? 1 : (uint64_t)-1;
}

static uint64_t rnd_off(const struct model *m)
{
	/* Mostly aligned or near a block edge, sometimes anywhere, sometimes past the end. */
	uint64_t blk = rnd() % (m->nbits + 2) * 4096;

	switch (rnd() % 4) {
	case 0:
		return blk;
	case 1:
		return blk + 4095;
	case 2:
		return blk + 1;
	default:
		return rnd() % (m->vol + 8192);
	}
}

static uint64_t rnd_len(void)
{
	switch (rnd() % 5) {
	case 0:
		return rnd() % 3 * 4096;
	case 1:
		return rnd() % 10000;
	case 2:
		return rnd() % (3000 * 4096);
	case 3:
		return rnd() % 64 * 4096 + rnd() % 3 - 1;
	default:
		return rnd() % 2 ? UINT64_MAX - rnd() % 100 : rnd() % 200000;
	}
}

static void model_range(struct model *m, bool set)
{
	uint64_t off = rnd_off(m), len = rnd_len();

	if (set)
		bitmap_set_range(m->bm, off, len);
	else
		bitmap_clear_range(m->bm, off, len);
	if (len == 0 || off >= m->vol)
		return;
	uint64_t end = len > m->vol - off ? m->vol : off + len;
	uint64_t first = set ? off / 4096 : (off + 4095) / 4096;
	uint64_t last = set ? (end - 1) / 4096 + 1 : end == m->vol ? m->nbits : end / 4096;

	for (uint64_t b = first; b < last; b++)
		ref_set(m, b, set);
}

static uint64_t ref_find(const struct model *m, uint64_t from, bool v)
{
	for (uint64_t b = from; b < m->nbits; b++)
		if (m->ref[b] == v)
			return b;
	return m->nbits;
}

static void model_merge(struct model *m)
{
	size_t nw = (m->nbits + 63) / 64, n = 1 + rnd() % 4;
	uint64_t first = rnd() % nw, w[4];

	for (size_t i = 0; i < n; i++)
		w[i] = rnd() & rnd() & rnd();
	if (first + n > nw) {
		m->bad += bitmap_merge_words(m->bm, first, w, n) != -1;
		return;
	}
	m->bad += bitmap_merge_words(m->bm, first, w, n) != 0;
	for (size_t i = 0; i < n; i++)
		for (unsigned k = 0; k < 64; k++)
			if (le64toh(w[i]) >> k & 1)
				ref_set(m, (first + i) * 64 + k, true);
}

static void model_op(struct model *m)
{
	uint64_t r = rnd() % 100, b = rnd() % (m->nbits + 100);

	if (r < 30) {
		model_range(m, true);
	} else if (r < 55) {
		model_range(m, false);
	} else if (r < 63) {
		bitmap_set_bit(m->bm, b);
		ref_set(m, b, true);
	} else if (r < 71) {
		bitmap_clear_bit(m->bm, b);
		ref_set(m, b, false);
	} else if (r < 80) {
		m->bad += bitmap_find_next_set(m->bm, b) != ref_find(m, b, true);
	} else if (r < 88) {
		m->bad += bitmap_find_next_clear(m->bm, b) != ref_find(m, b, false);
	} else if (r < 93) {
		model_merge(m);
	} else if (r < 98) {
		m->bad += bitmap_test(m->bm, b) != (b < m->nbits && m->ref[b]);
	} else if (rnd() % 8 == 0) {
		/* Rarely, so the model spends most of its time in mixed states. */
		if (r == 98)
			bitmap_set_all(m->bm);
		else
			bitmap_clear_all(m->bm);
		for (b = 0; b < m->nbits; b++)
			ref_set(m, b, r == 98);
	}
}

/*
 * Every bit, the padding and the page dirtiness against the model; then start a new epoch.
 * Mismatches are counted and asserted once: each ck_assert costs a syscall in Check's fork mode.
 */
static void model_check_all(struct model *m)
{
	size_t nw;
	const uint64_t *w = bitmap_words(m->bm, &nw);
	uint64_t npages = bitmap_npages(m->bm), bad_bits = 0, bad_pages = 0, ndirty = 0;

	for (uint64_t b = 0; b < nw * 64; b++)
		bad_bits += (w[b / 64] >> (b % 64) & 1) != (b < m->nbits && m->ref[b]);
	for (uint64_t p = 0; p < npages; p++) {
		size_t n = nw - p * BITMAP_PAGE_WORDS;
		bool changed, dirty = bitmap_next_dirty_page(m->bm, p) == p;

		if (n > BITMAP_PAGE_WORDS)
			n = BITMAP_PAGE_WORDS;
		changed =
		    memcmp(w + p * BITMAP_PAGE_WORDS, m->snap + p * BITMAP_PAGE_WORDS, n * 8) != 0;
		/* A page may be dirty and changed back, but a changed page is always dirty. */
		bad_pages += changed && !dirty;
		ndirty += dirty;
	}
	ck_assert_uint_eq(bad_bits, 0);
	ck_assert_uint_eq(bad_pages, 0);
	ck_assert_uint_eq(ndirty, bitmap_dirty_pages(m->bm));
	memcpy(m->snap, w, nw * 8);
	bitmap_mark_all_clean(m->bm);
}

START_TEST(random_vs_reference)
{
	struct model m = {0};

	rng_state = 0x9e3779b97f4a7c15ull;
	m.nbits = 2 * BITMAP_PAGE_BITS + 4321;
	m.vol = m.nbits * 4096 - 1234; /* a short last block */
	m.bm = bitmap_create(m.vol, 4096);
	m.ref = calloc(m.nbits, 1);
	m.snap = calloc((m.nbits + 63) / 64, 8);
	ck_assert_ptr_nonnull(m.bm);
	ck_assert_ptr_nonnull(m.ref);
	ck_assert_ptr_nonnull(m.snap);
	ck_assert_uint_eq(bitmap_nbits(m.bm), m.nbits);
	for (int i = 0; i < 100000; i++) {
		model_op(&m);
		m.bad += bitmap_count(m.bm) != m.count;
		if (i % 2000 == 1999) {
			ck_assert_uint_eq(m.bad, 0);
			model_check_all(&m);
		}
	}
	ck_assert_uint_eq(m.bad, 0);
	model_check_all(&m);
	/* The run must have exercised both sparse and dense states. */
	ck_assert_uint_gt(m.count, 0);
	bitmap_free(m.bm);
	free(m.ref);
	free(m.snap);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("bitmap");
	TCase *t = tcase_create("core");

	tcase_set_timeout(t, 120);
	tcase_add_test(t, create_limits);
	tcase_add_test(t, ranges_at_boundaries);
	tcase_add_test(t, clear_only_full_blocks);
	tcase_add_test(t, find_across_words);
	tcase_add_test(t, find_before_limit);
	tcase_add_test(t, dirty_pages);
	tcase_add_test(t, merge_and_load);
	tcase_add_test(t, large_ranges);
	tcase_add_test(t, random_vs_reference);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
