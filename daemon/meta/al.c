/* SPDX-License-Identifier: MIT */
/* Activity log: hot-extent table, transaction codec and ring recovery. Format in al.h. */
#include "al.h"

#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "lib/crc32c.h"
#include "lib/endian.h"
#include "lib/errbuf.h"
#include "gen.h"

#define AL_MAGIC "HAKALTR"
#define NIL      UINT32_MAX

enum slot_state { S_EMPTY = 0, S_HOT, S_QUEUED, S_WRITING };
/* Range slots: FREEING is unreferenced but still on disk; *_WR are in the transaction written. */
enum range_state { R_FREE = 0, R_QUEUED, R_WRITING, R_HOT, R_FREEING, R_FREEING_WR };

struct slot {
	uint32_t ext;      /* extent in memory (AL_EXT_NONE: empty) */
	uint32_t disk_ext; /* extent as of the last committed transaction */
	uint32_t refs;
	uint64_t pin;        /* 1 + newest unstable sequence written to it (0: none); see al_pin */
	uint32_t prev, next; /* LRU list, head = most recently used */
	uint32_t hnext;      /* hash chain */
	uint8_t state;
};

struct al {
	uint32_t n, shift, hmask;
	uint64_t nexts; /* extents of the volume */
	struct slot *s;
	uint32_t *bucket;
	uint32_t lru_head, lru_tail;
	/* Changes for the next transaction, and those of the one being written. */
	uint32_t queued[AL_UPDATES_MAX], nqueued;
	uint32_t writing[AL_UPDATES_MAX], nwriting;
	uint32_t rfirst[AL_RANGES], rcount[AL_RANGES], rrefs[AL_RANGES];
	uint64_t rpin[AL_RANGES];
	uint64_t stable;           /* sequences below this are stable (al_stable) */
	uint8_t rstate[AL_RANGES]; /* enum range_state */
	uint32_t ctx_pos;
	uint64_t seq; /* of the next transaction */
	uint64_t hits, misses, evictions;
};

/* ---- table ----------------------------------------------------------------------------- */

static uint32_t hash_of(const struct al *al, uint32_t ext)
{
	return (ext * 2654435761u) & al->hmask;
}

static uint32_t lookup(const struct al *al, uint32_t ext)
{
	for (uint32_t i = al->bucket[hash_of(al, ext)]; i != NIL; i = al->s[i].hnext)
		if (al->s[i].ext == ext)
			return i;
	return NIL;
}

static void hash_del(struct al *al, uint32_t idx)
{
	uint32_t *pp = &al->bucket[hash_of(al, al->s[idx].ext)];

	while (*pp != NIL && *pp != idx)
		pp = &al->s[*pp].hnext;
	if (*pp == idx)
		*pp = al->s[idx].hnext;
	al->s[idx].hnext = NIL;
}

static void hash_add(struct al *al, uint32_t idx)
{
	uint32_t h = hash_of(al, al->s[idx].ext);

	al->s[idx].hnext = al->bucket[h];
	al->bucket[h] = idx;
}

static void lru_unlink(struct al *al, uint32_t i)
{
	struct slot *s = &al->s[i];

	if (s->prev != NIL)
		al->s[s->prev].next = s->next;
	else
		al->lru_head = s->next;
	if (s->next != NIL)
		al->s[s->next].prev = s->prev;
	else
		al->lru_tail = s->prev;
	s->prev = s->next = NIL;
}

static void lru_push_head(struct al *al, uint32_t i)
{
	struct slot *s = &al->s[i];

	s->prev = NIL;
	s->next = al->lru_head;
	if (al->lru_head != NIL)
		al->s[al->lru_head].prev = i;
	al->lru_head = i;
	if (al->lru_tail == NIL)
		al->lru_tail = i;
}

static void lru_touch(struct al *al, uint32_t i)
{
	if (al->lru_head == i)
		return;
	lru_unlink(al, i);
	lru_push_head(al, i);
}

int al_create(uint32_t n_slots, uint32_t shift, uint64_t vol_size, uint64_t first_seq,
              struct al **out)
{
	struct al *al = NULL;
	uint32_t hsize = 1;
	uint64_t nexts = shift < 64 ? (vol_size + (1ull << shift) - 1) >> shift : 0;

