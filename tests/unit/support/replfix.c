/* SPDX-License-Identifier: MIT */
#include "replfix.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "io/io.h"
#include "lib/buf.h"
#include "lib/crc32c.h"
#include "lib/endian.h"
#include "meta/bitmap.h"
#include "meta/gen.h"
#include "meta/meta.h"

static struct replfix fix;
/* struct hak_node_cfg has char * fields */
static char self_name[] = RF_SELF, self_addr[] = RF_SELF_ADDR;
static char peer_name[] = RF_PEER, peer_addr[] = RF_PEER_ADDR;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- log capture ----------------------------------------------------------------------------
 * log.c writes to the stdio stream stderr; glibc lets a program point it elsewhere: to a stream
 * that keeps a copy for rf_log_has() and passes every byte on to file descriptor 2 at once, so
 * the log of a test that fails (Check ends it with _exit) is not lost. */

static ssize_t log_write(void *cookie, const char *buf, size_t n)
{
	struct replfix *f = cookie;
	if (f->log_len + n + 1 > f->log_cap) {
		size_t cap = f->log_cap ? f->log_cap : 4096;
		while (cap < f->log_len + n + 1)
			cap *= 2;
		char *b = realloc(f->log_buf, cap);
		if (!b)
			abort();
		f->log_buf = b;
		f->log_cap = cap;
	}
	memcpy(f->log_buf + f->log_len, buf, n);
	f->log_len += n;
	f->log_buf[f->log_len] = '\0';
	for (size_t done = 0; done < n;) {
		ssize_t w = write(STDERR_FILENO, buf + done, n - done);
		if (w <= 0)
			break;
		done += (size_t)w;
	}
	return (ssize_t)n;
}

static void log_start(struct replfix *f)
{
	cookie_io_functions_t io = {.write = log_write};
	f->log = fopencookie(f, "w", io);
	ck_assert_ptr_nonnull(f->log);
	setvbuf(f->log, NULL, _IONBF, 0);
	f->real_stderr = stderr;
	stderr = f->log;
}

static void log_stop(struct replfix *f)
{
	if (!f->log)
		return;
	stderr = f->real_stderr;
	fclose(f->log);
	f->log = NULL;
	free(f->log_buf);
	f->log_buf = NULL;
	f->log_len = f->log_cap = 0;
}

bool rf_log_has(struct replfix *f, const char *needle)
{
	fflush(f->log);
	return f->log_buf && memmem(f->log_buf, f->log_len, needle, strlen(needle)) != NULL;
}

/* ---- life cycle ------------------------------------------------------------------------------ */

struct replfix *rf_open(const struct rf_opts *o)
{
	static const struct rf_opts none;
	struct replfix *f = &fix;
	char err[1024];

	if (!o)
		o = &none;
	ck_assert_msg(!f->open, "one fixture at a time");
	memset(f, 0, sizeof(*f));
	log_start(f);

	/* The backing store: the data, then the internal metadata. */
	uint64_t md = meta_md_size(RF_SIZE, RF_BLOCK);
	ck_assert_uint_gt(md, 0);
	/* Unlinked at once and reached as /proc/self/fd/N: nothing stays behind, even when a test
	 * ends in the middle (Check's _exit on a failed assertion, a sanitizer's abort). */
	char tmpl[] = "/var/tmp/hak-test-repl-XXXXXX";
	f->fd = mkstemp(tmpl);
	ck_assert_int_ge(f->fd, 0);
	unlink(tmpl);
	snprintf(f->path, sizeof(f->path), "/proc/self/fd/%d", f->fd);
	ck_assert_int_eq(ftruncate(f->fd, (off_t)(RF_SIZE + md)), 0);
	ck_assert_uint_eq(meta_data_size(RF_SIZE + md, RF_BLOCK, true), RF_SIZE);

