/* SPDX-License-Identifier: MIT */
/*
 * hak-ledger: the acknowledged-write ledger, the judge of "no acknowledged write is ever lost".
 *
 *   hak-ledger write  --uri URI --ledger FILE [--seconds S] [--max-writes N] [--qd 16]
 *                     [--blocks N] [--region-offset BYTES] [--seed SEED] [--flush-every N]
 *                     [--writer-id ID]
 *   hak-ledger verify --ledger FILE (--uri URI | --file PATH) [--json]
 *   hak-ledger stats  --ledger FILE [--json]
 *   hak-ledger merge  --ledger OUT IN1 [IN2 ...]
 *
 * write storms random 4 KiB writes at a queue depth, never two in flight to the same block, so
 * each block's generations reach the server in issue order. Every block written is
 * self-describing (see block_fill) and every write the server ACKNOWLEDGED is appended to the
 * ledger as {block, generation}. verify then demands that each ledgered block still holds that
 * generation or a newer one: a newer one is legal because its ack may have died with the server.
 *
 * Ledger file: a 32-byte header, then 16-byte little-endian records {u64 block, u64 generation}.
 *   0  magic "HAKLEDGF"       8  u32 version (1)      12 u32 block size (4096)
 *   16 u32 record size (16)   20 u32 reserved (0)     24 u64 reserved generation
 * The reserved generation is written BEFORE any generation above it is issued: writes that were
 * sent but never acknowledged leave no record, yet may be on disk, and a later run that reused
 * their numbers could mistake one of them for its own newer write and hide a lost write.
 *
 * write prints "ledger: N writes acknowledged, M failed, last generation G, stopped: REASON" on
 * stdout, G being the highest acknowledged generation (the ledger's maximum); M counts writes
 * that were sent but completed with an error or were still unanswered 5 s after the stop. REASON
 * is one of: time limit, max writes reached, SIGTERM, SIGINT, server disconnected, write error,
 * flush error, ledger write error.
 *
 * Exit status: write 0 after any stop, including a dead server; verify 0 when nothing is missing
 * or corrupt, 2 when something is; 1 everywhere for usage errors, a server that cannot be reached
 * at all and a ledger that cannot be read or written.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libnbd.h>

#include "lib/clock.h"
#include "lib/endian.h"

#define BLOCK_SIZE     4096u
#define BLOCK_MAGIC    "HAKLEDGR"
#define BLOCK_VERSION  1u
#define BLOCK_SUM_OFF  (BLOCK_SIZE - 8u)
#define LEDGER_MAGIC   "HAKLEDGF"
#define LEDGER_VERSION 1u
#define LEDGER_HDR     32u
#define LEDGER_REC     16u
#define RESERVED_OFF   24u
/* Reserving generations in large steps keeps header updates rare (one pwrite per 64k writes). */
#define RESERVE_STEP   65536u
#define LEDGER_SYNC_MS 100
#define DRAIN_SECONDS  5.0
#define MAX_QD         4096u
#define VERIFY_CHUNK   (1024u * 1024u)
#define MAX_EXAMPLES   10
/* The dense per-block tables cost 8-20 bytes per block of the ledger's block span. */
#define MAX_SPAN (1ull << 27)

static volatile sig_atomic_t got_signal;