	*out = NULL;
	if (n_slots < AL_SLOTS_MIN || n_slots > AL_SLOTS_MAX || shift < AL_SHIFT_MIN ||
	    shift > AL_SHIFT_MAX || nexts == 0 || nexts >= AL_EXT_NONE) {
		errno = EINVAL;
		return -1;
	}
	while (hsize < n_slots)
		hsize <<= 1;
	al = calloc(1, sizeof(*al));
	if (!al || !(al->s = calloc(n_slots, sizeof(*al->s))) ||
	    !(al->bucket = malloc(hsize * sizeof(*al->bucket)))) {
		al_free(al);
		errno = ENOMEM;
		return -1;
	}
	al->n = n_slots;
	al->shift = shift;
	al->nexts = nexts;
	al->hmask = hsize - 1;
	al->seq = first_seq ? first_seq : 1;
	memset(al->bucket, 0xff, hsize * sizeof(*al->bucket));
	al->lru_head = al->lru_tail = NIL;
	for (uint32_t i = 0; i < n_slots; i++) {
		al->s[i].ext = al->s[i].disk_ext = AL_EXT_NONE;
		al->s[i].hnext = NIL;
		/* Empty slots sit at the LRU tail: they are taken before anything is evicted. */
		lru_push_head(al, i);
	}
	*out = al;
	return 0;
}

void al_free(struct al *al)
{
	if (!al)
		return;
	free(al->s);
	free(al->bucket);
	free(al);
}

static void ext_span(const struct al *al, uint64_t off, uint64_t len, uint32_t *first,
                     uint32_t *last)
{
	uint64_t l = len ? len : 1;

	*first = (uint32_t)(off >> al->shift);
	*last = (uint32_t)((off + l - 1) >> al->shift);
	if (*last >= al->nexts)
		*last = (uint32_t)(al->nexts - 1);
	if (*first > *last)
		*first = *last;
}

static bool pinned(const struct al *al, uint64_t pin)
{
	return pin > al->stable;
}

/* A slot for ext: the least recently used one nobody references, no transaction holds and no
 * unstable write pins. */
static uint32_t take_victim(struct al *al, uint32_t ext)
{
	uint32_t v = al->lru_tail;

	if (al->nqueued >= AL_UPDATES_MAX)
		return NIL;
	while (v != NIL && (al->s[v].refs || al->s[v].state == S_QUEUED ||
	                    al->s[v].state == S_WRITING || pinned(al, al->s[v].pin)))
		v = al->s[v].prev;
	if (v == NIL)
		return NIL;
	struct slot *s = &al->s[v];
	if (s->ext != AL_EXT_NONE) {
		hash_del(al, v);
		al->evictions++;
	}
	s->ext = ext;
	s->pin = 0;
	s->state = S_QUEUED;
	hash_add(al, v);
	lru_touch(al, v);
	al->queued[al->nqueued++] = v;
	return v;
}

/* A range slot for a wide request: an equal one in use (or still on disk), or a free one queued. */
static int range_begin(struct al *al, uint32_t first, uint32_t count)
{
	int free_idx = -1;

	for (unsigned i = 0; i < AL_RANGES; i++) {
		if (al->rstate[i] != R_FREE && al->rcount[i] == count && al->rfirst[i] == first) {
			if (al->rstate[i] == R_FREEING)
				al->rstate[i] = R_HOT; /* its removal never reached the disk */
			if (al->rstate[i] != R_HOT)
				return 0;
			al->rrefs[i]++;
			al->hits++;
			return 1;
		}
		if (free_idx < 0 && al->rstate[i] == R_FREE)
			free_idx = (int)i;
	}
	al->misses++;
	if (free_idx >= 0) {
		al->rfirst[free_idx] = first;
		al->rcount[free_idx] = count;
		al->rpin[free_idx] = 0;
		al->rstate[free_idx] = R_QUEUED;
	}
	return 0;
}

int al_begin_io(struct al *al, uint64_t off, uint64_t len)
{
	uint32_t first, last;
	bool all_hot = true;

	ext_span(al, off, len, &first, &last);
	if (last - first + 1 > AL_REQ_EXTENTS_MAX)
		return range_begin(al, first, last - first + 1);
	for (uint32_t e = first; e <= last; e++) {
		uint32_t i = lookup(al, e);

		if (i != NIL && al->s[i].state == S_HOT)
			continue;
		all_hot = false;
		if (i == NIL)
			take_victim(al, e);
	}
	if (!all_hot) {
		al->misses++;
		return 0;
	}
	al->hits++;
	for (uint32_t e = first; e <= last; e++) {
		uint32_t i = lookup(al, e);

		al->s[i].refs++;
		lru_touch(al, i);
	}
	return 1;
}

