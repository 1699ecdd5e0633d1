/* SPDX-License-Identifier: MIT */
#include "diskless.h"

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "meta/bitmap.h"
#include "lib/buf.h"
#include "conf/config.h"
#include "ctl/events.h"
#include "lib/log.h"
#include "lib/proc.h"
#include "repl_int.h"
#include "volume/volume.h"

#define HOOKS_MAX 4

bool diskless_is_disk_error(int err)
{
	switch (err) {
	case EIO:
	case ENXIO:
	case ENODEV:
	case ENOMEDIUM:
	case EMEDIUMTYPE:
	case EROFS: /* the kernel remounted or the device turned read-only after errors */
	case EREMOTEIO:
	case EBADF:   /* the descriptor no longer refers to the device */
	case EUCLEAN: /* filesystem corruption under a file-backed store */
	case ENOTCONN:
	case ESHUTDOWN:
		return true;
	default:
		return false;
	}
}

enum diskless_verdict diskless_handshake(int self_disk, int peer_disk, uint64_t self_gen,
                                         uint64_t peer_gen)
{
	bool self_less = self_disk == DISK_DISKLESS, peer_less = peer_disk == DISK_DISKLESS;
	if (!self_less && !peer_less)
		return DL_NONE;
	if (self_less && peer_less)
		return DL_BOTH_DISKLESS;
	int full = self_less ? peer_disk : self_disk;
	if (full != DISK_UPTODATE || self_gen != peer_gen || self_gen == 0)
		return DL_NO_GOOD_COPY;
	return DL_ACCEPT;
}

const char *diskless_errno_name(int err)
{
	const char *n = strerrorname_np(err);
	return n ? n : "EUNKNOWN";
}

double diskless_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- local-io-error hook ---------------------------------------------------------------- */

struct hook_run {
	ev_child w;
	char volume[WIRE_NAME_MAX + 1];
	char path[256];
};

static unsigned hooks_running;

static void hook_exited(struct ev_loop *loop, ev_child *w, int revents)
{
	struct hook_run *h = (struct hook_run *)w;
	(void)revents;
	ev_child_stop(loop, w);
	hooks_running--;
	if (WIFEXITED(w->rstatus) && WEXITSTATUS(w->rstatus) == 0)
		log_vol(LOG_LVL_INFO, h->volume, NULL, "The local-io-error hook %s finished.",
		        h->path);
	else
		log_vol(LOG_LVL_WARN, h->volume, NULL,
		        "The local-io-error hook %s failed (wait status 0x%x).", h->path,
		        (unsigned)w->rstatus);
	free(h);
}