static void msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void msg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("hak-ledger: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* 64-bit FNV-1a: trivial to recompute from a shell or Python when a verdict needs a second look. */
static uint64_t fnv1a64(const uint8_t *p, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	size_t i;

	for (i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Accepts decimal, 0x hex, and (when suffixes) a binary K/M/G/T suffix. */
static int parse_u64(const char *s, uint64_t *out, bool suffixes)
{
	unsigned long long v;
	char *end;
	int shift = 0;

	errno = 0;
	if (!s || !*s || *s == '-')
		return -1;
	v = strtoull(s, &end, 0);
	if (errno || end == s)
		return -1;
	if (suffixes && *end) {
		const char *units = "KMGT";
		const char *u = strchr(units, *end & ~0x20);

		if (!u || end[1])
			return -1;
		shift = 10 * (int)(u - units + 1);
		if (v > (ULLONG_MAX >> shift))
			return -1;
		v <<= shift;
	} else if (*end) {
		return -1;
	}
	*out = v;
	return 0;
}

static int pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const uint8_t *p = buf;

	while (len > 0) {
		ssize_t r = pwrite(fd, p, len, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		len -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

static int pread_all(int fd, void *buf, size_t len, uint64_t off)
{
	uint8_t *p = buf;

	while (len > 0) {
		ssize_t r = pread(fd, p, len, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		if (r == 0) {
			errno = EIO;
			return -1;
		}
		p += r;
		len -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

/* ---- block format -------------------------------------------------------------------------
 *   0 "HAKLEDGR"  8 u64 block  16 u64 generation  24 u32 writer  28 u32 version
 *   32 .. 4087 random filler   4088 u64 FNV-1a of bytes 0..4087
 * The filler is random so that a block read from the wrong place, or stale data with a
 * plausible header, cannot pass the checksum by accident.
 */

static void block_fill(uint8_t *b, uint64_t block, uint64_t gen, uint32_t writer, uint64_t *rng)
{
	size_t i;

	memcpy(b, BLOCK_MAGIC, 8);
	le_put64(b + 8, block);
	le_put64(b + 16, gen);
	le_put32(b + 24, writer);
	le_put32(b + 28, BLOCK_VERSION);
	for (i = 32; i < BLOCK_SUM_OFF; i += 8) {
		uint64_t r = rng_next(rng);

		memcpy(b + i, &r, 8);
	}
	le_put64(b + BLOCK_SUM_OFF, fnv1a64(b, BLOCK_SUM_OFF));
}

enum verdict { V_OK, V_MISSING, V_CORRUPT };
static const char *const verdict_name[] = {"ok", "missing", "corrupt"};

/* Classifies one block read back; *found gets the generation it carries (0: no header). */
static enum verdict block_check(const uint8_t *b, uint64_t block, uint64_t want, uint64_t *found,
                                const char **why)
{
	*found = 0;
	if (memcmp(b, BLOCK_MAGIC, 8) != 0) {
		*why = "no ledger header";
		return V_MISSING;
	}
	*found = le_get64(b + 16);
	if (le_get64(b + BLOCK_SUM_OFF) != fnv1a64(b, BLOCK_SUM_OFF)) {
		*why = "checksum mismatch";
		return V_CORRUPT;
	}
	if (le_get64(b + 8) != block) {
		*why = "header names another block";
		return V_CORRUPT;
	}
	if (*found < want) {
		*why = "older generation";
		return V_MISSING;
	}
	*why = "";
	return V_OK;
}

/* ---- ledger files ------------------------------------------------------------------------- */

struct ledger {
	const char *path;
	uint8_t *map;
	size_t map_len;
	const uint8_t *recs;
	uint64_t nrecs;
	uint64_t reserved; /* header's reserved generation */
	uint64_t max_gen;
	uint64_t min_block, max_block;
	unsigned trunc_bytes; /* bytes of a torn last record, ignored */
};

static uint64_t rec_block(const struct ledger *l, uint64_t i)
{
	return le_get64(l->recs + i * LEDGER_REC);
}

static uint64_t rec_gen(const struct ledger *l, uint64_t i)
{
	return le_get64(l->recs + i * LEDGER_REC + 8);
}

static void ledger_hdr_encode(uint8_t *h, uint64_t reserved)
{
	memset(h, 0, LEDGER_HDR);
	memcpy(h, LEDGER_MAGIC, 8);
	le_put32(h + 8, LEDGER_VERSION);
	le_put32(h + 12, BLOCK_SIZE);
	le_put32(h + 16, LEDGER_REC);
	le_put64(h + RESERVED_OFF, reserved);
}

static int ledger_hdr_check(const struct ledger *l)
{
	const uint8_t *h = l->map;

	if (memcmp(h, LEDGER_MAGIC, 8) != 0) {
		msg("%s is not a ledger file: its first 8 bytes are not \"%s\".", l->path,
		    LEDGER_MAGIC);
		return -1;
	}
	if (le_get32(h + 8) != LEDGER_VERSION || le_get32(h + 12) != BLOCK_SIZE ||
	    le_get32(h + 16) != LEDGER_REC) {
		msg("Ledger %s has version %" PRIu32 ", block size %" PRIu32
		    " and record size %" PRIu32
		    "; this tool reads version %u, block size %u, record size %u only.",
		    l->path, le_get32(h + 8), le_get32(h + 12), le_get32(h + 16), LEDGER_VERSION,
		    BLOCK_SIZE, LEDGER_REC);
		return -1;
	}
	return 0;
}

/* Every record must carry a generation in 1..reserved: anything else is a damaged file. */
static int ledger_scan(struct ledger *l)
{
	uint64_t i;

	l->max_gen = 0;
	l->min_block = UINT64_MAX;
	l->max_block = 0;
	for (i = 0; i < l->nrecs; i++) {
		uint64_t b = rec_block(l, i), g = rec_gen(l, i);

		if (g == 0 || g > l->reserved) {
			msg("Ledger %s is damaged: record %" PRIu64 " (block %" PRIu64
			    ") has generation %" PRIu64 ", outside 1..%" PRIu64 " (the header's "
			    "reserved generation).",
			    l->path, i, b, g, l->reserved);
			return -1;
		}
		if (b > UINT64_MAX / BLOCK_SIZE) {
			msg("Ledger %s is damaged: record %" PRIu64 " names block %" PRIu64
			    ", beyond any byte offset.",
			    l->path, i, b);
			return -1;
		}
		l->max_gen = g > l->max_gen ? g : l->max_gen;
		l->min_block = b < l->min_block ? b : l->min_block;
		l->max_block = b > l->max_block ? b : l->max_block;
	}
	return 0;
}

static void ledger_unmap(struct ledger *l)
{
	if (l->map)
		munmap(l->map, l->map_len);
	l->map = NULL;
}

/* Maps and validates the ledger open on fd. */
static int ledger_map(struct ledger *l, int fd, const char *path)
{
	struct stat st;
	uint64_t body;

	memset(l, 0, sizeof(*l));
	l->path = path;
	if (fstat(fd, &st) < 0) {
		msg("Cannot stat ledger %s: %s.", path, strerror(errno));
		return -1;
	}
	if (st.st_size < (off_t)LEDGER_HDR) {
		msg("Ledger %s is %lld bytes long, shorter than its %u-byte header.", path,
		    (long long)st.st_size, LEDGER_HDR);
		return -1;
	}
	l->map_len = (size_t)st.st_size;
	l->map = mmap(NULL, l->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
	if (l->map == MAP_FAILED) {
		l->map = NULL;
		msg("Cannot map ledger %s (%zu bytes): %s.", path, l->map_len, strerror(errno));
		return -1;
	}
	if (ledger_hdr_check(l) < 0)
		goto fail;
	l->reserved = le_get64(l->map + RESERVED_OFF);
	l->recs = l->map + LEDGER_HDR;
	body = l->map_len - LEDGER_HDR;
	l->nrecs = body / LEDGER_REC;
	l->trunc_bytes = (unsigned)(body % LEDGER_REC);
	if (l->trunc_bytes)
		msg("warning: ledger %s ends with a torn %u-byte record (its writer was probably "
		    "killed mid-write); ignoring it.",
		    path, l->trunc_bytes);
	if (ledger_scan(l) < 0)
		goto fail;
	return 0;
fail:
	ledger_unmap(l);
	return -1;
}

static int ledger_load(struct ledger *l, const char *path)
{
	int fd, ret;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		msg("Cannot open ledger %s: %s.", path, strerror(errno));
		return -1;
	}
	ret = ledger_map(l, fd, path);
	close(fd);
	return ret;
}

/* Appends to a ledger. Records are buffered and written in batches with pwrite at the end. */
struct ledger_out {
	const char *path;
	int fd;
	uint64_t off;
	uint64_t reserved;
	uint8_t *buf;
	size_t n, cap; /* records pending, capacity in records */
	bool failed;
};

static int lout_write_hdr(struct ledger_out *o)
{
	uint8_t h[LEDGER_HDR];

	ledger_hdr_encode(h, o->reserved);
	if (pwrite_all(o->fd, h, sizeof(h), 0) < 0) {
		msg("Cannot write the header of ledger %s: %s.", o->path, strerror(errno));
		return -1;
	}
	return 0;
}

/* Adopts what an existing ledger holds: append after its last whole record and continue above
 * every generation it ever reserved. A torn last record is cut off so the records stay aligned. */
static int lout_adopt(struct ledger_out *o, uint64_t *next_gen)
{
	struct ledger l;
	int ret = -1;

	if (ledger_map(&l, o->fd, o->path) < 0)
		return -1;
	o->off = LEDGER_HDR + l.nrecs * LEDGER_REC;
	o->reserved = l.reserved;
	*next_gen = (l.max_gen > l.reserved ? l.max_gen : l.reserved) + 1;
	if (l.trunc_bytes && ftruncate(o->fd, (off_t)o->off) < 0) {
		msg("Cannot cut the torn record off ledger %s: %s.", o->path, strerror(errno));
		goto out;
	}
	msg("Appending to ledger %s after its %" PRIu64 " records; generations continue at %" PRIu64
	    ".",
	    o->path, l.nrecs, *next_gen);
	ret = 0;
out:
	ledger_unmap(&l);
	return ret;
}

static int lout_open(struct ledger_out *o, const char *path, uint64_t *next_gen)
{
	struct stat st;

	memset(o, 0, sizeof(*o));
	o->path = path;
	o->cap = 8192;
	o->buf = malloc(o->cap * LEDGER_REC);
	o->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (!o->buf || o->fd < 0) {
		msg("Cannot open ledger %s for writing: %s.", path, strerror(errno));
		return -1;
	}
	/* Two writers appending to one ledger would reuse each other's generations. */
	if (flock(o->fd, LOCK_EX | LOCK_NB) < 0) {
		msg("Cannot lock ledger %s (%s): is another hak-ledger writing to it?", path,
		    strerror(errno));
		return -1;
	}
	if (fstat(o->fd, &st) < 0) {
		msg("Cannot stat ledger %s: %s.", path, strerror(errno));
		return -1;
	}
	if (st.st_size > 0)
		return lout_adopt(o, next_gen);
	*next_gen = 1;
	o->off = LEDGER_HDR;
	return lout_write_hdr(o);
}

static void lout_add(struct ledger_out *o, uint64_t block, uint64_t gen)
{
	uint8_t *p;

	if (o->n == o->cap) {
		/* Called from a completion callback, which cannot fail: on ENOMEM the caller
		 * finds o->failed set and stops the run. */
		p = realloc(o->buf, o->cap * 2 * LEDGER_REC);
		if (!p) {
			o->failed = true;
			return;
		}
		o->buf = p;
		o->cap *= 2;
	}
	p = o->buf + o->n * LEDGER_REC;
	le_put64(p, block);
	le_put64(p + 8, gen);
	o->n++;
}

static int lout_sync(struct ledger_out *o)
{
	if (o->failed) {
		msg("Ran out of memory buffering records for ledger %s.", o->path);
		return -1;
	}
	if (o->n == 0)
		return 0;
	if (pwrite_all(o->fd, o->buf, o->n * LEDGER_REC, o->off) < 0) {
		msg("Cannot append %zu records to ledger %s at offset %" PRIu64 ": %s.", o->n,
		    o->path, o->off, strerror(errno));
		o->failed = true;
		return -1;
	}
	o->off += o->n * LEDGER_REC;
	o->n = 0;
	return 0;
}

/* Makes every generation up to gen safe to issue (see the reserved generation above). */
static int lout_reserve(struct ledger_out *o, uint64_t gen)
{
	uint8_t v[8];

	if (gen <= o->reserved)
		return 0;
	le_put64(v, gen + RESERVE_STEP);
	if (pwrite_all(o->fd, v, sizeof(v), RESERVED_OFF) < 0) {
		msg("Cannot update the reserved generation of ledger %s: %s.", o->path,
		    strerror(errno));
		o->failed = true;
		return -1;
	}
	o->reserved = gen + RESERVE_STEP;
	return 0;
}

static int lout_close(struct ledger_out *o)
{
	int ret = 0;

	if (o->fd >= 0) {
		if (lout_sync(o) < 0)
			ret = -1;
		if (fdatasync(o->fd) < 0 || close(o->fd) < 0) {
			msg("Cannot flush ledger %s to disk: %s.", o->path, strerror(errno));
			ret = -1;
		}
	}
	o->fd = -1;
	free(o->buf);
	o->buf = NULL;
	return ret;
}

/* ---- dense per-block table over a ledger's block span ------------------------------------- */

struct span {
	uint64_t first, count;
};

static int span_check(struct span *s, uint64_t min_block, uint64_t max_block, const char *what)
{
	s->first = min_block;
	s->count = max_block - min_block + 1;
	if (s->count > MAX_SPAN) {
		msg("%s spans %" PRIu64 " blocks (%" PRIu64 "..%" PRIu64
		    "), more than the %llu this tool tables.",
		    what, s->count, min_block, max_block, MAX_SPAN);
		return -1;
	}
	return 0;
}

/* expect[b - span.first] = highest acknowledged generation of block b, 0 when not ledgered. */
static uint64_t *expect_build(const struct ledger *l, struct span *s, uint64_t *distinct)
{
	uint64_t *e, i;

	*distinct = 0;
	if (span_check(s, l->min_block, l->max_block, l->path) < 0)
		return NULL;
	e = calloc(s->count, sizeof(*e));
	if (!e) {
		msg("Cannot allocate the %" PRIu64 "-block table for ledger %s.", s->count,
		    l->path);
		return NULL;
	}
	for (i = 0; i < l->nrecs; i++) {
		uint64_t *p = &e[rec_block(l, i) - s->first], g = rec_gen(l, i);

		if (*p == 0)
			(*distinct)++;
		if (g > *p)
			*p = g;
	}
	return e;
}

/* ---- write ---------------------------------------------------------------------------------- */

struct wopts {
	const char *uri, *ledger;
	double seconds;
	uint64_t max_writes, qd, blocks, region_off, seed, flush_every, writer;
	bool seconds_set, seed_set;
};

struct storm;

struct slot {
	struct storm *st;
	uint8_t *buf;
	uint64_t rel; /* block index relative to the region */
	uint64_t gen;
	bool busy;
};

struct storm {
	const struct wopts *o;
	struct nbd_handle *h;
	struct ledger_out out;
	struct slot *slots;
	unsigned *free_slots, nfree, qd, inflight;
	uint8_t *block_busy; /* per region block: a write to it is in flight */
	uint64_t first, nblocks;
	uint64_t rng, next_gen, last_acked_gen;
	uint64_t issued, acked, failed, abandoned, since_flush;
	bool flush_inflight, can_flush, stopping, dead, closing;
	const char *reason;
	double stop_at;
};

static void storm_stop(struct storm *st, const char *reason)
{
	if (st->stopping)
		return;
	st->stopping = true;
	st->reason = reason;
	st->stop_at = clock_mono();
}

static bool err_is_disconnect(int e)
{
	return e == ENOTCONN || e == ECONNRESET || e == EPIPE || e == ESHUTDOWN ||
	       e == ECONNABORTED;
}

/* Completion callback: runs under libnbd's lock, so it only updates state and never calls nbd_*.
 * The ledger gets the record here, at the only point the write is known to be acknowledged. */
static int write_done(void *user, int *error)
{
	struct slot *s = user;
	struct storm *st = s->st;

	if (st->closing || !s->busy)
		return 1;
	s->busy = false;
	st->block_busy[s->rel] = 0;
	st->free_slots[st->nfree++] = (unsigned)(s - st->slots);
	st->inflight--;
	if (*error) {
		st->failed++;
		if (err_is_disconnect(*error)) {
			storm_stop(st, "server disconnected");
		} else {
			msg("The write of block %" PRIu64 " generation %" PRIu64 " failed: %s.",
			    st->first + s->rel, s->gen, strerror(*error));
			storm_stop(st, "write error");
		}
		return 1;
	}
	st->acked++;
	st->since_flush++;
	if (s->gen > st->last_acked_gen)
		st->last_acked_gen = s->gen;
	lout_add(&st->out, st->first + s->rel, s->gen);
	return 1;
}

static int flush_done(void *user, int *error)
{
	struct storm *st = user;

	if (st->closing)
		return 1;
	st->flush_inflight = false;
	if (*error) {
		if (!err_is_disconnect(*error))
			msg("A flush failed: %s.", strerror(*error));
		storm_stop(st, err_is_disconnect(*error) ? "server disconnected" : "flush error");
	}
	return 1;
}

/* A random block with no write in flight; one exists because inflight < min(qd, nblocks). */
static uint64_t storm_pick(struct storm *st)
{
	uint64_t b = 0;
	int i;

	for (i = 0; i < 64; i++) {
		b = rng_next(&st->rng) % st->nblocks;
		if (!st->block_busy[b])
			return b;
	}
	while (st->block_busy[b])
		b = (b + 1) % st->nblocks;
	return b;
}

static void storm_issue(struct storm *st)
{
	struct slot *s;
	nbd_completion_callback cb = {.callback = write_done};
	int64_t r;

	if (lout_reserve(&st->out, st->next_gen) < 0) {
		storm_stop(st, "ledger write error");
		return;
	}
	s = &st->slots[st->free_slots[--st->nfree]];
	s->rel = storm_pick(st);
	s->gen = st->next_gen++;
	block_fill(s->buf, st->first + s->rel, s->gen, (uint32_t)st->o->writer, &st->rng);
	s->busy = true;
	st->block_busy[s->rel] = 1;
	st->inflight++;
	cb.user_data = s;
	r = nbd_aio_pwrite(st->h, s->buf, BLOCK_SIZE, (st->first + s->rel) * BLOCK_SIZE, cb, 0);
	if (r >= 0) {
		st->issued++;
		return;
	}
	/* Never sent: no record, no failure count, but its generation stays used. */
	if (s->busy) {
		s->busy = false;
		st->block_busy[s->rel] = 0;
		st->free_slots[st->nfree++] = (unsigned)(s - st->slots);
		st->inflight--;
	}
	if (nbd_aio_is_dead(st->h) || nbd_aio_is_closed(st->h) ||
	    err_is_disconnect(nbd_get_errno())) {
		st->dead = true;
		storm_stop(st, "server disconnected");
	} else {
		msg("Cannot issue a write: %s.", nbd_get_error());
		storm_stop(st, "write error");
	}
}

static void storm_fill(struct storm *st)
{
	nbd_completion_callback cb = {.callback = flush_done, .user_data = st};

	while (!st->stopping && st->nfree > 0) {
		if (st->o->max_writes && st->issued >= st->o->max_writes) {
			if (st->inflight == 0)
				storm_stop(st, "max writes reached");
			return;
		}
		storm_issue(st);
	}
	if (!st->stopping && st->can_flush && st->o->flush_every && !st->flush_inflight &&
	    st->since_flush >= st->o->flush_every) {
		st->since_flush = 0;
		st->flush_inflight = true;
		if (nbd_aio_flush(st->h, cb, 0) < 0) {
			st->flush_inflight = false;
			msg("Cannot issue a flush: %s.", nbd_get_error());
			storm_stop(st, "flush error");
		}
	}
}

/* One round of the event loop: wait up to timeout_ms for the socket, then let libnbd run. */
static void storm_poll(struct storm *st, int timeout_ms)
{
	struct pollfd p = {.fd = nbd_aio_get_fd(st->h)};
	unsigned dir;
	int r = 0;

	if (p.fd < 0) {
		st->dead = true;
		storm_stop(st, "server disconnected");
		return;
	}
	dir = nbd_aio_get_direction(st->h);
	if (dir & LIBNBD_AIO_DIRECTION_READ)
		p.events |= POLLIN;
	if (dir & LIBNBD_AIO_DIRECTION_WRITE)
		p.events |= POLLOUT;
	if (poll(&p, 1, timeout_ms) <= 0)
		return; /* timeout, or EINTR from a stop signal that the loop checks next */
	if (p.revents & (POLLIN | POLLHUP))
		r = nbd_aio_notify_read(st->h);
	else if (p.revents & POLLOUT)
		r = nbd_aio_notify_write(st->h);
	else if (p.revents & (POLLERR | POLLNVAL))
		st->dead = true;
	if (r < 0 && !err_is_disconnect(nbd_get_errno()))
		msg("The connection failed: %s.", nbd_get_error());
	if (r < 0 || nbd_aio_is_dead(st->h) || nbd_aio_is_closed(st->h))
		st->dead = true;
	if (st->dead)
		storm_stop(st, "server disconnected");
}

static int ms_until(double t, double now)
{
	double ms = (t - now) * 1000.0;

	if (ms <= 0)
		return 0;
	return ms > LEDGER_SYNC_MS ? LEDGER_SYNC_MS : (int)ms + 1;
}

/* Runs the storm until a stop; then drains in-flight writes for at most DRAIN_SECONDS. */
static int storm_run(struct storm *st, double seconds)
{
	double start = clock_mono(), deadline = start + seconds, synced = start, now;

	for (;;) {
		now = clock_mono();
		if (got_signal)
			storm_stop(st, got_signal == SIGINT ? "SIGINT" : "SIGTERM");
		if (now >= deadline)
			storm_stop(st, "time limit");
		storm_fill(st);
		if (now - synced >= LEDGER_SYNC_MS / 1000.0 || st->out.n >= 4096) {
			if (lout_sync(&st->out) < 0)
				return -1;
			synced = now;
		}
		if (st->dead || (st->stopping && st->inflight == 0 && !st->flush_inflight))
			break;
		if (st->stopping && now - st->stop_at >= DRAIN_SECONDS) {
			msg("%u writes were still in flight %.0f s after the stop; counting them "
			    "as "
			    "failed.",
			    st->inflight, DRAIN_SECONDS);
			break;
		}
		storm_poll(st, st->stopping ? ms_until(st->stop_at + DRAIN_SECONDS, now)
		                            : ms_until(deadline, now));
	}
	return 0;
}

/* A bounded polite goodbye: a hung server must not hang the tool. */
static void storm_disconnect(struct storm *st)
{
	double end = clock_mono() + 1.0;

	if (st->dead || st->inflight > 0 || st->flush_inflight)
		return;
	if (nbd_aio_disconnect(st->h, 0) < 0)
		return;
	while (clock_mono() < end && !nbd_aio_is_closed(st->h) && !nbd_aio_is_dead(st->h))
		storm_poll(st, 100);
}

static int storm_setup(struct storm *st, const struct wopts *o)
{
	int64_t size;
	unsigned i;

	size = nbd_get_size(st->h);
	if (size < 0 || nbd_is_read_only(st->h) > 0) {
		msg("The export at %s is %s.", o->uri,
		    size < 0 ? nbd_get_error() : "read-only; cannot write to it");
		return -1;
	}
	if (o->region_off % BLOCK_SIZE || o->region_off + BLOCK_SIZE > (uint64_t)size) {
		msg("--region-offset %" PRIu64 " must be a multiple of %u inside the %" PRId64
		    "-byte export.",
		    o->region_off, BLOCK_SIZE, size);
		return -1;
	}
	st->first = o->region_off / BLOCK_SIZE;
	st->nblocks = ((uint64_t)size - o->region_off) / BLOCK_SIZE;
	if (o->blocks) {
		if (o->blocks > st->nblocks) {
			msg("--blocks %" PRIu64 " does not fit: the export has %" PRIu64
			    " blocks after --region-offset %" PRIu64 ".",
			    o->blocks, st->nblocks, o->region_off);
			return -1;
		}
		st->nblocks = o->blocks;
	}
	st->qd = (unsigned)(o->qd < st->nblocks ? o->qd : st->nblocks);
	st->slots = calloc(st->qd, sizeof(*st->slots));
	st->free_slots = calloc(st->qd, sizeof(*st->free_slots));
	st->block_busy = calloc(st->nblocks, 1);
	if (!st->slots || !st->free_slots || !st->block_busy)
		return -1;
	for (i = 0; i < st->qd; i++) {
		st->slots[i].st = st;
		if (posix_memalign((void **)&st->slots[i].buf, BLOCK_SIZE, BLOCK_SIZE))
			return -1;
		st->free_slots[st->nfree++] = st->qd - 1 - i;
	}
	st->can_flush = nbd_can_flush(st->h) > 0;
	if (o->flush_every && !st->can_flush)
		msg("warning: the server does not support flush; ignoring --flush-every.");
	return 0;
}

static void storm_free(struct storm *st)
{
	unsigned i;

	st->closing = true;
	if (st->h)
		nbd_close(st->h);
	for (i = 0; st->slots && i < st->qd; i++)
		free(st->slots[i].buf);
	free(st->slots);
	free(st->free_slots);
	free(st->block_busy);
}

static void storm_report(const struct storm *st, double secs)
{
	msg("%" PRIu64 " writes issued in %.1f s before the stop: %.0f acknowledged writes/s at "
	    "queue depth %u.",
	    st->issued, secs, secs > 0 ? (double)st->acked / secs : 0.0, st->qd);
	printf("ledger: %" PRIu64 " writes acknowledged, %" PRIu64
	       " failed, last generation %" PRIu64 ", stopped: %s\n",
	       st->acked, st->failed, st->last_acked_gen, st->reason ? st->reason : "?");
	fflush(stdout);
}

static int write_run(const struct wopts *o)
{
	struct storm st = {.o = o, .out = {.fd = -1}};
	double t0;
	int ret = 1;

	st.rng = o->seed;
	if (lout_open(&st.out, o->ledger, &st.next_gen) < 0)
		goto out;
	st.h = nbd_create();
	if (!st.h || nbd_connect_uri(st.h, o->uri) < 0) {
		msg("Cannot connect to %s: %s.", o->uri, nbd_get_error());
		goto out;
	}
	if (storm_setup(&st, o) < 0)
		goto out;
	msg("Writer %" PRIu64 " storms blocks %" PRIu64 "..%" PRIu64 " of %s at queue depth %u, "
	    "seed %" PRIu64 ", first generation %" PRIu64 ".",
	    o->writer, st.first, st.first + st.nblocks - 1, o->uri, st.qd, o->seed, st.next_gen);
	t0 = clock_mono();
	if (storm_run(&st, o->seconds) < 0)
		goto out;
	st.abandoned = st.inflight;
	st.failed += st.abandoned;
	storm_disconnect(&st);
	st.closing = true;
	if (lout_close(&st.out) < 0)
		goto out;
	storm_report(&st, (st.stopping ? st.stop_at : clock_mono()) - t0);
	ret = 0;
out:
	storm_free(&st);
	if (st.out.fd >= 0)
		lout_close(&st.out);
	free(st.out.buf);
	return ret;
}

static void on_signal(int sig)
{
	got_signal = sig;
}

static void install_signals(void)
{
	struct sigaction sa = {.sa_handler = on_signal};

	/* No SA_RESTART: the signal must cut poll() short so the stop is prompt. */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

static void usage(void)
{
	fputs(
	    "usage:\n"
	    "  hak-ledger write  --uri URI --ledger FILE [--seconds S] [--max-writes N] [--qd 16]\n"
	    "                    [--blocks N] [--region-offset BYTES] [--seed SEED]\n"
	    "                    [--flush-every N] [--writer-id ID]\n"
	    "  hak-ledger verify --ledger FILE (--uri URI | --file PATH) [--json]\n"
	    "  hak-ledger stats  --ledger FILE [--json]\n"
	    "  hak-ledger merge  --ledger OUT IN1 [IN2 ...]\n",
	    stderr);
}

static int bad_number(const char *opt, const char *val)
{
	msg("Option --%s needs a non-negative number, not \"%s\".", opt, val);
	return -1;
}

static int write_opt(struct wopts *o, const char *name, const char *val)
{
	uint64_t *dst = NULL;
	char *end;

	if (!strcmp(name, "uri"))
		o->uri = val;
	else if (!strcmp(name, "ledger"))
		o->ledger = val;
	else if (!strcmp(name, "seconds")) {
		o->seconds = strtod(val, &end);
		if (*end || end == val || !(o->seconds > 0 && o->seconds < 1e7)) {
			msg("Option --seconds needs a positive number of seconds, not \"%s\".",
			    val);
			return -1;
		}
		o->seconds_set = true;
	} else if (!strcmp(name, "region-offset")) {
		if (parse_u64(val, &o->region_off, true) < 0)
			return bad_number(name, val);
	} else {
		dst = !strcmp(name, "max-writes")    ? &o->max_writes
		      : !strcmp(name, "qd")          ? &o->qd
		      : !strcmp(name, "blocks")      ? &o->blocks
		      : !strcmp(name, "seed")        ? &o->seed
		      : !strcmp(name, "flush-every") ? &o->flush_every
		                                     : &o->writer;
		if (parse_u64(val, dst, false) < 0)
			return bad_number(name, val);
		o->seed_set |= dst == &o->seed;
	}
	return 0;
}

static int cmd_write(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"uri", 1, 0, 0},           {"ledger", 1, 0, 0}, {"seconds", 1, 0, 0},
	    {"max-writes", 1, 0, 0},    {"qd", 1, 0, 0},     {"blocks", 1, 0, 0},
	    {"region-offset", 1, 0, 0}, {"seed", 1, 0, 0},   {"flush-every", 1, 0, 0},
	    {"writer-id", 1, 0, 0},     {0, 0, 0, 0},
	};
	struct wopts o = {.qd = 16, .writer = 1};
	int c, idx;

	while ((c = getopt_long(argc, argv, "", lo, &idx)) == 0) {
		if (write_opt(&o, lo[idx].name, optarg) < 0)
			return 1;
	}
	if (c != -1 || optind != argc || !o.uri || !o.ledger || o.qd == 0 || o.qd > MAX_QD ||
	    o.writer > UINT32_MAX) {
		msg("write needs --uri and --ledger; --qd must be 1..%u and --writer-id 32-bit.",
		    MAX_QD);
		usage();
		return 1;
	}
	if (!o.seconds_set)
		o.seconds = o.max_writes ? 1e7 : 10.0;
	if (!o.seed_set)
		o.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	install_signals();
	return write_run(&o);
}

/* ---- verify ------------------------------------------------------------------------------- */

struct source {
	struct nbd_handle *h;
	int fd;
	uint64_t size;
	size_t chunk;
	const char *name;
};

static int source_open(struct source *s, const char *uri, const char *file)
{
	int64_t sz, max;

	s->fd = -1;
	s->chunk = VERIFY_CHUNK;
	s->name = uri ? uri : file;
	if (file) {
		s->fd = open(file, O_RDONLY | O_CLOEXEC);
		if (s->fd < 0 || (sz = lseek(s->fd, 0, SEEK_END)) < 0) {
			msg("Cannot open %s to verify it: %s.", file, strerror(errno));
			return -1;
		}
		s->size = (uint64_t)sz;
		return 0;
	}
	s->h = nbd_create();
	if (!s->h || nbd_connect_uri(s->h, uri) < 0 || (sz = nbd_get_size(s->h)) < 0) {
		msg("Cannot connect to %s: %s.", uri, nbd_get_error());
		return -1;
	}
	s->size = (uint64_t)sz;
	max = nbd_get_block_size(s->h, LIBNBD_SIZE_MAXIMUM);
	if (max >= BLOCK_SIZE && (uint64_t)max < s->chunk)
		s->chunk = (size_t)max / BLOCK_SIZE * BLOCK_SIZE;
	return 0;
}

static int source_read(struct source *s, void *buf, size_t len, uint64_t off)
{
	if (s->fd >= 0) {
		if (pread_all(s->fd, buf, len, off) < 0) {
			msg("Cannot read %zu bytes at offset %" PRIu64 " of %s: %s.", len, off,
			    s->name, strerror(errno));
			return -1;
		}
		return 0;
	}
	if (nbd_pread(s->h, buf, len, off, 0) < 0) {
		msg("Cannot read %zu bytes at offset %" PRIu64 " of %s: %s.", len, off, s->name,
		    nbd_get_error());
		return -1;
	}
	return 0;
}

static void source_close(struct source *s)
{
	if (s->h) {
		nbd_shutdown(s->h, 0);
		nbd_close(s->h);
	}
	if (s->fd >= 0)
		close(s->fd);
}

struct vresult {
	uint64_t count[3];
	FILE *ex; /* where example lines go */
};

static void verify_one(struct vresult *vr, const uint8_t *buf, uint64_t block, uint64_t want)
{
	uint64_t found;
	const char *why;
	enum verdict v = block_check(buf, block, want, &found, &why);

	if (v != V_OK && vr->count[v] < MAX_EXAMPLES) {
		if (memcmp(buf, BLOCK_MAGIC, 8) == 0)
			fprintf(vr->ex,
			        "%s: block %" PRIu64 " expected generation %" PRIu64
			        ", found generation %" PRIu64 " (%s)\n",
			        verdict_name[v], block, want, found, why);
		else
			fprintf(vr->ex,
			        "%s: block %" PRIu64 " expected generation %" PRIu64
			        ", found none (%s)\n",
			        verdict_name[v], block, want, why);
	}
	vr->count[v]++;
}

/* Reads the span in chunks, skipping chunks that hold no ledgered block. */
static int verify_span(struct source *src, const uint64_t *exp, const struct span *sp,
                       struct vresult *vr)
{
	uint64_t per = src->chunk / BLOCK_SIZE, c, i, n;
	uint8_t *buf = NULL;
	int ret = -1;

	if (posix_memalign((void **)&buf, BLOCK_SIZE, src->chunk))
		goto out;
	for (c = 0; c < sp->count; c += per) {
		n = sp->count - c < per ? sp->count - c : per;
		for (i = 0; i < n && !exp[c + i]; i++)
			;
		if (i == n)
			continue;
		if (source_read(src, buf, n * BLOCK_SIZE, (sp->first + c) * BLOCK_SIZE) < 0)
			goto out;
		for (i = 0; i < n; i++) {
			if (exp[c + i])
				verify_one(vr, buf + i * BLOCK_SIZE, sp->first + c + i, exp[c + i]);
		}
	}
	ret = 0;
out:
	free(buf);
	return ret;
}

static void verify_print(const struct vresult *vr, uint64_t checked, bool json)
{
	if (json)
		printf("{\"blocks\": %" PRIu64 ", \"ok\": %" PRIu64 ", \"missing\": %" PRIu64
		       ", \"corrupt\": %" PRIu64 "}\n",
		       checked, vr->count[V_OK], vr->count[V_MISSING], vr->count[V_CORRUPT]);
	else
		printf("verify: %" PRIu64 " blocks checked, %" PRIu64 " ok, %" PRIu64
		       " missing, %" PRIu64 " corrupt\n",
		       checked, vr->count[V_OK], vr->count[V_MISSING], vr->count[V_CORRUPT]);
}

static int verify_run(const char *ledger, const char *uri, const char *file, bool json)
{
	struct ledger l = {0};
	struct source src = {.fd = -1};
	struct vresult vr = {.ex = json ? stderr : stdout};
	struct span sp = {0};
	uint64_t *exp = NULL, distinct = 0;
	int ret = 1;

	if (ledger_load(&l, ledger) < 0 || source_open(&src, uri, file) < 0)
		goto out;
	if (l.nrecs == 0) {
		msg("warning: ledger %s holds no records; there is nothing to verify.", ledger);
	} else {
		exp = expect_build(&l, &sp, &distinct);
		if (!exp)
			goto out;
		if ((sp.first + sp.count) * BLOCK_SIZE > src.size) {
			msg("Ledger %s names block %" PRIu64 ", beyond the end of %s (%" PRIu64
			    " bytes): wrong device?",
			    ledger, l.max_block, src.name, src.size);
			goto out;
		}
		if (verify_span(&src, exp, &sp, &vr) < 0)
			goto out;
	}
	verify_print(&vr, distinct, json);
	ret = vr.count[V_MISSING] || vr.count[V_CORRUPT] ? 2 : 0;
out:
	free(exp);
	source_close(&src);
	ledger_unmap(&l);
	return ret;
}

static int cmd_verify(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"ledger", 1, 0, 'l'}, {"uri", 1, 0, 'u'}, {"file", 1, 0, 'f'},
	    {"json", 0, 0, 'j'},   {0, 0, 0, 0},
	};
	const char *ledger = NULL, *uri = NULL, *file = NULL;
	bool json = false;
	int c;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (c == 'l')
			ledger = optarg;
		else if (c == 'u')
			uri = optarg;
		else if (c == 'f')
			file = optarg;
		else if (c == 'j')
			json = true;
		else
			goto usage;
	}
	if (optind != argc || !ledger || !uri == !file)
		goto usage;
	return verify_run(ledger, uri, file, json);
usage:
	msg("verify needs --ledger and exactly one of --uri and --file.");
	usage();
	return 1;
}

/* ---- stats and merge ---------------------------------------------------------------------- */

static int cmd_stats(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"ledger", 1, 0, 'l'}, {"json", 0, 0, 'j'}, {0, 0, 0, 0}};
	const char *path = NULL;
	struct ledger l = {0};
	struct span sp = {0};
	uint64_t *exp = NULL, distinct = 0;
	bool json = false;
	int c, ret = 1;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (c == 'l')
			path = optarg;
		else if (c == 'j')
			json = true;
		else
			break;
	}
	if (c != -1 || optind != argc || !path) {
		msg("stats needs --ledger.");
		usage();
		return 1;
	}
	if (ledger_load(&l, path) < 0)
		goto out;
	if (l.nrecs && !(exp = expect_build(&l, &sp, &distinct)))
		goto out;
	if (json)
		printf("{\"records\": %" PRIu64 ", \"blocks\": %" PRIu64
		       ", \"max_generation\": %" PRIu64 ", \"reserved_generation\": %" PRIu64
		       ", \"torn_bytes\": %u}\n",
		       l.nrecs, distinct, l.max_gen, l.reserved, l.trunc_bytes);
	else
		printf("stats: %" PRIu64 " records, %" PRIu64
		       " distinct blocks, max generation %" PRIu64 "\n",
		       l.nrecs, distinct, l.max_gen);
	ret = 0;
out:
	free(exp);
	ledger_unmap(&l);
	return ret;
}

struct mtable {
	struct span sp;
	uint64_t *before; /* highest generation of the block in earlier inputs */
	uint64_t *upto;   /* highest generation so far, this input included */
	uint32_t *input;  /* input that last touched the block, +1 */
};

/* Inputs are merged in the order they were written, so a block's generations must grow from
 * one input to the next. Ledgers written by separate fresh runs restart at generation 1 and
 * fail this; verify would then judge new data by an old, higher generation. */
static int merge_check(struct ledger *in, int n, struct mtable *t)
{
	uint64_t lo = UINT64_MAX, hi = 0, i, k;
	int j;

	for (j = 0; j < n; j++) {
		if (in[j].nrecs == 0)
			continue;
		lo = in[j].min_block < lo ? in[j].min_block : lo;
		hi = in[j].max_block > hi ? in[j].max_block : hi;
	}
	if (lo > hi)
		return 0; /* only empty inputs */
	if (span_check(&t->sp, lo, hi, "The merged ledger") < 0)
		return -1;
	t->before = calloc(t->sp.count, sizeof(*t->before));
	t->upto = calloc(t->sp.count, sizeof(*t->upto));
	t->input = calloc(t->sp.count, sizeof(*t->input));
	if (!t->before || !t->upto || !t->input)
		return -1;
	for (j = 0; j < n; j++) {
		for (i = 0; i < in[j].nrecs; i++) {
			uint64_t g = rec_gen(&in[j], i);

			k = rec_block(&in[j], i) - t->sp.first;
			if (t->input[k] != (uint32_t)j + 1) {
				t->before[k] = t->upto[k];
				t->input[k] = (uint32_t)j + 1;
			}
			if (g <= t->before[k]) {
				msg("Cannot merge: block %" PRIu64 " has generation %" PRIu64
				    " in %s but already reached %" PRIu64 " in an earlier input. "
				    "Give the inputs in the order they were written, and let all "
				    "runs append to one ledger so generations keep growing.",
				    t->sp.first + k, g, in[j].path, t->before[k]);
				return -1;
			}
			t->upto[k] = g > t->upto[k] ? g : t->upto[k];
		}
	}
	return 0;
}

static int merge_write(const char *out, struct ledger *in, int n)
{
	char tmp[PATH_MAX];
	uint8_t h[LEDGER_HDR];
	uint64_t off = LEDGER_HDR, reserved = 0;
	int fd, j, ret = -1;

	for (j = 0; j < n; j++)
		reserved = in[j].reserved > reserved ? in[j].reserved : reserved;
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", out, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		msg("Cannot create %s: %s.", tmp, strerror(errno));
		return -1;
	}
	ledger_hdr_encode(h, reserved);
	if (pwrite_all(fd, h, sizeof(h), 0) < 0)
		goto out;
	for (j = 0; j < n; j++) {
		if (pwrite_all(fd, in[j].recs, in[j].nrecs * LEDGER_REC, off) < 0)
			goto out;
		off += in[j].nrecs * LEDGER_REC;
	}
	if (fsync(fd) < 0 || rename(tmp, out) < 0)
		goto out;
	printf("merge: %d ledgers, %" PRIu64 " records into %s\n", n,
	       (off - LEDGER_HDR) / LEDGER_REC, out);
	ret = 0;
out:
	if (ret < 0) {
		msg("Cannot write merged ledger %s: %s.", out, strerror(errno));
		unlink(tmp);
	}
	close(fd);
	return ret;
}

