/* SPDX-License-Identifier: MIT */
/*
 * The activity log of one volume at work: the write gate of the primary and the transaction
 * writes (al.h has the logic and the format).
 *
 * A write whose extents are not hot waits, off the loop, until the transaction making them hot
 * is durable: transactions are written through the I/O engine with FUA into the metadata's ring,
 * one at a time; what turns cold while one is in flight rides on the next. Before a transaction
 * drops an extent from the disk's hot set, the dirty bitmap is persisted, so a block the peer may
 * lack is always on disk either as hot extent or as bitmap bit (the crash-recovery invariant).
 * If a transaction cannot be written, every write from then on fails with EIO: the crash
 * guarantee could no longer be kept.
 *
 * At startup, after a crash as primary, the ring's extents are OR-ed into the bitmap; a ring that
 * cannot vouch for itself (damaged, or never written while the node ran with the log) sets the
 * whole bitmap instead. Either way the crash tail is then in the bitmap.
 */
#ifndef HAK_AL_IO_H
#define HAK_AL_IO_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct al_io;
struct bitmap;
struct ev_loop;
struct io_engine;
struct meta;
struct range;

struct al_io_params {
	struct ev_loop *loop;
	struct io_engine *io;
	struct meta *meta;
	struct bitmap *bm;
	const char *name;  /* volume, for the log */
	uint32_t n_slots;  /* al-extents; 0: no activity log */
	uint32_t ext_size; /* al-extent-size, a power of two */
	uint64_t vol_size;
	/* A gated request (the range it waited with) may go on (err 0, references taken) or must
	 * fail (a positive errno). */
	void (*resume)(void *ctx, struct range *w, int err);
	/* Optional: slots are short (a transaction recycles hot ones, or requests wait that only
	 * freed slots can help). The caller should make its unstable writes stable soon (end its
	 * epoch) rather than let them hold slots until a timer does. */
	void (*want_stable)(void *ctx);
	void *ctx;
};

/*
 * Recover (crashed: the node went down as primary) and initialise the ring. *tail_in_bitmap:
 * whether the bitmap now covers everything the crashed node may hold that the peer lacks (always
 * true when the log is on). *out is NULL when the log is off. 0, or -1 with errno and a sentence
 * in err.
 */
int al_io_open(const struct al_io_params *p, bool crashed, bool *tail_in_bitmap, struct al_io **out,
               char *err, size_t errlen);
/* Waits for a transaction in flight, then frees. Gated requests must be gone (none wait once
 * no client is connected). */
void al_io_close(struct al_io *a);

/*
 * The gate for a write of [off, off+len): 1 it may go (references taken), 0 it waits, queued
 * with w (which must be in no rangelock): resume(w) is called later from the loop, with EIO when
 * the log is broken.
 */
int al_io_gate(struct al_io *a, struct range *w, uint64_t off, uint64_t len);
/* One more reference for a range that is held (the copy in flight to the peer). */
void al_io_ref(struct al_io *a, uint64_t off, uint64_t len);
void al_io_put(struct al_io *a, uint64_t off, uint64_t len);
/* The peer acknowledges writes before they are stable: al_pin / al_stable (al.h). */
void al_io_pin(struct al_io *a, uint64_t off, uint64_t len, uint64_t seq);
void al_io_stable(struct al_io *a, uint64_t below);

/* {"extents":N, "extent_size":B, "hot":N, "busy":N, "unstable":N, "waiting":N, "writes":N, ...} */
json_t *al_io_status_json(const struct al_io *a);

#endif
