/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for a volume request's life (volume/req.c), driven without sockets: a real volume on
 * a temp file with the real I/O engine, and a scripted replication behind the volume's door
 * (struct vol_repl_ops) that records what the volume asks of it and sends the events a peer's
 * answers would. Each test asserts on the answer (its error and when it comes), the state bits
 * at each step, and the data on disk.
 */
#include <check.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf/config.h"
#include "io/io.h"
#include "volume/req.h"
#include "volume/volume.h"

#define VOL_SIZE (1u << 20)

static struct ev_loop *loop;
static struct io_engine *eng;
static struct volume *vol;
static struct hak_volume_cfg cfg;
static char path[64];
static int file_fd = -1; /* the backing file, unlinked once the volume has it open */
static char name[] = "t";

/* The scripted replication: what the volume asked, and what it answers. */
static struct fake_repl {
	int hold;  /* submit: 1 holds the request, 0 lets it go */
	bool send; /* submit: the request goes to the peer (REQ_SENT) */
	int submits, local_dones, adopts, remote_reads, detaches;
	struct vol_io *last;
} fr;

static int fr_submit(void *ctx, struct vol_io *vio)
{
	(void)ctx;
	fr.submits++;
	fr.last = vio;
	if (fr.send)
		req_mod(vio, REQ_SENT, 0);
	return fr.hold;
}

static void fr_local_done(void *ctx, struct vol_io *vio)
{
	(void)ctx;
	(void)vio;
	fr.local_dones++;
}

static void fr_adopt(void *ctx, struct vol_io *vio)
{
	(void)ctx;
	fr.adopts++;
	fr.last = vio;
}

static int fr_remote_read(void *ctx, struct vol_io *vio)
{
	(void)ctx;
	fr.remote_reads++;
	fr.last = vio;
	return 0;
}

static bool fr_attaching(void *ctx)
{
	(void)ctx;
	return false;
}

static bool fr_local_stale(void *ctx, uint64_t off, uint64_t len)
{
	(void)ctx;
	(void)off;
	(void)len;
	return false;
}

static void fr_detached(void *ctx, const char *why)
{
	(void)ctx;
	(void)why;
	fr.detaches++;
}

static const struct vol_repl_ops fake_ops = {
    .submit = fr_submit,
    .local_done = fr_local_done,
    .adopt = fr_adopt,
    .remote_read = fr_remote_read,
    .attaching = fr_attaching,
    .local_stale = fr_local_stale,
    .detached = fr_detached,
};

/* One request and its answer. */
struct t_req {
	struct vol_io vio;
	int answers;
	int err;
	uint8_t buf[4096] __attribute__((aligned(4096)));
};

static void t_done(struct vol_io *vio)
{
	struct t_req *t = vio->data;
	t->answers++;
	t->err = vio->err;
}

static void t_init(struct t_req *t, enum vol_op op, uint64_t off, uint8_t fill)
{
	memset(t, 0, sizeof(*t));
	t->vio.op = op;
	t->vio.off = off;
	t->vio.len = op == VOL_FLUSH ? 0 : sizeof(t->buf);
	t->vio.buf = t->buf;
	t->vio.done = t_done;
	t->vio.data = t;
	memset(t->buf, fill, sizeof(t->buf));
}

/* Run the loop until the local I/O of t is over (RQ_LOCAL cleared), at most 5 s. */
static void run_until_local_done(struct t_req *t)
{
	for (int i = 0; i < 5000 && (t->vio.rq & RQ_LOCAL); i++) {
		ev_run(loop, EVRUN_NOWAIT);
		usleep(1000);
	}
	ck_assert_msg(!(t->vio.rq & RQ_LOCAL), "the local I/O did not finish");
}

static uint8_t disk_byte(uint64_t off)
{
	uint8_t b = 0;
	ck_assert_int_eq(pread(file_fd, &b, 1, (off_t)off), 1);
	return b;
}