static int range_find(const struct al *al, uint32_t first, uint32_t count)
{
	for (unsigned i = 0; i < AL_RANGES; i++)
		if (al->rstate[i] == R_HOT && al->rfirst[i] == first && al->rcount[i] == count &&
		    al->rrefs[i])
			return (int)i;
	return -1;
}

void al_ref_io(struct al *al, uint64_t off, uint64_t len)
{
	uint32_t first, last;

	ext_span(al, off, len, &first, &last);
	if (last - first + 1 > AL_REQ_EXTENTS_MAX) {
		int i = range_find(al, first, last - first + 1);

		if (i >= 0)
			al->rrefs[i]++;
		return;
	}
	for (uint32_t e = first; e <= last; e++) {
		uint32_t i = lookup(al, e);

		if (i != NIL)
			al->s[i].refs++;
	}
}

bool al_end_io(struct al *al, uint64_t off, uint64_t len)
{
	uint32_t first, last;
	bool freed = false;

	ext_span(al, off, len, &first, &last);
	if (last - first + 1 > AL_REQ_EXTENTS_MAX) {
		int i = range_find(al, first, last - first + 1);

		if (i >= 0 && --al->rrefs[i] == 0 && !pinned(al, al->rpin[i])) {
			/* Dropped from disk lazily, with the next transaction. */
			al->rstate[i] = R_FREEING;
			freed = true;
		}
		return freed;
	}
	for (uint32_t e = first; e <= last; e++) {
		uint32_t i = lookup(al, e);

		if (i != NIL && al->s[i].refs && --al->s[i].refs == 0 && !pinned(al, al->s[i].pin))
			freed = true;
	}
	return freed;
}

void al_pin(struct al *al, uint64_t off, uint64_t len, uint64_t seq)
{
	uint32_t first, last;

	ext_span(al, off, len, &first, &last);
	if (last - first + 1 > AL_REQ_EXTENTS_MAX) {
		int i = range_find(al, first, last - first + 1);

		if (i >= 0)
			al->rpin[i] = seq + 1;
		return;
	}
	for (uint32_t e = first; e <= last; e++) {
		uint32_t i = lookup(al, e);

		if (i != NIL)
			al->s[i].pin = seq + 1;
	}
}

bool al_stable(struct al *al, uint64_t below)
{
	if (below <= al->stable)
		return false;
	al->stable = below;
	for (unsigned i = 0; i < AL_RANGES; i++)
		if (al->rstate[i] == R_HOT && al->rrefs[i] == 0 && !pinned(al, al->rpin[i]))
			al->rstate[i] = R_FREEING;
	/* Slots need no walk: take_victim tests each candidate's pin against the new mark. */
	return true;
}

bool al_tr_pending(const struct al *al)
{
	for (unsigned i = 0; i < AL_RANGES; i++)
		if (al->rstate[i] == R_QUEUED)
			return true;
	return al->nqueued > 0;
}

/* ---- transactions ------------------------------------------------------------------------ */

static void tr_encode(const struct al_tr *tr, uint8_t *b)
{
	memset(b, 0, AL_TR_SIZE);
	memcpy(b, AL_MAGIC, 8);
	le_put16(b + 12, tr->n_updates);
	le_put16(b + 14, tr->n_context);
	le_put64(b + 16, tr->seq);
	le_put32(b + 24, tr->n_slots);
	le_put32(b + 28, tr->shift);
	le_put32(b + 32, tr->ctx_start);
	for (unsigned i = 0; i < AL_RANGES; i++) {
		le_put32(b + 40 + 8 * i, tr->range_first[i]);
		le_put32(b + 44 + 8 * i, tr->range_count[i]);
	}
	for (unsigned i = 0; i < tr->n_updates; i++) {
		le_put32(b + 72 + 8 * i, tr->upd_slot[i]);
		le_put32(b + 76 + 8 * i, tr->upd_ext[i]);
	}
	for (unsigned i = 0; i < tr->n_context; i++)
		le_put32(b + AL_CTX_OFFSET + 4 * i, tr->ctx[i]);
	le_put32(b + 8, crc32c_update(0, b, AL_TR_SIZE));
}