	/* Both copies start blank, in sync, with one generation. */
	f->gen = 0x5eed0000c0ffee01ull;
	struct meta_create_args a = {.internal = true,
	                             .backing_bytes = RF_SIZE + md,
	                             .bitmap_block_size = RF_BLOCK,
	                             .blank = true,
	                             .blank_gen = f->gen,
	                             .node = RF_SELF};
	memcpy(a.uuid, "hak-unit-test-v1", 16);
	struct meta_sb sb;
	ck_assert_msg(meta_create_ex(f->path, &a, &sb, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(sb.size, RF_SIZE);

	f->cfg = config_new_default();
	ck_assert_ptr_nonnull(f->cfg);
	f->vc = config_add_volume(f->cfg, "r0", f->path);
	ck_assert_ptr_nonnull(f->vc);
	f->vc->meta_internal = true;
	f->vc->bitmap_block_size = RF_BLOCK;
	f->vc->mode = o->mode;
	f->vc->data_integrity = o->integrity;
	if (o->max_epoch)
		f->vc->max_epoch_size = o->max_epoch;
	f->vc->al_extents = o->al ? 64 : 0;
	/* No pings in the records: the tests script every frame of the peer. */
	f->vc->ping_interval = 60;
	f->vc->ping_timeout = 120;
	f->self = (struct hak_node_cfg){.name = self_name, .address = self_addr};
	f->peer = (struct hak_node_cfg){.name = peer_name, .address = peer_addr};

	f->loop = ev_loop_new(EVFLAG_AUTO);
	ck_assert_ptr_nonnull(f->loop);
	ck_assert_int_eq(io_engine_create(f->loop, IO_KIND_AUTO, 64, &f->eng), 0);
	ck_assert_int_eq(volume_open(f->vc, f->eng, &f->vol), 0);
	struct repl_params p = {.loop = f->loop,
	                        .io = f->eng,
	                        .vcfg = f->vc,
	                        .self = &f->self,
	                        .peer = &f->peer,
	                        .vol = f->vol,
	                        .transport = &memtransport};
	ck_assert_msg(repl_create(&p, &f->r, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(volume_size(f->vol), RF_SIZE);
	ck_assert_int_eq(repl_disk_state(f->r), DISK_UPTODATE);
	ck_assert_int_eq(repl_role(f->r), ROLE_SECONDARY);
	ck_assert_uint_eq(bitmap_count(f->r->bm), 0);
	f->open = true;
	return f;
}

void rf_close(void)
{
	struct replfix *f = &fix;
	if (!f->open)
		return;
	f->open = false;
	repl_shutdown(f->r);
	ck_assert_int_eq(io_drain(f->eng, RF_MAX_SECONDS), 0);
	/* Every request was answered exactly once by now (req.c aborts on a second answer). */
	for (struct rf_req *q = f->reqs; q; q = q->next)
		ck_assert_msg(q->answers == 1, "request at %llu answered %d times",
		              (unsigned long long)q->vio.off, q->answers);
	repl_destroy(f->r);
	volume_close(f->vol);
	io_engine_destroy(f->eng);
	memwire_free(&f->data);
	memwire_free(&f->meta);
	while (f->reqs) {
		struct rf_req *q = f->reqs;
		f->reqs = q->next;
		free(q->buf);
		free(q);
	}
	free(f->acked);
	config_free(f->cfg);
	ev_loop_destroy(f->loop);
	close(f->fd);
	buf_trim();
	log_stop(f);
}

/* ---- the handshake --------------------------------------------------------------------------- */

void rf_hello(const struct replfix *f, struct wire_hello *h)
{
	memset(h, 0, sizeof(*h));
	h->version = WIRE_VERSION;
	h->role = WIRE_ROLE_SECONDARY;
	h->disk = WIRE_DISK_UPTODATE;
	h->mode = (uint8_t)f->vc->mode;
	snprintf(h->node, sizeof(h->node), "%s", RF_PEER);
	snprintf(h->volume, sizeof(h->volume), "%s", f->vc->name);
	memcpy(h->uuid, f->r->sb.volume_uuid, 16);
	h->size = f->r->sb.size;
	h->block_size = f->r->sb.bitmap_block_size;
	h->gen_flags = GEN_F_CONSISTENT;
	h->gen[0] = f->gen;
	h->sb_policy = (uint8_t)f->vc->after_sb;
}

void rf_inject_hello(struct memwire *w, const struct wire_hello *h)
{
	uint8_t b[WIRE_HELLO_SIZE];
	wire_hello_encode(b, h);
	ck_assert_int_eq(memwire_inject(w, WIRE_HELLO, 0, b, sizeof(b)), 0);
}

/* hakd's HELLO on stream w: the first frame, naming the stream, this node and the volume. */
static void check_own_hello(struct replfix *f, struct memwire *w, uint8_t stream)
{
	struct wire_hello h;
	char why[256];
	ck_assert_uint_ge(w->n_frames, 1);
	ck_assert_uint_eq(w->frames[0].hdr.type, WIRE_HELLO);
	ck_assert_msg(wire_hello_decode(w->frames[0].payload, w->frames[0].hdr.len, &h, why,
	                                sizeof(why)) == 0,
	              "%s", why);
	ck_assert_uint_eq(h.stream, stream);
	ck_assert_str_eq(h.node, RF_SELF);
	ck_assert_str_eq(h.volume, f->vc->name);
	ck_assert_uint_eq(h.size, RF_SIZE);
	ck_assert_int_eq(memcmp(h.uuid, f->r->sb.volume_uuid, 16), 0);
}

void rf_connect(struct replfix *f, const struct wire_hello *h)
{
	struct tlistener *l = memtransport_listener(RF_SELF_ADDR);
	ck_assert_ptr_nonnull(l);
	memwire_free(&f->data);
	memwire_free(&f->meta);
	memset(&f->data, 0, sizeof(f->data));
	memset(&f->meta, 0, sizeof(f->meta));
	ck_assert_int_eq(memlistener_accept(l, &f->data), 0);
	ck_assert_int_eq(memlistener_accept(l, &f->meta), 0);
	struct wire_hello x = *h;
	x.stream = WIRE_STREAM_DATA;
	rf_inject_hello(&f->data, &x);
	x.stream = WIRE_STREAM_META;
	rf_inject_hello(&f->meta, &x);
	memwire_flush(&f->data);
	memwire_flush(&f->meta);
	check_own_hello(f, &f->data, WIRE_STREAM_DATA);
	check_own_hello(f, &f->meta, WIRE_STREAM_META);
	/* Keep what followed the HELLOs (bitmaps, STATE), drop the HELLOs themselves. */
	for (struct memwire *w = &f->data; w; w = w == &f->data ? &f->meta : NULL) {
		free(w->frames[0].payload);
		memmove(&w->frames[0], &w->frames[1], (w->n_frames - 1) * sizeof(w->frames[0]));
		w->n_frames--;
	}
}

void rf_connect_primary(struct replfix *f)
{
	struct wire_hello h;
	char err[512];
	rf_hello(f, &h);
	rf_connect(f, &h);
	ck_assert(f->r->connected);
	ck_assert_int_eq(repl_link_state(f->r), LINK_CONNECTED);
	ck_assert_msg(repl_promote(f->r, false, err, sizeof(err)) == 0, "%s", err);
	ck_assert_int_eq(repl_role(f->r), ROLE_PRIMARY);
	ck_assert(f->r->connected); /* same generation: no reconnection */
	memwire_flush(&f->meta);
	/* The peer hears the new role. */
	const struct mem_frame *st = rf_nth(&f->meta, WIRE_STATE, 0);
	ck_assert_ptr_nonnull(st);
	ck_assert_uint_eq(st->payload[0], ROLE_PRIMARY);
	ck_assert_uint_eq(st->payload[1], DISK_UPTODATE);
	rf_clear(f);
}

void rf_connect_secondary(struct replfix *f)
{
	struct wire_hello h;
	rf_hello(f, &h);
	h.role = WIRE_ROLE_PRIMARY;
	rf_connect(f, &h);
	ck_assert(f->r->connected);
	ck_assert_int_eq(repl_link_state(f->r), LINK_CONNECTED);
	ck_assert_int_eq(f->r->peer_role, ROLE_PRIMARY);
	ck_assert_uint_eq(f->data.n_frames + f->meta.n_frames, 0);
}

/* ---- stepping -------------------------------------------------------------------------------- */

/* ---- invariants ------------------------------------------------------------------------------ */

static bool acked(const struct replfix *f, uint64_t id)
{
	for (size_t i = 0; i < f->n_acked; i++)
		if (f->acked[i] == id)
			return true;
	return false;
}

/* The transfer log holds [off, off+len) within one of its entries. */
static bool in_tlog(const struct repl *r, uint64_t off, uint64_t len)
{
	for (uint64_t s = r->tl.tail; s < r->tl.head; s++) {
		const struct tlog_range *e = &r->tl.ring[s & (r->tl.cap - 1)];
		if (e->off <= off && off + len <= e->off + e->len)
			return true;
	}
	return false;
}

void rf_invariants(struct replfix *f)
{
	struct repl *r = f->r;
	if (!f->open)
		return;
	/* The pend table: pend_count used slots, each at its id's place, its request sent. */
	unsigned used = 0;
	for (unsigned i = 0; i < PEND_SLOTS; i++) {
		const struct pend *p = &r->pend[i];
		if (!p->used)
			continue;
		used++;
		ck_assert_uint_eq(p->id % PEND_SLOTS, i);
		ck_assert(!p->write_acked);
		if (p->vio) {
			ck_assert_uint_eq(p->vio->rid, p->id);
			ck_assert(!(p->vio->rq & RQ_DONE));
		}
	}
	ck_assert_uint_eq(used, r->pend_count);
	/* ship.c: a block the peer may not have is in flight with an ack to come, or in the
	 * bitmap; once acknowledged, until a barrier after it is, in the transfer log or in the
	 * bitmap. As the scripted peer knows it: the test's acks (status 0) and barrier acks. */
	for (const struct rf_req *q = f->reqs; q; q = q->next) {
		const struct vol_io *v = &q->vio;
		if (v->op != VOL_WRITE && v->op != VOL_TRIM && v->op != VOL_ZERO)
			continue;
		if (v->rid == 0 || v->rid == UINT64_MAX || (v->flags & VOL_F_FUA))
			continue; /* never sent (held, or the peer was away: rf_bits says) */
		if (!acked(f, v->rid)) {
			const struct pend *p = &r->pend[v->rid % PEND_SLOTS];
			ck_assert_msg((p->used && p->id == v->rid) ||
			                  rf_bits(f, v->off, v->len, true),
			              "write %llu at %llu is neither in flight nor in the bitmap",
			              (unsigned long long)v->rid, (unsigned long long)v->off);
		} else if (v->rid > f->barrier_acked) {
			ck_assert_msg(in_tlog(r, v->off, v->len) ||
			                  rf_bits(f, v->off, v->len, true),
			              "write %llu at %llu, acknowledged, not stable, is neither in "
			              "the transfer log nor in the bitmap",
			              (unsigned long long)v->rid, (unsigned long long)v->off);
		}
	}
	/* apply.c: every received write holds its payload while being applied or waiting. */
	ck_assert_uint_eq(r->apply_count, r->applying.count + r->apply_waiting.count);
	for (unsigned i = 0; i < r->nbarriers; i++)
		ck_assert_uint_le(r->barriers[i].pending, r->apply_count);
	if (r->data && f->data.s == r->data)
		ck_assert(f->data.paused == r->data_paused);
}

void rf_step(struct replfix *f)
{
	ev_run(f->loop, EVRUN_NOWAIT);
	memwire_flush(&f->data);
	memwire_flush(&f->meta);
	rf_invariants(f);
	usleep(100);
}

void rf_run_for(struct replfix *f, double seconds)
{
	double end = now_s() + seconds;
	while (now_s() < end)
		rf_step(f);
}

struct rf_bound rf_bound_start(void)
{
	return (struct rf_bound){.start = now_s()};
}

bool rf_bound_ok(struct rf_bound *b)
{
	return ++b->steps <= RF_MAX_STEPS && now_s() - b->start <= RF_MAX_SECONDS;
}

/* ---- frames ---------------------------------------------------------------------------------- */

size_t rf_count(const struct memwire *w, uint16_t type)
{
	size_t n = 0;
	for (size_t i = 0; i < w->n_frames; i++)
		n += w->frames[i].hdr.type == type;
	return n;
}

const struct mem_frame *rf_nth(const struct memwire *w, uint16_t type, size_t n)
{
	for (size_t i = 0; i < w->n_frames; i++)
		if (w->frames[i].hdr.type == type && n-- == 0)
			return &w->frames[i];
	return NULL;
}

size_t rf_pos(const struct memwire *w, const struct mem_frame *fr)
{
	ck_assert_ptr_nonnull(fr);
	ck_assert(fr >= w->frames && fr < w->frames + w->n_frames);
	return (size_t)(fr - w->frames);
}

uint64_t rf_id(const struct mem_frame *fr)
{
	ck_assert_ptr_nonnull(fr);
	ck_assert_uint_ge(fr->hdr.len, WIRE_ID_SIZE);
	return wire_get_id(fr->payload);
}

uint32_t rf_status(const struct mem_frame *fr)
{
	ck_assert_ptr_nonnull(fr);
	ck_assert_uint_eq(fr->hdr.len, WIRE_ACK_SIZE);
	return be_get32(fr->payload + WIRE_ID_SIZE);
}

const struct mem_frame *rf_find_id(const struct memwire *w, uint16_t type, uint64_t id)
{
	for (size_t i = 0; i < w->n_frames; i++)
		if (w->frames[i].hdr.type == type && w->frames[i].hdr.len >= WIRE_ID_SIZE &&
		    wire_get_id(w->frames[i].payload) == id)
			return &w->frames[i];
	return NULL;
}

void rf_io_of(const struct mem_frame *fr, struct rf_io *io)
{
	struct wire_io x;
	char why[200];
	ck_assert_ptr_nonnull(fr);
	ck_assert_msg(wire_io_decode(&fr->hdr, fr->payload, RF_SIZE, 512, &x, why, sizeof(why)) ==
	                  0,
	              "%s", why);
	io->id = x.id;
	io->off = x.off;
	io->len = x.len;
	io->flags = fr->hdr.flags;
	io->crc = (fr->hdr.flags & WIRE_F_CRC) ? be_get32(fr->payload + WIRE_IO_SIZE) : 0;
	bool payload = fr->hdr.type == WIRE_DATA ||
	               (fr->hdr.type == WIRE_RS_DATA && !(fr->hdr.flags & WIRE_F_HOLE));
	io->data = payload ? fr->payload + wire_io_data_off(&fr->hdr) : NULL;
}

const struct mem_frame *rf_find_io(const struct memwire *w, uint16_t type, uint64_t off)
{
	for (size_t i = 0; i < w->n_frames; i++) {
		const struct mem_frame *fr = &w->frames[i];
		if (fr->hdr.type != type || fr->hdr.len < WIRE_IO_SIZE)
			continue;
		uint64_t o = be_get64(fr->payload + 8);
		uint32_t l = be_get32(fr->payload + 16);
		if (off >= o && off < o + l)
			return fr;
	}
	return NULL;
}

void rf_clear(struct replfix *f)
{
	memwire_clear(&f->data);
	memwire_clear(&f->meta);
}

/* ---- injection ------------------------------------------------------------------------------- */

static void inject_io(struct replfix *f, uint16_t type, uint16_t flags, uint64_t id, uint64_t off,
                      uint32_t len, const void *data, bool crc_given, uint32_t crc)
{
	struct wire_io io = {.id = id, .off = off, .len = len};
	uint32_t crc_len = (flags & WIRE_F_CRC) ? WIRE_CRC_SIZE : 0;
	uint32_t dlen = data ? len : 0;
	uint32_t plen = WIRE_IO_SIZE + crc_len + dlen;
	uint8_t *p = malloc(plen);
	ck_assert_ptr_nonnull(p);
	wire_io_encode(p, &io);
	if (crc_len)
		be_put32(p + WIRE_IO_SIZE, crc_given ? crc : crc32c_update(0, data, len));
	if (dlen)
		memcpy(p + WIRE_IO_SIZE + crc_len, data, dlen);
	int rc = memwire_inject(&f->data, type, flags, p, plen);
	free(p);
	ck_assert_int_eq(rc, 0);
	rf_invariants(f);
}

void rf_inject_io(struct replfix *f, uint16_t type, uint16_t flags, uint64_t id, uint64_t off,
                  uint32_t len, const void *data)
{
	inject_io(f, type, flags, id, off, len, data, false, 0);
}

void rf_inject_io_crc(struct replfix *f, uint16_t flags, uint64_t id, uint64_t off, uint32_t len,
                      const void *data, uint32_t crc)
{
	inject_io(f, WIRE_DATA, flags | WIRE_F_CRC, id, off, len, data, true, crc);
}

void rf_inject_id(struct replfix *f, struct memwire *w, uint16_t type, uint64_t id)
{
	uint8_t b[WIRE_ID_SIZE];
	wire_put_id(b, id);
	if (type == WIRE_BARRIER_ACK && id > f->barrier_acked)
		f->barrier_acked = id;
	ck_assert_int_eq(memwire_inject(w, type, 0, b, sizeof(b)), 0);
	rf_invariants(f);
}

void rf_inject_ack(struct replfix *f, uint16_t type, uint64_t id, uint32_t status)
{
	uint8_t b[WIRE_ACK_SIZE];
	wire_put_id(b, id);
	be_put32(b + WIRE_ID_SIZE, status);
	if (type == WIRE_WRITE_ACK && status == 0) {
		if (f->n_acked == f->cap_acked) {
			f->cap_acked = f->cap_acked ? 2 * f->cap_acked : 64;
			f->acked = realloc(f->acked, f->cap_acked * sizeof(*f->acked));
			ck_assert_ptr_nonnull(f->acked);
		}
		f->acked[f->n_acked++] = id;
	}
	ck_assert_int_eq(memwire_inject(&f->meta, type, 0, b, sizeof(b)), 0);
	rf_invariants(f);
}

void rf_inject_bitmap(struct replfix *f, uint64_t first_word, const uint64_t *words, size_t n)
{
	size_t len = 8 + 8 * n;
	uint8_t *b = malloc(len);
	ck_assert_ptr_nonnull(b);
	wire_put_id(b, first_word);
	for (size_t i = 0; i < n; i++) {
		uint64_t le = htole64(words[i]);
		memcpy(b + 8 + 8 * i, &le, 8);
	}
	int rc = memwire_inject(&f->data, WIRE_BITMAP, 0, b, (uint32_t)len);
	free(b);
	ck_assert_int_eq(rc, 0);
	rf_invariants(f);
}

/* ---- requests -------------------------------------------------------------------------------- */

void rf_pattern(uint8_t *buf, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(seed * 131u + i * 7u + (i >> 9) + 1u);
	if (len)
		buf[0] |= 1; /* never all zero: a zero run travels as a hole */
}

static void rf_done(struct vol_io *vio)
{
	struct rf_req *q = vio->data;
	q->answers++;
	q->err = vio->err;
}

struct rf_req *rf_submit(struct replfix *f, enum vol_op op, uint64_t off, uint64_t len,
                         unsigned seed, unsigned flags)
{
	struct rf_req *q = calloc(1, sizeof(*q));
	ck_assert_ptr_nonnull(q);
	q->next = f->reqs;
	f->reqs = q;
	if (op == VOL_WRITE || op == VOL_READ) {
		ck_assert_int_eq(posix_memalign((void **)&q->buf, 4096, len ? len : 1), 0);
		if (op == VOL_WRITE)
			rf_pattern(q->buf, len, seed);
	}
	q->vio.op = op;
	q->vio.flags = flags;
	q->vio.off = off;
	q->vio.len = len;
	q->vio.buf = q->buf;
	q->vio.done = rf_done;
	q->vio.data = q;
	ck_assert_int_eq(volume_submit(f->vol, &q->vio), 0);
	ck_assert_int_eq(q->answers, 0); /* never answered inside the submit */
	rf_invariants(f);
	return q;
}

/* ---- disk and state -------------------------------------------------------------------------- */

void rf_disk_read(const struct replfix *f, uint64_t off, void *buf, size_t len)
{
	ck_assert_int_eq(pread(f->fd, buf, len, (off_t)off), (ssize_t)len);
}

void rf_disk_write(const struct replfix *f, uint64_t off, size_t len, unsigned seed)
{
	uint8_t *b = malloc(len);
	ck_assert_ptr_nonnull(b);
	rf_pattern(b, len, seed);
	ck_assert_int_eq(pwrite(f->fd, b, len, (off_t)off), (ssize_t)len);
	free(b);
}

bool rf_disk_is(const struct replfix *f, uint64_t off, size_t len, unsigned seed)
{
	uint8_t *want = malloc(len), *got = malloc(len);
	ck_assert(want && got);
	rf_pattern(want, len, seed);
	rf_disk_read(f, off, got, len);
	bool eq = memcmp(want, got, len) == 0;
	free(want);
	free(got);
	return eq;
}

bool rf_disk_zero(const struct replfix *f, uint64_t off, size_t len)
{
	uint8_t *got = malloc(len);
	ck_assert_ptr_nonnull(got);
	rf_disk_read(f, off, got, len);
	bool zero = true;
	for (size_t i = 0; i < len && zero; i++)
		zero = got[i] == 0;
	free(got);
	return zero;
}

uint64_t rf_oos_bytes(const struct replfix *f)
{
	json_t *o = repl_status_json(f->r);
	ck_assert_ptr_nonnull(o);
	json_t *v = json_object_get(o, "out_of_sync_bytes");
	ck_assert(json_is_integer(v));
	uint64_t n = (uint64_t)json_integer_value(v);
	json_decref(o);
	return n;
}

bool rf_bits(const struct replfix *f, uint64_t off, uint64_t len, bool dirty)
{
	for (uint64_t b = off / RF_BLOCK; b <= (off + len - 1) / RF_BLOCK; b++)
		if (bitmap_test(f->r->bm, b) != dirty)
			return false;
	return true;
}