static void setup(void)
{
	snprintf(path, sizeof(path), "/var/tmp/hak-test-req-XXXXXX");
	file_fd = mkstemp(path);
	ck_assert_int_ge(file_fd, 0);
	ck_assert_int_eq(ftruncate(file_fd, VOL_SIZE), 0);
	memset(&cfg, 0, sizeof(cfg));
	cfg.name = name;
	cfg.backing = path;
	cfg.on_io_error = HAK_IOERR_DETACH;
	loop = ev_loop_new(EVFLAG_AUTO);
	ck_assert_int_eq(io_engine_create(loop, IO_KIND_AUTO, 64, &eng), 0);
	int rc = volume_open(&cfg, eng, &vol);
	/* The volume and file_fd hold it open: nothing is left behind, even by a test that aborts
	 * (the invariant cases). */
	unlink(path);
	ck_assert_int_eq(rc, 0);
	memset(&fr, 0, sizeof(fr));
}

static void teardown(void)
{
	volume_close(vol);
	io_engine_destroy(eng);
	ev_loop_destroy(loop);
	close(file_fd);
}

START_TEST(standalone_write)
{
	struct t_req t;
	t_init(&t, VOL_WRITE, 8192, 0x5a);
	ck_assert_int_eq(volume_submit(vol, &t.vio), 0);
	ck_assert_int_eq(t.answers, 0); /* never answered inside the submit */
	ck_assert(t.vio.rq & RQ_LOCAL);
	run_until_local_done(&t);
	ck_assert_int_eq(t.answers, 1);
	ck_assert_int_eq(t.err, 0);
	ck_assert(t.vio.rq & RQ_DONE);
	ck_assert_uint_eq(disk_byte(8192), 0x5a);
}
END_TEST

/* sync: the answer waits for the peer's ack, whichever comes first. */
START_TEST(sync_waits_for_ack)
{
	struct t_req a, b;
	volume_set_repl(vol, &fake_ops, NULL);
	fr.send = true;
	t_init(&a, VOL_WRITE, 0, 1);
	volume_submit(vol, &a.vio);
	ck_assert_int_eq(fr.submits, 1);
	ck_assert(a.vio.rq & RQ_NET_WAIT);
	run_until_local_done(&a);
	ck_assert_int_eq(fr.local_dones, 1);
	ck_assert_int_eq(a.answers, 0); /* on the local disk, not yet on the peer's */
	req_mod(&a.vio, REQ_ACKED, 0);
	ck_assert_int_eq(a.answers, 1);
	ck_assert_int_eq(a.err, 0);
	ck_assert(req_peer_ok(&a.vio));

	/* the ack before the local write */
	t_init(&b, VOL_WRITE, 4096, 2);
	volume_submit(vol, &b.vio);
	req_mod(&b.vio, REQ_ACKED, 0);
	ck_assert_int_eq(b.answers, 0);
	run_until_local_done(&b);
	ck_assert_int_eq(b.answers, 1);
	ck_assert_int_eq(b.err, 0);
	ck_assert_uint_eq(disk_byte(4096), 2);
}
END_TEST

/* Writes and flushes are timed: local, peer and total, and who finished last. Reads are not. */
START_TEST(latency_accounting)
{
	struct t_req a, b, r;
	struct vol_stats st;
	volume_set_repl(vol, &fake_ops, NULL);
	fr.send = true;
	/* the peer answers after the local side: it set the pace */
	t_init(&a, VOL_FLUSH, 0, 0);
	volume_submit(vol, &a.vio);
	run_until_local_done(&a);
	req_mod(&a.vio, REQ_ACKED, 0);
	/* the peer first: the local side set the pace */
	t_init(&b, VOL_FLUSH, 0, 0);
	volume_submit(vol, &b.vio);
	req_mod(&b.vio, REQ_ACKED, 0);
	run_until_local_done(&b);
	ck_assert_int_eq(a.answers + b.answers, 2);
	fr.send = false;
	t_init(&r, VOL_READ, 0, 0);
	volume_submit(vol, &r.vio);
	run_until_local_done(&r);
	volume_stats(vol, &st);
	const struct vol_lat *f = &st.lat[VOL_LAT_FLUSH];
	ck_assert_uint_eq(f->total.count, 2);
	ck_assert_uint_eq(f->local.count, 2);
	ck_assert_uint_eq(f->peer.count, 2);
	ck_assert_uint_eq(f->peer_last, 1);
	/* each total is at least its own local and peer time */
	ck_assert_uint_ge(f->total.sum_ns, f->local.sum_ns);
	ck_assert_uint_ge(f->total.sum_ns, f->peer.sum_ns);
	ck_assert_uint_gt(f->local.sum_ns, 0); /* an fdatasync takes time */
	ck_assert_uint_eq(st.lat[VOL_LAT_WRITE].total.count, 0);
}
END_TEST