unsigned al_tr_build(struct al *al, uint8_t *buf, bool *evicts)
{
	static struct al_tr tr; /* large; the loop thread is the only builder */

	memset(&tr, 0, sizeof(tr));
	*evicts = false;
	tr.seq = al->seq;
	tr.n_slots = al->n;
	tr.shift = al->shift;
	for (uint32_t k = 0; k < al->nqueued; k++) {
		struct slot *s = &al->s[al->queued[k]];

		s->state = S_WRITING;
		if (s->disk_ext != AL_EXT_NONE)
			*evicts = true;
		tr.upd_slot[k] = al->queued[k];
		tr.upd_ext[k] = s->ext;
		al->writing[k] = al->queued[k];
	}
	tr.n_updates = (uint16_t)al->nqueued;
	al->nwriting = al->nqueued;
	al->nqueued = 0;
	for (unsigned i = 0; i < AL_RANGES; i++) {
		if (al->rstate[i] == R_QUEUED)
			al->rstate[i] = R_WRITING;
		if (al->rstate[i] == R_FREEING) {
			al->rstate[i] = R_FREEING_WR;
			*evicts = true;
		}
		if (al->rstate[i] == R_WRITING || al->rstate[i] == R_HOT) {
			tr.range_first[i] = al->rfirst[i];
			tr.range_count[i] = al->rcount[i];
		}
	}
	tr.ctx_start = al->ctx_pos;
	tr.n_context = (uint16_t)(al->n < AL_CTX_MAX ? al->n : AL_CTX_MAX);
	for (unsigned i = 0; i < tr.n_context; i++) {
		const struct slot *s = &al->s[(al->ctx_pos + i) % al->n];

		/* What the disk will say once this transaction lands; queued changes wait. */
		tr.ctx[i] = s->state == S_WRITING ? s->ext : s->disk_ext;
	}
	al->ctx_pos = (al->ctx_pos + tr.n_context) % al->n;
	tr_encode(&tr, buf);
	return (unsigned)(tr.seq % AL_RING_SLOTS);
}

void al_tr_committed(struct al *al)
{
	for (uint32_t k = 0; k < al->nwriting; k++) {
		struct slot *s = &al->s[al->writing[k]];

		s->disk_ext = s->ext;
		if (s->state == S_WRITING)
			s->state = S_HOT;
	}
	al->nwriting = 0;
	for (unsigned i = 0; i < AL_RANGES; i++) {
		if (al->rstate[i] == R_WRITING)
			al->rstate[i] = R_HOT;
		if (al->rstate[i] == R_FREEING_WR) {
			al->rstate[i] = R_FREE; /* its removal is on disk */
			al->rcount[i] = 0;
		}
	}
	al->seq++;
}

int al_tr_decode(const uint8_t *b, struct al_tr *tr, char *why, size_t whylen)
{
	uint8_t tmp[AL_TR_SIZE];

	if (memcmp(b, AL_MAGIC, 8) != 0) {
		bool blank = b[0] == 0 && memcmp(b, b + 1, AL_TR_SIZE - 1) == 0;

		errbuf_set(why, whylen, blank ? "blank" : "no transaction magic");
		return -1;
	}
	memcpy(tmp, b, AL_TR_SIZE);
	memset(tmp + 8, 0, 4);
	uint32_t stored = le_get32(b + 8), calc = crc32c_update(0, tmp, AL_TR_SIZE);
	if (stored != calc) {
		errbuf_set(why, whylen,
		           "bad checksum (stored 0x%08" PRIx32 ", computed 0x%08" PRIx32 ")",
		           stored, calc);
		return -1;
	}
	memset(tr, 0, sizeof(*tr));
	tr->n_updates = le_get16(b + 12);
	tr->n_context = le_get16(b + 14);
	tr->seq = le_get64(b + 16);
	tr->n_slots = le_get32(b + 24);
	tr->shift = le_get32(b + 28);
	tr->ctx_start = le_get32(b + 32);
	if (tr->n_updates > AL_UPDATES_MAX || tr->n_context > AL_CTX_MAX ||
	    tr->n_slots < AL_SLOTS_MIN || tr->n_slots > AL_SLOTS_MAX || tr->shift < AL_SHIFT_MIN ||
	    tr->shift > AL_SHIFT_MAX || tr->ctx_start >= tr->n_slots || tr->seq == 0 ||
	    tr->n_context > tr->n_slots) {
		errbuf_set(
		    why, whylen,
		    "fields out of range (seq %" PRIu64 ", %u updates, %u context slots, %" PRIu32
		    " slots, shift %" PRIu32 ", context at %" PRIu32 ")",
		    tr->seq, tr->n_updates, tr->n_context, tr->n_slots, tr->shift, tr->ctx_start);
		return -1;
	}
	for (unsigned i = 0; i < AL_RANGES; i++) {
		tr->range_first[i] = le_get32(b + 40 + 8 * i);
		tr->range_count[i] = le_get32(b + 44 + 8 * i);
	}
	for (unsigned i = 0; i < tr->n_updates; i++) {
		tr->upd_slot[i] = le_get32(b + 72 + 8 * i);
		tr->upd_ext[i] = le_get32(b + 76 + 8 * i);
		if (tr->upd_slot[i] >= tr->n_slots) {
			errbuf_set(why, whylen, "update %u names slot %" PRIu32 " of %" PRIu32, i,
			           tr->upd_slot[i], tr->n_slots);
			return -1;
		}
	}
	for (unsigned i = 0; i < tr->n_context; i++)
		tr->ctx[i] = le_get32(b + AL_CTX_OFFSET + 4 * i);
	return 0;
}