void diskless_hook_run(const struct hak_volume_cfg *vc, const char *op, int err, const char *policy)
{
	struct ev_loop *loop = ev_default_loop(0);
	char e_vol[96], e_err[48], e_op[48], e_pol[48];
	char e_path[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
	const char *ename = diskless_errno_name(err);
	if (!vc->local_io_error_hook)
		return;
	if (hooks_running >= HOOKS_MAX) {
		log_vol(LOG_LVL_WARN, vc->name, NULL,
		        "Not running the local-io-error hook for a %s error: %u instances still "
		        "run.",
		        ename, hooks_running);
		return;
	}
	struct hook_run *h = calloc(1, sizeof(*h));
	if (!h)
		return;
	snprintf(h->volume, sizeof(h->volume), "%s", vc->name);
	snprintf(h->path, sizeof(h->path), "%s", vc->local_io_error_hook);
	snprintf(e_vol, sizeof(e_vol), "HAK_VOLUME=%s", vc->name);
	snprintf(e_err, sizeof(e_err), "HAK_ERROR=%s", ename);
	snprintf(e_op, sizeof(e_op), "HAK_OP=%s", op);
	snprintf(e_pol, sizeof(e_pol), "HAK_POLICY=%s", policy);
	char *argv[] = {vc->local_io_error_hook, vc->name, (char *)ename, (char *)op,
	                (char *)policy,          NULL};
	char *envp[] = {e_vol, e_err, e_op, e_pol, e_path, NULL};
	pid_t pid;
	posix_spawnattr_t at;
	proc_spawnattr_init(&at);
	int rc = posix_spawn(&pid, vc->local_io_error_hook, NULL, &at, argv, envp);
	posix_spawnattr_destroy(&at);
	if (rc != 0) {
		log_vol(LOG_LVL_ERR, vc->name, NULL, "Cannot run the local-io-error hook %s: %s.",
		        vc->local_io_error_hook, strerror(rc));
		free(h);
		return;
	}
	hooks_running++;
	ev_child_init(&h->w, hook_exited, pid, 0);
	ev_child_start(loop, &h->w);
}

/* ---- detach ----------------------------------------------------------------------------- */

void repl_detached(struct repl *r, const char *reason)
{
	enum repl_disk was = r->disk;
	attach_abort(r);
	snprintf(r->detach_reason, sizeof(r->detach_reason), "%s", reason);
	r->disk = DISK_DISKLESS;
	/* A resync this node sources reads the failed disk: nothing good can come of it. */
	if (r->link == LINK_SYNC_SOURCE)
		repl_drop_connection(r, "the local disk failed while it was the resync source");
	/* The superblock stops calling the disk consistent, so it can never be promoted from or
	 * serve as a resync source after a restart. Metadata on a separate device usually
	 * survives the data disk; if it fails too, say so loudly. */
	if (meta_flush_bitmap(r->meta, r->bm) < 0 || repl_write_sb(r) < 0)
		repl_log(r, LOG_LVL_ERR,
		         "Recording the detach in the metadata failed: after a restart this "
		         "node may take its stale disk for %s. Run 'hakctl attach %s' only "
		         "after a full resync is possible.",
		         repl_disk_name(was), r->name);
	repl_send_state(r);
	repl_log(r, LOG_LVL_ERR, "Detached the backing store (%s): the disk is Diskless, %s.",
	         reason,
	         r->connected && r->peer_disk == DISK_UPTODATE
	             ? "reads and writes go to the peer"
	             : "and no UpToDate peer is connected, so requests fail with EIO");
	char ev_reason[sizeof(r->detach_reason)];
	snprintf(ev_reason, sizeof(ev_reason), "%s", reason);
	for (char *p = ev_reason; *p; p++)
		if (*p == ' ')
			*p = '-';
	events_emit("detach", "volume:%s disk:%s->Diskless reason:%s peer:%s", r->name,
	            repl_disk_name(was), ev_reason,
	            r->connected ? repl_disk_name(r->peer_disk) : "none");
}

/* ---- primary: forwarded reads ----------------------------------------------------------- */

static bool range_out_of_sync(const struct repl *r, uint64_t off, uint64_t len)
{
	uint32_t bs = r->sb.bitmap_block_size;
	uint64_t first = off / bs, last = (off + len - 1) / bs;
	return bitmap_find_next_set(r->bm, first) <= last;
}

static void rread_chunk_done(struct vol_io *vio, int err)
{
	if (err && !vio->rr_err)
		vio->rr_err = err;
	vio->rr_pending--;
	if (vio->rr_pending == 0 && vio->rr_next >= vio->off + vio->len)
		volume_remote_read_done(vio, vio->rr_err);
}

static void rread_pump(struct repl *r)
{
	while (r->rread_head && r->connected) {
		struct vol_io *vio = r->rread_head;
		uint64_t end = vio->off + vio->len;
		while (vio->rr_next < end) {
			uint64_t id = r->rread_next_id;
			struct rread *s = &r->rread[id % RREAD_SLOTS];
			if (s->vio)
				return; /* all slots busy: the next reply continues */
			uint32_t n = end - vio->rr_next < WIRE_READ_MAX
			                 ? (uint32_t)(end - vio->rr_next)
			                 : WIRE_READ_MAX;
			struct wire_io io = {.id = id, .off = vio->rr_next, .len = n};
			uint8_t b[WIRE_IO_SIZE];
			wire_io_encode(b, &io);
			if (tstream_send_small(r->data, WIRE_READ_REQ, 0, b, sizeof(b)) < 0) {
				repl_drop_connection(r, "queueing a forwarded read failed");
				return;
			}
			s->id = id;
			s->vio = vio;
			s->len = n;
			s->dst = (uint8_t *)vio->buf + (vio->rr_next - vio->off);
			r->rread_next_id++;
			r->rread_count++;
			vio->rr_pending++;
			vio->rr_next += n;
		}
		r->rread_head = vio->rnext;
		if (!r->rread_head)
			r->rread_tail = NULL;
		vio->rnext = NULL;
	}
}

int repl_remote_read(struct repl *r, struct vol_io *vio)
{
	if (!r->connected || r->peer_disk != DISK_UPTODATE || !r->data ||
	    range_out_of_sync(r, vio->off, vio->len)) {
		errno = EIO;
		return -1;
	}
	vio->rr_next = vio->off;
	vio->rr_pending = 0;
	vio->rr_err = 0;
	vio->rnext = NULL;
	if (r->rread_tail)
		r->rread_tail->rnext = vio;
	else
		r->rread_head = vio;
	r->rread_tail = vio;
	rread_pump(r);
	return 0;
}

void diskless_read_reply(struct repl *r, const struct wire_hdr *h, uint8_t *payload)
{
	char why[200];
	uint64_t id = wire_get_id(payload);
	uint32_t status;
	if (id & ATTACH_ID_BIT) {
		attach_read_reply(r, h, payload);
		return;
	}
	struct rread *s = &r->rread[id % RREAD_SLOTS];
	if (r->role != ROLE_PRIMARY || !s->vio || s->id != id) {
		buf_put(payload, h->len);
		snprintf(why, sizeof(why), "the peer answered read %llu that was never asked",
		         (unsigned long long)id);
		repl_drop_connection(r, why);
		return;
	}
	if (wire_rreply_decode(h, payload, s->len, &id, &status, why, sizeof(why)) < 0) {
		buf_put(payload, h->len);
		repl_drop_connection(r, why);
		return;
	}
	struct vol_io *vio = s->vio;
	if (status == 0)
		memcpy(s->dst, payload + WIRE_RREPLY_SIZE, s->len);
	else
		repl_log(r, LOG_LVL_ERR,
		         "The peer failed a forwarded read of %u bytes at %llu (error %u).", s->len,
		         (unsigned long long)(vio->off + (uint64_t)(s->dst - (uint8_t *)vio->buf)),
		         status);
	buf_put(payload, h->len);
	s->vio = NULL;
	r->rread_count--;
	r->remote_reads++;
	rread_chunk_done(vio, status ? EIO : 0);
	rread_pump(r);
}

static void rread_fail_all(struct repl *r)
{
	/* Queued requests first, so none of them gets a slot while the slots are failed. */
	struct vol_io *q = r->rread_head;
	r->rread_head = r->rread_tail = NULL;
	while (q) {
		struct vol_io *vio = q;
		q = vio->rnext;
		vio->rnext = NULL;
		vio->rr_next = vio->off + vio->len;
		vio->rr_pending++;
		rread_chunk_done(vio, EIO);
	}
	for (unsigned i = 0; i < RREAD_SLOTS; i++) {
		struct rread *s = &r->rread[i];
		if (!s->vio)
			continue;
		struct vol_io *vio = s->vio;
		s->vio = NULL;
		r->rread_count--;
		rread_chunk_done(vio, EIO);
	}
}

/* ---- secondary: serving reads ----------------------------------------------------------- */

static void rserve_free(struct rserve *sv)
{
	sv->r->rserve_count--;
	buf_put(sv->buf, sv->len);
	free(sv);
}

static void rserve_sent(struct outq_item *it, int err)
{
	(void)err;
	rserve_free(it->ctx);
}

static void rserve_reply(struct rserve *sv)
{
	struct repl *r = sv->r;
	if (sv->conn_seq != r->conn_seq || !r->connected || !r->data) {
		rserve_free(sv);
		return;
	}
	if (sv->status)
		repl_log(r, LOG_LVL_ERR, "Serving the peer's read of %u bytes at %llu failed: %s.",
		         sv->len, (unsigned long long)sv->off, strerror(sv->status));
	struct outq_item *it = &sv->item;
	memset(it, 0, sizeof(*it));
	uint32_t dlen = sv->status ? 0 : sv->len;
	wire_hdr_encode(it->hdr, WIRE_READ_REPLY, 0, WIRE_RREPLY_SIZE + dlen);
	wire_rreply_encode(it->hdr + WIRE_HDR_SIZE, sv->id, (uint32_t)sv->status);
	it->hdr_len = WIRE_HDR_SIZE + WIRE_RREPLY_SIZE;
	it->data = dlen ? sv->buf : NULL;
	it->data_len = dlen;
	it->sent = rserve_sent;
	it->ctx = sv;
	tstream_send(r->data, it);
}

static void rserve_read_done(struct io_req *req)
{
	struct rserve *sv = req->data;
	if (req->res < 0)
		sv->status = (int)-req->res;
	else if ((uint64_t)req->res != sv->len)
		sv->status = EIO;
	rserve_reply(sv);
}

static void rserve_start(struct rserve *sv)
{
	struct repl *r = sv->r;
	memset(&sv->io, 0, sizeof(sv->io));
	sv->io.op = IO_OP_READ;
	sv->io.fd = volume_fd(r->p.vol);
	sv->io.off = sv->off;
	sv->io.len = sv->len;
	sv->io.buf = sv->buf;
	if (!r->p.vcfg->direct_io)
		sv->io.flags |= IO_F_BUFFERED;
	sv->io.done = rserve_read_done;
	sv->io.data = sv;
	if (io_submit(r->p.io, &sv->io) < 0) {
		sv->io.res = -EIO;
		rserve_read_done(&sv->io);
	}
}

void diskless_read_req(struct repl *r, const struct wire_hdr *h, uint8_t *payload)
{
	char why[200];
	struct wire_io io;
	int rc = wire_io_decode(h, payload, volume_size(r->p.vol), 512, &io, why, sizeof(why));
	buf_put(payload, h->len);
	if (rc < 0 || r->role == ROLE_PRIMARY || r->rserve_count >= RREAD_SLOTS + ATTACH_WINDOW) {
		if (rc == 0)
			snprintf(why, sizeof(why), "%s",
			         r->role == ROLE_PRIMARY
			             ? "the peer asked a primary to serve a read"
			             : "the peer has more forwarded reads in flight than allowed");
		repl_drop_connection(r, why);
		return;
	}
	struct rserve *sv = calloc(1, sizeof(*sv));
	uint8_t *buf = sv ? buf_get(io.len) : NULL;
	if (!sv || !buf) {
		free(sv);
		repl_drop_connection(r, "out of memory for a forwarded read");
		return;
	}
	sv->r = r;
	sv->id = io.id;
	sv->off = io.off;
	sv->len = io.len;
	sv->buf = buf;
	sv->conn_seq = r->conn_seq;
	r->rserve_count++;
	if (r->disk != DISK_UPTODATE) {
		/* Only an UpToDate copy may answer for the primary's lost disk. */
		sv->status = EIO;
		rserve_reply(sv);
		return;
	}
	if (apply_overlaps(r, io.off, io.len) || r->rserve_wait) {
		struct rserve **pp = &r->rserve_wait;
		while (*pp)
			pp = &(*pp)->next;
		*pp = sv;
		return;
	}
	rserve_start(sv);
}

void diskless_apply_progress(struct repl *r)
{
	/* In arrival order: a read never overtakes an earlier one still blocked. */
	while (r->rserve_wait && !apply_overlaps(r, r->rserve_wait->off, r->rserve_wait->len)) {
		struct rserve *sv = r->rserve_wait;
		r->rserve_wait = sv->next;
		sv->next = NULL;
		rserve_start(sv);
	}
}

void diskless_conn_lost(struct repl *r)
{
	/* repl.c bumps conn_seq on every loss: replies still being read are dropped by it. */
	while (r->rserve_wait) {
		struct rserve *sv = r->rserve_wait;
		r->rserve_wait = sv->next;
		rserve_free(sv);
	}
	rread_fail_all(r);
	if (r->pull_bm)
		volume_detach(r->p.vol, 0, "the connection to the peer was lost during the attach");
}

void diskless_destroy(struct repl *r)
{
	diskless_conn_lost(r);
}