START_TEST(memsync_received_and_lost)
{
	struct t_req a, b, c;
	volume_set_repl(vol, &fake_ops, NULL);
	fr.send = true;
	t_init(&a, VOL_WRITE, 0, 1);
	volume_submit(vol, &a.vio);
	run_until_local_done(&a);
	req_mod(&a.vio, REQ_RECEIVED, 0);
	ck_assert_int_eq(a.answers, 1);
	ck_assert(!req_peer_ok(&a.vio)); /* received is not written */

	/* the link drops: the local result stands (the range is in the bitmap) */
	t_init(&b, VOL_WRITE, 0, 3);
	volume_submit(vol, &b.vio);
	run_until_local_done(&b);
	req_mod(&b.vio, REQ_PEER_LOST, 0);
	ck_assert_int_eq(b.answers, 1);
	ck_assert_int_eq(b.err, 0);

	/* the peer failed its write: that is the peer's problem (its bitmap), not the client's */
	t_init(&c, VOL_WRITE, 0, 4);
	volume_submit(vol, &c.vio);
	req_mod(&c.vio, REQ_ACKED, EIO);
	run_until_local_done(&c);
	ck_assert_int_eq(c.answers, 1);
	ck_assert_int_eq(c.err, 0);
	ck_assert(!req_peer_ok(&c.vio));
}
END_TEST

/* Held by replication (activity log, slot, overlap): no I/O until resumed, or it fails. */
START_TEST(held_resume_and_fail)
{
	struct t_req a, b;
	volume_set_repl(vol, &fake_ops, NULL);
	fr.hold = 1;
	t_init(&a, VOL_WRITE, 0, 9);
	volume_submit(vol, &a.vio);
	ck_assert(a.vio.rq & RQ_HELD);
	ck_assert(!(a.vio.rq & RQ_LOCAL));
	for (int i = 0; i < 20; i++)
		ev_run(loop, EVRUN_NOWAIT);
	ck_assert_uint_eq(disk_byte(0), 0); /* nothing written while held */
	req_mod(&a.vio, REQ_RESUME, 0);
	ck_assert(!(a.vio.rq & RQ_HELD));
	run_until_local_done(&a);
	ck_assert_int_eq(a.answers, 1);
	ck_assert_uint_eq(disk_byte(0), 9);

	t_init(&b, VOL_WRITE, 0, 7);
	volume_submit(vol, &b.vio);
	req_mod(&b.vio, REQ_FAIL, ENOSPC); /* not a disk failure: the client gets it */
	ck_assert_int_eq(b.answers, 1);
	ck_assert_int_eq(b.err, ENOSPC);
	ck_assert_int_eq(fr.detaches, 0);
	ck_assert_uint_eq(disk_byte(0), 9);
}
END_TEST

START_TEST(freeze_and_fail_writes)
{
	struct t_req w1, w2, rd, w3;
	volume_set_repl(vol, &fake_ops, NULL);
	volume_freeze(vol, true);
	t_init(&w1, VOL_WRITE, 0, 1);
	t_init(&w2, VOL_FLUSH, 0, 0);
	t_init(&rd, VOL_READ, 0, 0);
	volume_submit(vol, &w1.vio);
	volume_submit(vol, &w2.vio);
	volume_submit(vol, &rd.vio);
	ck_assert_int_eq(fr.submits, 0); /* frozen before replication sees them */
	ck_assert(w1.vio.rq & RQ_FROZEN);
	run_until_local_done(&rd); /* reads go on */
	ck_assert_int_eq(rd.answers, 1);
	volume_freeze(vol, false);
	ck_assert_int_eq(fr.submits, 2);
	run_until_local_done(&w1);
	run_until_local_done(&w2);
	ck_assert_int_eq(w1.answers + w2.answers, 2);

	/* stepping down: held and new writes fail, and so does one the peer never confirmed */
	volume_freeze(vol, true);
	t_init(&w1, VOL_WRITE, 0, 2);
	volume_submit(vol, &w1.vio);
	volume_freeze(vol, false);
	fr.send = true;
	t_init(&w3, VOL_WRITE, 4096, 3);
	volume_submit(vol, &w3.vio);
	volume_freeze(vol, true);
	volume_fail_writes(vol);
	ck_assert_int_eq(w1.answers, 0); /* thawed before: in flight, not held */
	run_until_local_done(&w1);
	ck_assert_int_eq(w1.answers, 1);
	ck_assert_int_eq(w1.err, EIO); /* the peer never confirmed it */
	t_init(&w2, VOL_WRITE, 0, 4);
	volume_submit(vol, &w2.vio);
	ck_assert_int_eq(w2.answers, 1);
	ck_assert_int_eq(w2.err, EIO);
	run_until_local_done(&w3);
	req_mod(&w3.vio, REQ_PEER_LOST, 0);
	ck_assert_int_eq(w3.answers, 1);
	ck_assert_int_eq(w3.err, EIO); /* only this node has it */
	volume_freeze(vol, false);
	ck_assert(!volume_failing(vol));
}
END_TEST