/* ---- recovery ------------------------------------------------------------------------------ */

uint64_t al_ring_last_seq(const uint8_t *ring)
{
	static struct al_tr tr;
	uint64_t last = 0;

	for (unsigned i = 0; i < AL_RING_SLOTS; i++)
		if (al_tr_decode(ring + (size_t)i * AL_TR_SIZE, &tr, NULL, 0) == 0 && tr.seq > last)
			last = tr.seq;
	return last;
}

static bool ring_blank(const uint8_t *ring)
{
	return ring[0] == 0 && memcmp(ring, ring + 1, AL_RING_SIZE - 1) == 0;
}

/* Replay the transactions of the newest ring cycle into val[n_slots]; false if a slot stays
 * unknown. */
static bool ring_replay(const uint8_t *ring, const struct al_tr *newest, uint32_t *val,
                        struct al_tr *tr, unsigned *used)
{
	uint32_t n = newest->n_slots;
	uint64_t lo = newest->seq >= AL_RING_SLOTS ? newest->seq - AL_RING_SLOTS + 1 : 1;

	memset(val, 0xfe, n * sizeof(*val)); /* 0xfefefefe: unknown */
	*used = 0;
	for (uint64_t seq = lo; seq <= newest->seq; seq++) {
		const uint8_t *b = ring + (size_t)(seq % AL_RING_SLOTS) * AL_TR_SIZE;

		if (al_tr_decode(b, tr, NULL, 0) < 0 || tr->seq != seq || tr->n_slots != n ||
		    tr->shift != newest->shift)
			continue;
		(*used)++;
		for (unsigned i = 0; i < tr->n_context; i++)
			val[(tr->ctx_start + i) % n] = tr->ctx[i];
		for (unsigned i = 0; i < tr->n_updates; i++)
			val[tr->upd_slot[i]] = tr->upd_ext[i];
	}
	for (uint32_t i = 0; i < n; i++)
		if (val[i] == 0xfefefefeu)
			return false;
	return true;
}

static int recover_collect(const struct al_tr *newest, const uint32_t *val,
                           struct al_recovered *out)
{
	uint64_t total = 0;

	for (uint32_t i = 0; i < newest->n_slots; i++)
		total += val[i] != AL_EXT_NONE;
	for (unsigned i = 0; i < AL_RANGES; i++)
		total += newest->range_count[i];
	out->ext = malloc((total ? total : 1) * sizeof(*out->ext));
	if (!out->ext) {
		errno = ENOMEM;
		return -1;
	}
	for (uint32_t i = 0; i < newest->n_slots; i++)
		if (val[i] != AL_EXT_NONE)
			out->ext[out->n_ext++] = val[i];
	for (unsigned i = 0; i < AL_RANGES; i++)
		for (uint32_t k = 0; k < newest->range_count[i]; k++)
			out->ext[out->n_ext++] = newest->range_first[i] + k;
	return 0;
}

