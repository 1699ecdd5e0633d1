/* SPDX-License-Identifier: MIT */
/* The activity log's gate and transaction writes (see al_io.h). */
#include "al_io.h"

#include <errno.h>
#include <ev.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "al.h"
#include "bitmap.h"
#include "ctl/events.h"
#include "io/io.h"
#include "lib/errbuf.h"
#include "lib/log.h"
#include "lib/rangelock.h"
#include "meta.h"

_Static_assert(AL_RING_SIZE == META_AL_SIZE, "the AL ring must fill the metadata's AL area");

struct al_io {
	struct al_io_params p;
	struct al *al;
	uint8_t *buf; /* the transaction being written */
	struct io_req req;
	bool busy;
	bool failed;
	bool closing;
	unsigned tr_updates;
	struct rangelock waiting; /* gated requests, in arrival order */
	ev_timer kick;            /* retries waiters outside the caller's stack */
	uint64_t writes, waits, failed_writes;
};

/* OR every recovered extent into the bitmap. */
static void tail_to_bitmap(const struct al_io_params *p, const struct al_recovered *rec)
{
	uint64_t esz = (uint64_t)1 << rec->shift;

	for (uint32_t i = 0; i < rec->n_ext; i++) {
		uint64_t off = (uint64_t)rec->ext[i] << rec->shift;

		if (off >= p->vol_size)
			continue;
		bitmap_set_range(p->bm, off, p->vol_size - off < esz ? p->vol_size - off : esz);
	}
}

/* After a crash as primary: put the crash tail into the bitmap and make that durable. */
static int recover_crash(const struct al_io_params *p, const uint8_t *ring, char *err,
                         size_t errlen)
{
	struct al_recovered rec;
	char why[256];
	uint64_t before = bitmap_count(p->bm);

	if (al_recover(ring, &rec, why, sizeof(why)) < 0 || rec.blank) {
		log_vol(
		    LOG_LVL_WARN, p->name, NULL,
		    "%s The node crashed as primary, so the whole volume is marked out of sync.",
		    rec.blank ? "The activity log was never written (it was off)." : why);
		bitmap_set_all(p->bm);
		events_emit("al-recover", "volume:%s result:unreadable marked:all", p->name);
	} else {
		tail_to_bitmap(p, &rec);
		log_vol(LOG_LVL_NOTICE, p->name, NULL,
		        "Recovered the activity log after a crash as primary: %" PRIu32
		        " extents of %" PRIu64 " KiB (seq %" PRIu64 ") marked %" PRIu64
		        " more blocks out of sync.",
		        rec.n_ext, (uint64_t)1 << rec.shift >> 10, rec.seq,
		        bitmap_count(p->bm) - before);
		events_emit("al-recover",
		            "volume:%s result:ok seq:%" PRIu64 " extents:%" PRIu32
		            " marked_blocks:%" PRIu64,
		            p->name, rec.seq, rec.n_ext, bitmap_count(p->bm) - before);
		al_recovered_free(&rec);
	}
	if (meta_flush_bitmap(p->meta, p->bm) < 0) {
		errbuf_set(err, errlen,
		           "Persisting the bitmap with the activity log's extents failed: %s.",
		           strerror(errno));
		return -1;
	}
	return 0;
}

/* Write transactions until the ring describes the (empty) table completely. */
static int ring_init(struct al_io *a)
{
	struct al_stats st;
	unsigned n;
	bool evicts;

	al_stats(a->al, &st);
	n = (st.n_slots + AL_CTX_MAX - 1) / AL_CTX_MAX;
	for (unsigned i = 0; i < n; i++) {
		unsigned slot = al_tr_build(a->al, a->buf, &evicts);

		if (meta_write_al_slot(a->p.meta, slot, a->buf) < 0)
			return -1;
		al_tr_committed(a->al);
		a->writes++;
	}
	return 0;
}

static void kick_cb(struct ev_loop *loop, ev_timer *w, int revents);

