/* SPDX-License-Identifier: MIT */
/*
 * Activity log: the set of "hot" extents of a primary, kept so that after a crash only those
 * extents (plus the dirty bitmap) need a resync instead of the whole volume. Pure logic: the hot
 * table with LRU eviction, the on-disk transaction format and the recovery of the table from a
 * ring image. The disk I/O and the write gate live in al_io.c.
 *
 * A write may start only when every extent it touches is hot, i.e. listed by an AL transaction
 * that is on disk. A cold extent takes a slot of the table (the least recently used one with no
 * write in flight) and waits for the next transaction; one transaction carries up to
 * AL_UPDATES_MAX such changes, so concurrent cold writes share one metadata write.
 *
 * Transaction (one AL_TR_SIZE block of the ring, slot = seq % AL_RING_SLOTS, little-endian):
 *     0    u8  magic[8]      "HAKALTR\0"
 *     8    u32 crc32c        of the whole block with this field zero
 *     12   u16 n_updates     0..AL_UPDATES_MAX
 *     14   u16 n_context     0..AL_CTX_MAX
 *     16   u64 seq           increases by one per transaction, across restarts
 *     24   u32 n_slots       al-extents when it was written
 *     28   u32 extent_shift  log2 of the extent size
 *     32   u32 ctx_start     first slot of the context window
 *     36   u32 reserved      zero
 *     40   AL_RANGES x {u32 first extent, u32 count (0: unused)}: requests wider than
 *          AL_REQ_EXTENTS_MAX extents (large TRIM/WRITE_ZEROES), always the complete set
 *     72   AL_UPDATES_MAX x {u32 slot, u32 extent}
 *     584  AL_CTX_MAX x u32 extent of slots ctx_start, ctx_start+1, ... (mod n_slots)
 * AL_EXT_NONE marks an empty slot. Replaying the valid transactions of the last ring cycle in seq
 * order (context first, then updates) rebuilds the table as of the newest one; contexts rotate,
 * so any AL_RING_SLOTS - 2 consecutive transactions cover every slot (a torn newest write costs
 * one, margin the other).
 */
#ifndef HAK_AL_H
#define HAK_AL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define AL_TR_SIZE          4096u
#define AL_RING_SLOTS       16u
#define AL_RING_SIZE        (AL_TR_SIZE * AL_RING_SLOTS)
#define AL_UPDATES_MAX      64u
#define AL_RANGES           4u
#define AL_CTX_OFFSET       584u
#define AL_CTX_MAX          ((AL_TR_SIZE - AL_CTX_OFFSET) / 4u)
#define AL_SLOTS_MIN        64u
#define AL_SLOTS_MAX        ((AL_RING_SLOTS - 2u) * AL_CTX_MAX)
#define AL_SHIFT_MIN        20u /* 1 MiB extents */
#define AL_SHIFT_MAX        30u /* 1 GiB extents */
#define AL_EXT_NONE         0xffffffffu
#define AL_REQ_EXTENTS_MAX  16u /* wider requests take a range instead of extents */
#define AL_DEFAULT_SLOTS    1237u
#define AL_DEFAULT_EXT_SIZE (4u << 20)

struct al;

/* A decoded transaction. */
struct al_tr {
	uint64_t seq;
	uint32_t n_slots;
	uint32_t shift;
	uint32_t ctx_start;
	uint16_t n_updates;
	uint16_t n_context;
	uint32_t range_first[AL_RANGES];
	uint32_t range_count[AL_RANGES];
	uint32_t upd_slot[AL_UPDATES_MAX];
	uint32_t upd_ext[AL_UPDATES_MAX];
	uint32_t ctx[AL_CTX_MAX];
};

/* What a ring says was hot: every extent (a range counts as its extents) at the time of seq. */
struct al_recovered {
	bool blank;     /* the ring was never written (all zeros) */
	uint64_t seq;   /* newest valid transaction (0 when blank) */
	uint32_t shift; /* extent size of the transactions */
	uint32_t n_slots;
	uint32_t n_ext; /* extents in ext[] (hot slots, then range extents; may repeat) */
	uint32_t *ext;  /* malloc'ed; free with al_recovered_free */
	unsigned valid_trs, invalid_trs;
};