int al_recover(const uint8_t *ring, struct al_recovered *out, char *err, size_t errlen)
{
	static struct al_tr tr, newest;
	uint32_t *val = NULL;
	unsigned used;
	int rc = -1, best = -1;

	memset(out, 0, sizeof(*out));
	errbuf_set(err, errlen, "%s", "");
	if (ring_blank(ring)) {
		out->blank = true;
		return 0;
	}
	for (unsigned i = 0; i < AL_RING_SLOTS; i++) {
		if (al_tr_decode(ring + (size_t)i * AL_TR_SIZE, &tr, NULL, 0) < 0) {
			out->invalid_trs++;
			continue;
		}
		out->valid_trs++;
		if (best < 0 || tr.seq > newest.seq) {
			newest = tr;
			best = (int)i;
		}
	}
	errno = EINVAL;
	if (best < 0) {
		errbuf_set(
		    err, errlen,
		    "The activity log holds no valid transaction in its %u slots (damaged or "
		    "overwritten).",
		    AL_RING_SLOTS);
		goto out;
	}
	val = malloc(newest.n_slots * sizeof(*val));
	if (!val) {
		errno = ENOMEM;
		errbuf_set(err, errlen, "%s", "Out of memory reading the activity log.");
		goto out;
	}
	if (!ring_replay(ring, &newest, val, &tr, &used)) {
		errbuf_set(err, errlen,
		           "The activity log's %u usable transactions up to seq %" PRIu64
		           " do not cover all %" PRIu32 " slots.",
		           used, newest.seq, newest.n_slots);
		goto out;
	}
	out->seq = newest.seq;
	out->shift = newest.shift;
	out->n_slots = newest.n_slots;
	if (recover_collect(&newest, val, out) < 0) {
		errbuf_set(err, errlen, "%s", "Out of memory reading the activity log.");
		goto out;
	}
	rc = 0;
out:
	free(val);
	return rc;
}

void al_recovered_free(struct al_recovered *rec)
{
	free(rec->ext);
	rec->ext = NULL;
	rec->n_ext = 0;
}

/* ---- status, dump, decisions ------------------------------------------------------------- */

void al_stats(const struct al *al, struct al_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->n_slots = al->n;
	for (uint32_t i = 0; i < al->n; i++) {
		const struct slot *s = &al->s[i];

		out->hot += s->state == S_HOT;
		out->busy += s->refs > 0;
		out->unstable += s->ext != AL_EXT_NONE && pinned(al, s->pin);
		out->pending += s->state == S_QUEUED || s->state == S_WRITING;
	}
	for (unsigned i = 0; i < AL_RANGES; i++)
		out->ranges += al->rstate[i] == R_HOT;
	out->seq = al->seq - 1;
	out->hits = al->hits;
	out->misses = al->misses;
	out->evictions = al->evictions;
}

int al_dump(const uint8_t *ring, uint64_t vol_size, FILE *out)
{
	struct al_recovered rec;
	char err[256];

	if (al_recover(ring, &rec, err, sizeof(err)) < 0) {
		fprintf(out, "activity log       unreadable: %s\n", err);
	} else if (rec.blank) {
		fprintf(out, "activity log       never written\n");
	} else {
		uint64_t bytes = 0, esz = (uint64_t)1 << rec.shift;

		for (uint32_t i = 0; i < rec.n_ext; i++) {
			uint64_t off = (uint64_t)rec.ext[i] << rec.shift;

			if (off < vol_size || vol_size == 0)
				bytes += vol_size && vol_size - off < esz ? vol_size - off : esz;
		}
		fprintf(out,
		        "activity log       seq %" PRIu64 ", %" PRIu32 " slots of %" PRIu64
		        " KiB, %" PRIu32 " extents hot (%" PRIu64
		        " bytes), %u valid and %u invalid ring slots\n",
		        rec.seq, rec.n_slots, esz >> 10, rec.n_ext, bytes, rec.valid_trs,
		        rec.invalid_trs);
		fprintf(out, "al extents        ");
		for (uint32_t i = 0; i < rec.n_ext && i < 64; i++)
			fprintf(out, " %" PRIu32, rec.ext[i]);
		fprintf(out, "%s%s\n", rec.n_ext > 64 ? " ..." : "", rec.n_ext ? "" : " (none)");
		al_recovered_free(&rec);
	}
	if (ferror(out)) {
		errno = EIO;
		return -1;
	}
	return 0;
}

bool al_crash_needs_full(int rule, bool self_crashed, bool self_tail_in_bitmap, bool peer_crashed,
                         bool peer_tail_in_bitmap)
{
	switch (rule) {
	case GEN_RULE_CRASHED_SELF:
	case GEN_RULE_CRASHED_PEER:
	case GEN_RULE_BITMAP_SELF_CRASHED_PEER:
	case GEN_RULE_BITMAP_SELF_CRASHED_SELF:
	case GEN_RULE_BITMAP_PEER_CRASHED_SELF:
	case GEN_RULE_BITMAP_PEER_CRASHED_PEER:
		return (self_crashed && !self_tail_in_bitmap) ||
		       (peer_crashed && !peer_tail_in_bitmap);
	default:
		return true;
	}
}