static int cmd_merge(int argc, char **argv)
{
	static const struct option lo[] = {{"ledger", 1, 0, 'l'}, {0, 0, 0, 0}};
	const char *out = NULL;
	struct ledger *in = NULL;
	struct mtable t = {0};
	int c, j, n, ret = 1;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) == 'l')
		out = optarg;
	n = argc - optind;
	if (c != -1 || !out || n < 1) {
		msg("merge needs --ledger OUT and at least one input ledger.");
		usage();
		return 1;
	}
	in = calloc((size_t)n, sizeof(*in));
	if (!in)
		goto out;
	for (j = 0; j < n; j++) {
		if (ledger_load(&in[j], argv[optind + j]) < 0)
			goto out;
	}
	if (merge_check(in, n, &t) < 0 || merge_write(out, in, n) < 0)
		goto out;
	ret = 0;
out:
	for (j = 0; in && j < n; j++)
		ledger_unmap(&in[j]);
	free(in);
	free(t.before);
	free(t.upto);
	free(t.input);
	return ret;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2) {
		usage();
		return 1;
	}
	if (!strcmp(argv[1], "write"))
		return cmd_write(argc - 1, argv + 1);
	if (!strcmp(argv[1], "verify"))
		return cmd_verify(argc - 1, argv + 1);
	if (!strcmp(argv[1], "stats"))
		return cmd_stats(argc - 1, argv + 1);
	if (!strcmp(argv[1], "merge"))
		return cmd_merge(argc - 1, argv + 1);
	if (strcmp(argv[1], "--help") && strcmp(argv[1], "-h"))
		msg("Unknown mode \"%s\".", argv[1]);
	usage();
	return 1;
}