static int al_io_setup(const struct al_io_params *p, const uint8_t *ring, struct al_io **out)
{
	struct al_io *a = calloc(1, sizeof(*a));
	uint32_t shift = 0;

	while (shift < 63 && (1u << shift) < p->ext_size)
		shift++;
	if (!a || posix_memalign((void **)&a->buf, 4096, AL_TR_SIZE) != 0) {
		free(a);
		errno = ENOMEM;
		return -1;
	}
	a->p = *p;
	rangelock_init(&a->waiting);
	if (al_create(p->n_slots, shift, p->vol_size, al_ring_last_seq(ring) + 1, &a->al) < 0) {
		free(a->buf);
		free(a);
		return -1;
	}
	ev_timer_init(&a->kick, kick_cb, 0., 0.);
	a->kick.data = a;
	*out = a;
	return 0;
}

int al_io_open(const struct al_io_params *p, bool crashed, bool *tail_in_bitmap, struct al_io **out,
               char *err, size_t errlen)
{
	uint8_t *ring = malloc(AL_RING_SIZE);
	int rc = -1;

	*out = NULL;
	*tail_in_bitmap = false;
	if (!ring) {
		errbuf_set(err, errlen, "Out of memory for the activity log.");
		goto out;
	}
	if (meta_read_al(p->meta, ring) < 0) {
		errbuf_set(err, errlen, "Reading the activity log failed: %s.", strerror(errno));
		goto out;
	}
	if (p->n_slots == 0) {
		/* Off: a later start with the log on must not trust what is left in the ring. */
		if (meta_zero_al(p->meta) < 0) {
			errbuf_set(err, errlen, "Clearing the activity log failed: %s.",
			           strerror(errno));
			goto out;
		}
		rc = 0;
		goto out;
	}
	if (crashed && recover_crash(p, ring, err, errlen) < 0)
		goto out;
	*tail_in_bitmap = true;
	if (al_io_setup(p, ring, out) < 0) {
		errbuf_set(err, errlen,
		           "The activity log of %" PRIu32 " extents of %" PRIu32
		           " bytes cannot be set up for %" PRIu64 " bytes: %s.",
		           p->n_slots, p->ext_size, p->vol_size, strerror(errno));
		goto out;
	}
	if (ring_init(*out) < 0) {
		errbuf_set(err, errlen, "Writing the activity log failed: %s.", strerror(errno));
		al_io_close(*out);
		*out = NULL;
		goto out;
	}
	rc = 0;
out:
	free(ring);
	return rc;
}

/* The log can no longer be kept: say so once, then every gated write fails. */
static void al_io_broken(struct al_io *a, const char *why)
{
	if (!a->failed)
		events_emit("al-failed", "volume:%s reason:%s", a->p.name, why);
	a->failed = true;
}

static void waiters_fail(struct al_io *a)
{
	while (a->waiting.head) {
		struct range *w = a->waiting.head;

		rangelock_del(w);
		a->p.resume(a->p.ctx, w, EIO);
	}
}

static void tr_done(struct io_req *req);

/* Start the next transaction if changes wait and none is in flight. */
static void tr_kick(struct al_io *a)
{
	bool evicts;
	unsigned slot;

	if (a->busy || a->failed || !al_tr_pending(a->al))
		return;
	slot = al_tr_build(a->al, a->buf, &evicts);
	/* Slots are being recycled: the next ones will be those unstable writes pin now, so get
	 * them stable while this transaction is written (DRBD, too, starts an epoch here). */
	if (evicts && a->p.want_stable)
		a->p.want_stable(a->p.ctx);
	/* An extent leaves the hot set on disk: its bitmap bits must be there first. */
	if (evicts && bitmap_dirty_pages(a->p.bm) && meta_flush_bitmap(a->p.meta, a->p.bm) < 0) {
		al_io_broken(a, "bitmap-write");
		log_vol(LOG_LVL_ERR, a->p.name, NULL,
		        "Persisting the bitmap before an activity-log update failed (%s); writes "
		        "fail from now on.",
		        strerror(errno));
		waiters_fail(a);
		return;
	}
	memset(&a->req, 0, sizeof(a->req));
	a->req.op = IO_OP_WRITE;
	a->req.flags = IO_F_FUA | IO_F_BUFFERED;
	a->req.fd = meta_fd(a->p.meta);
	a->req.buf = a->buf;
	a->req.off = meta_al_offset(a->p.meta) + (uint64_t)slot * AL_TR_SIZE;
	a->req.len = AL_TR_SIZE;
	a->req.done = tr_done;
	a->req.data = a;
	a->busy = true;
	if (io_submit(a->p.io, &a->req) < 0) {
		a->req.res = -errno;
		a->busy = false;
		al_io_broken(a, "submit");
		waiters_fail(a);
	}
}