/* Diskless: the peer's answer is the result, reads go to the peer. */
START_TEST(detached_remote_only)
{
	struct t_req w, r;
	volume_set_repl(vol, &fake_ops, NULL);
	ck_assert_int_eq(volume_detach(vol, EIO, "a test"), 0);
	ck_assert_int_eq(fr.detaches, 1);
	t_init(&w, VOL_WRITE, 0, 1);
	volume_submit(vol, &w.vio);
	ck_assert(req_remote_only(&w.vio));
	ck_assert_int_eq(fr.adopts, 1);
	ck_assert_int_eq(w.answers, 1); /* never sent to the peer: no copy anywhere */
	ck_assert_int_eq(w.err, EIO);

	fr.send = true;
	t_init(&w, VOL_WRITE, 0, 1);
	volume_submit(vol, &w.vio);
	ck_assert_int_eq(w.answers, 0);
	req_mod(&w.vio, REQ_ACKED, 0);
	ck_assert_int_eq(w.answers, 1);
	ck_assert_int_eq(w.err, 0);

	t_init(&r, VOL_READ, 0, 0);
	volume_submit(vol, &r.vio);
	ck_assert_int_eq(fr.remote_reads, 1);
	ck_assert_int_eq(r.answers, 0);
	req_mod(&r.vio, REQ_LOCAL_DONE, 0); /* the peer's reply */
	ck_assert_int_eq(r.answers, 1);
	ck_assert_int_eq(r.err, 0);
}
END_TEST

/* Invariants: a second answer from the peer is a bug, and the test builds abort on it. */
START_TEST(double_ack_aborts)
{
	struct t_req a;
	volume_set_repl(vol, &fake_ops, NULL);
	fr.send = true;
	t_init(&a, VOL_WRITE, 0, 1);
	volume_submit(vol, &a.vio);
	req_mod(&a.vio, REQ_ACKED, 0);
	req_mod(&a.vio, REQ_ACKED, 0);
}
END_TEST

START_TEST(resume_unheld_aborts)
{
	struct t_req a;
	t_init(&a, VOL_WRITE, 0, 1);
	volume_submit(vol, &a.vio);
	req_mod(&a.vio, REQ_RESUME, 0);
}
END_TEST

START_TEST(event_after_answer_aborts)
{
	struct t_req a;
	t_init(&a, VOL_WRITE, 0, 1);
	volume_submit(vol, &a.vio);
	run_until_local_done(&a);
	ck_assert_int_eq(a.answers, 1);
	req_mod(&a.vio, REQ_SENT, 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("req");
	TCase *t = tcase_create("life");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, standalone_write);
	tcase_add_test(t, sync_waits_for_ack);
	tcase_add_test(t, latency_accounting);
	tcase_add_test(t, memsync_received_and_lost);
	tcase_add_test(t, held_resume_and_fail);
	tcase_add_test(t, freeze_and_fail_writes);
	tcase_add_test(t, detached_remote_only);
	suite_add_tcase(s, t);
	TCase *inv = tcase_create("invariants");
	tcase_add_checked_fixture(inv, setup, teardown);
	tcase_add_test_raise_signal(inv, double_ack_aborts, SIGABRT);
	tcase_add_test_raise_signal(inv, resume_unheld_aborts, SIGABRT);
	tcase_add_test_raise_signal(inv, event_after_answer_aborts, SIGABRT);
	suite_add_tcase(s, inv);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