/*
 * A table of n_slots extents of 1 << shift bytes for a volume of vol_size bytes. 0, or -1 with
 * errno EINVAL (out of the AL_SLOTS_*, AL_SHIFT_* ranges, or more than 2^32-1 extents) or ENOMEM.
 * The table starts empty; first_seq is the seq the first transaction gets.
 */
int al_create(uint32_t n_slots, uint32_t shift, uint64_t vol_size, uint64_t first_seq,
              struct al **out);
void al_free(struct al *al);

/*
 * Make every extent of [off, off + len) usable by one more request. 1: they are all hot and
 * referenced (al_end_io releases them). 0: not yet; the cold ones were queued for the next
 * transaction where slots allowed, and the caller retries after al_tr_committed or al_end_io.
 */
int al_begin_io(struct al *al, uint64_t off, uint64_t len);
/* Another reference to a range that al_begin_io made hot and that is still referenced. */
void al_ref_io(struct al *al, uint64_t off, uint64_t len);
/* Drop one reference; true when an extent became evictable (a waiter may progress now). */
bool al_end_io(struct al *al, uint64_t off, uint64_t len);
/*
 * The peer acknowledged a write it may still lose in a power cut: the range, which must be
 * referenced, stays hot until al_stable passes seq, even after its last reference is gone. Else
 * both nodes losing power could leave a block that differs with neither the bitmap nor the
 * on-disk log knowing it (DRBD, too, keeps the extent until the barrier ack). seq is a
 * transfer-log sequence; a later pin of the same extent replaces an earlier one.
 */
void al_pin(struct al *al, uint64_t off, uint64_t len, uint64_t seq);
/* Every sequence below `below` is stable (barrier acknowledged, or in the bitmap once the peer
 * is gone). True when the mark moved, so a waiter may progress. */
bool al_stable(struct al *al, uint64_t below);

/* Whether changes wait for a transaction. */
bool al_tr_pending(const struct al *al);
/*
 * Encode the next transaction into buf (AL_TR_SIZE bytes) and return its ring slot. *evicts
 * says whether it drops an extent that was hot on disk (the caller persists the bitmap first).
 * Only one transaction is built at a time: al_tr_committed or al_tr_failed must follow.
 * Without pending changes it still encodes one (the next context window): that is how the ring
 * is initialised at startup.
 */
unsigned al_tr_build(struct al *al, uint8_t *buf, bool *evicts);
/* The built transaction is on disk: its extents are hot. */
void al_tr_committed(struct al *al);

/* Decode and check one ring block. 0, or -1 (blank or invalid); why gets a reason. */
int al_tr_decode(const uint8_t *buf, struct al_tr *tr, char *why, size_t whylen);

/*
 * Rebuild the hot set from a ring image of AL_RING_SIZE bytes. 0 (out->blank when never written),
 * or -1 with errno EINVAL and a sentence in err when the ring has no valid transaction or the
 * valid ones do not cover every slot: the caller must then assume every extent was hot.
 */
int al_recover(const uint8_t *ring, struct al_recovered *out, char *err, size_t errlen);
void al_recovered_free(struct al_recovered *rec);
/* Newest valid seq in a ring image (0 if none): the next transaction continues after it. */
uint64_t al_ring_last_seq(const uint8_t *ring);

/* For status: slots used, in flight (referenced), waiting for a transaction. */
struct al_stats {
	uint32_t n_slots;
	uint32_t hot;
	uint32_t busy;
	uint32_t pending;
	uint32_t ranges;
	uint32_t unstable; /* hot, pinned by a write the peer has not made stable */
	uint64_t seq;      /* last committed */
	uint64_t hits, misses, evictions;
};
void al_stats(const struct al *al, struct al_stats *out);

/* dump-md: what the ring holds. 0, or -1 with errno on a write error. */
int al_dump(const uint8_t *ring, uint64_t vol_size, FILE *out);

/*
 * Whether a connection decided as a full resync because of a crashed primary (gen.h rule) can
 * do with the bitmaps instead: every side that crashed as primary has put its activity log into
 * its bitmap.
 */
bool al_crash_needs_full(int rule, bool self_crashed, bool self_tail_in_bitmap, bool peer_crashed,
                         bool peer_tail_in_bitmap);

#endif