/* Waiters that only freed slots can help: ask for the unstable ones to become stable. */
static void starve_check(struct al_io *a)
{
	if (a->waiting.head && !a->busy && !a->failed && !al_tr_pending(a->al) && a->p.want_stable)
		a->p.want_stable(a->p.ctx);
}

static void waiters_retry(struct al_io *a)
{
	/* One round over the waiters there are now, oldest first; one that still finds no slot
	 * goes back to the tail. resume() may gate new requests (they wait for the next round) or
	 * fail every waiter (the head is then gone). */
	for (unsigned n = a->waiting.count; n > 0 && a->waiting.head; n--) {
		struct range *w = a->waiting.head;

		rangelock_del(w);
		if (al_begin_io(a->al, w->off, w->len) == 1)
			a->p.resume(a->p.ctx, w, 0);
		else
			rangelock_add(&a->waiting, w, w->off, w->len);
	}
	tr_kick(a);
	starve_check(a);
}

static void tr_done(struct io_req *req)
{
	struct al_io *a = req->data;

	a->busy = false;
	a->writes++;
	if (req->res < 0) {
		al_io_broken(a, "write");
		a->failed_writes++;
		log_vol(LOG_LVL_ERR, a->p.name, NULL,
		        "Writing an activity-log transaction at offset %" PRIu64
		        " of the metadata failed (%s); writes fail from now on.",
		        req->off, strerror((int)-req->res));
		waiters_fail(a);
		return;
	}
	al_tr_committed(a->al);
	if (!a->closing)
		waiters_retry(a);
}

static void kick_cb(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct al_io *a = w->data;

	(void)loop;
	(void)revents;
	if (a->failed)
		waiters_fail(a);
	else
		waiters_retry(a);
}

static void kick_soon(struct al_io *a)
{
	if (!ev_is_active(&a->kick)) {
		ev_timer_set(&a->kick, 0., 0.);
		ev_timer_start(a->p.loop, &a->kick);
	}
}

int al_io_gate(struct al_io *a, struct range *w, uint64_t off, uint64_t len)
{
	if (!a->failed && al_begin_io(a->al, off, len) == 1)
		return 1;
	a->waits++;
	rangelock_add(&a->waiting, w, off, len);
	if (a->failed) {
		kick_soon(a); /* fails it from the loop, never inside the submitter's call */
	} else {
		tr_kick(a);
		starve_check(a);
	}
	return 0;
}

void al_io_ref(struct al_io *a, uint64_t off, uint64_t len)
{
	al_ref_io(a->al, off, len);
}

void al_io_put(struct al_io *a, uint64_t off, uint64_t len)
{
	if (al_end_io(a->al, off, len) && a->waiting.head)
		kick_soon(a);
}

void al_io_pin(struct al_io *a, uint64_t off, uint64_t len, uint64_t seq)
{
	al_pin(a->al, off, len, seq);
}

void al_io_stable(struct al_io *a, uint64_t below)
{
	if (al_stable(a->al, below) && a->waiting.head)
		kick_soon(a);
}

void al_io_close(struct al_io *a)
{
	if (!a)
		return;
	a->closing = true;
	if (a->busy)
		io_drain(a->p.io, 10.0);
	waiters_fail(a);
	ev_timer_stop(a->p.loop, &a->kick);
	al_free(a->al);
	free(a->buf);
	free(a);
}

json_t *al_io_status_json(const struct al_io *a)
{
	struct al_stats st;
	unsigned waiting = a->waiting.count;

	al_stats(a->al, &st);
	return json_pack("{s:i, s:I, s:I, s:i, s:i, s:i, s:i, s:i, s:I, s:I, s:I, s:I, s:I, s:b}",
	                 "extents", (int)st.n_slots, "extent_size", (json_int_t)a->p.ext_size,
	                 "coverage_bytes", (json_int_t)((uint64_t)st.n_slots * a->p.ext_size),
	                 "hot", (int)st.hot, "busy", (int)st.busy, "unstable", (int)st.unstable,
	                 "waiting", (int)waiting, "ranges", (int)st.ranges, "seq",
	                 (json_int_t)st.seq, "writes", (json_int_t)a->writes, "hits",
	                 (json_int_t)st.hits, "misses", (json_int_t)st.misses, "evictions",
	                 (json_int_t)st.evictions, "failed", a->failed);
}
