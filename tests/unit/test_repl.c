/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the connection and handshake (repl/repl.c), driven without sockets through the
 * memory transport (support/replfix.h): the accepting side, the handshake's time limit; the
 * record of a forced promotion in the metadata (META_F_FORCED); both copies Outdated at one
 * generation.
 */
#include <check.h>
#include <jansson.h>

#include "io/io.h"
#include "meta/bitmap.h"
#include "meta/meta.h"
#include "support/replfix.h"

static void teardown(void)
{
	rf_close();
}

/* The acceptor waits a whole handshake time limit (at least 2 s) for the second stream's HELLO,
 * as the connector does, and then gives up with a log line. */
START_TEST(acceptor_waits_for_the_second_hello)
{
	struct rf_opts o = {.mode = HAK_MODE_SYNC};
	struct replfix *f = rf_open(&o);
	struct wire_hello h;
	struct tlistener *l = memtransport_listener(RF_SELF_ADDR);
	ck_assert_ptr_nonnull(l);
	rf_hello(f, &h);
	ck_assert_int_eq(memlistener_accept(l, &f->data), 0);
	ck_assert_int_eq(memlistener_accept(l, &f->meta), 0);
	h.stream = WIRE_STREAM_DATA;
	rf_inject_hello(&f->data, &h);
	rf_run_for(f, 1.0); /* a meta stream's SYN retransmit takes 1 s */
	ck_assert(!f->data.closed);
	ck_assert(!rf_log_has(f, "the handshake did not finish"));
	h.stream = WIRE_STREAM_META;
	rf_inject_hello(&f->meta, &h);
	rf_step(f);
	ck_assert(f->r->connected);
	ck_assert_int_eq(repl_link_state(f->r), LINK_CONNECTED);
}
END_TEST

START_TEST(acceptor_gives_up_on_a_half_handshake)
{
	struct rf_opts o = {.mode = HAK_MODE_SYNC};
	struct replfix *f = rf_open(&o);
	struct wire_hello h;
	struct tlistener *l = memtransport_listener(RF_SELF_ADDR);
	rf_hello(f, &h);
	ck_assert_int_eq(memlistener_accept(l, &f->data), 0);
	h.stream = WIRE_STREAM_DATA;
	rf_inject_hello(&f->data, &h);
	rf_until(f, f->data.closed);
	ck_assert(rf_log_has(f, "the handshake did not finish"));
	ck_assert(!f->r->connected);
}
END_TEST

/* ---- forced promotion ------------------------------------------------------------------------ */

/* Whether the superblock last written (the one a restart reads) records a forced promotion. */
static bool sb_forced(const struct replfix *f)
{
	return (meta_sb(f->r->meta)->flags & META_F_FORCED) != 0;
}

/* "forced" of repl_status_json (asserted present and boolean). */
static bool status_forced(const struct replfix *f)
{
	json_t *o = repl_status_json(f->r);
	ck_assert_ptr_nonnull(o);
	json_t *v = json_object_get(o, "forced");
	ck_assert(json_is_boolean(v));
	bool b = json_is_true(v);
	json_decref(o);
	return b;
}

/* Stop the node as hakd does and start it again on the same metadata. */
static void restart(struct replfix *f)
{
	struct repl_params p = f->r->p;
	char err[1024];
	repl_shutdown(f->r);
	ck_assert_int_eq(io_drain(f->eng, RF_MAX_SECONDS), 0);
	repl_destroy(f->r);
	f->r = NULL;
	/* hakd opens the volume afresh: its size is the backing store's again, metadata included.
	 */
	volume_set_size(f->vol, RF_SIZE + meta_md_size(RF_SIZE, RF_BLOCK));
	ck_assert_msg(repl_create(&p, &f->r, err, sizeof(err)) == 0, "%s", err);
}

/* A forced promotion of an Outdated disk is in the promotion's superblock write, in the status,
 * and survives a restart with a warning; a later promotion that starts a new generation (here:
 * alone, after a demotion) clears it. */
START_TEST(forced_promotion_is_recorded)
{
	struct replfix *f = rf_open(NULL);
	char err[512];
	f->r->disk = DISK_OUTDATED;
	uint64_t seq = meta_sb(f->r->meta)->seq;
	ck_assert_int_eq(repl_promote(f->r, false, err, sizeof(err)), -1);
	ck_assert(!sb_forced(f));
	ck_assert_msg(repl_promote(f->r, true, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(meta_sb(f->r->meta)->seq, seq + 1); /* one write */
	ck_assert(sb_forced(f));
	ck_assert(meta_sb(f->r->meta)->flags & META_F_UPTODATE);
	ck_assert(status_forced(f));
	uint64_t gen = f->r->sb.gen_current;
	ck_assert_uint_ne(gen, f->gen);

	ck_assert_msg(repl_demote(f->r, false, err, sizeof(err)) == 0, "%s", err);
	restart(f);
	ck_assert(sb_forced(f));
	ck_assert(status_forced(f));
	ck_assert_uint_eq(f->r->sb.gen_current, gen);
	ck_assert(rf_log_has(f, "comes from a forced promotion of " RF_SELF
	                        ": writes acknowledged by " RF_PEER));

	ck_assert_msg(repl_promote(f->r, false, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_ne(f->r->sb.gen_current, gen);
	ck_assert(!sb_forced(f));
	ck_assert(!status_forced(f));
}
END_TEST

/* Promoting an UpToDate disk, with or without --force, records nothing. */
START_TEST(normal_promotion_is_not_forced)
{
	struct replfix *f = rf_open(NULL);
	char err[512];
	ck_assert_msg(repl_promote(f->r, false, err, sizeof(err)) == 0, "%s", err);
	ck_assert(!sb_forced(f));
	ck_assert(!status_forced(f));
	ck_assert_msg(repl_demote(f->r, false, err, sizeof(err)) == 0, "%s", err);
	ck_assert_msg(repl_promote(f->r, true, err, sizeof(err)) == 0, "%s", err);
	ck_assert(!sb_forced(f));
	ck_assert(!rf_log_has(f, "FORCED"));
}
END_TEST

/* A forced promotion while connected reconnects, and the primary's connection loss starts
 * another generation: the record stays, since the data is still the forced copy. Discarding
 * the local data then clears it. */
START_TEST(forced_promotion_survives_the_reconnect)
{
	struct replfix *f = rf_open(NULL);
	struct wire_hello h;
	char err[512];
	rf_hello(f, &h);
	rf_connect(f, &h);
	ck_assert(f->r->connected);
	f->r->disk = DISK_OUTDATED;
	ck_assert_msg(repl_promote(f->r, true, err, sizeof(err)) == 0, "%s", err);
	ck_assert(!f->r->connected);
	ck_assert_uint_ne(f->r->sb.gen_current, f->gen);
	ck_assert(sb_forced(f));
	ck_assert(status_forced(f));

	ck_assert_msg(repl_demote(f->r, false, err, sizeof(err)) == 0, "%s", err);
	ck_assert(sb_forced(f));
	repl_discard_local(f->r);
	ck_assert(!sb_forced(f));
	ck_assert(!status_forced(f));
}
END_TEST

/* ---- both copies Outdated at one generation (handshake_equal_outdated) ------------------- */

/*
 * This node Outdated with local_bits blocks out of sync, the peer Outdated with peer_bits, the
 * same generation: the side without bits holds every acknowledged write and becomes UpToDate
 * and the source; with bits on both sides nothing is decided (the operator's call).
 */
static struct replfix *both_outdated(uint64_t local_bits, uint64_t peer_bits,
                                     enum repl_disk want_disk, enum repl_link want_link)
{
	struct replfix *f = rf_open(NULL);
	struct wire_hello h;
	f->r->disk = DISK_OUTDATED;
	if (local_bits)
		bitmap_set_bits(f->r->bm, 0, local_bits);
	rf_hello(f, &h);
	h.disk = WIRE_DISK_OUTDATED;
	h.bits_set = peer_bits;
	rf_connect(f, &h);
	ck_assert(f->r->connected);
	ck_assert_msg(repl_disk_state(f->r) == want_disk, "disk %s, expected %s",
	              repl_disk_name(repl_disk_state(f->r)), repl_disk_name(want_disk));
	ck_assert_msg(repl_link_state(f->r) == want_link, "link %s, expected %s",
	              repl_link_name(repl_link_state(f->r)), repl_link_name(want_link));
	ck_assert_uint_eq(f->r->sb.gen_current, f->gen); /* nobody made a new generation */
	return f;
}

START_TEST(both_outdated_the_clean_side_is_the_source)
{
	struct replfix *f = both_outdated(0, 5, DISK_UPTODATE, LINK_SYNC_SOURCE);
	ck_assert(rf_log_has(f, "Both copies are Outdated at the same generation"));
	ck_assert(meta_sb(f->r->meta)->flags & META_F_UPTODATE);
}
END_TEST

START_TEST(both_outdated_the_side_with_bits_is_the_target)
{
	struct replfix *f = both_outdated(3, 0, DISK_INCONSISTENT, LINK_SYNC_TARGET);
	ck_assert(rf_log_has(f, "resyncing them from the other Outdated side"));
}
END_TEST

START_TEST(both_outdated_without_bits_both_uptodate)
{
	both_outdated(0, 0, DISK_UPTODATE, LINK_CONNECTED);
}
END_TEST

START_TEST(both_outdated_with_bits_on_both_stay_outdated)
{
	struct replfix *f = both_outdated(2, 7, DISK_OUTDATED, LINK_CONNECTED);
	ck_assert(!rf_log_has(f, "Both copies are Outdated"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("repl");
	TCase *t = tcase_create("handshake");
	tcase_add_checked_fixture(t, NULL, teardown);
	tcase_set_timeout(t, 30);
	tcase_add_test(t, acceptor_waits_for_the_second_hello);
	tcase_add_test(t, acceptor_gives_up_on_a_half_handshake);
	suite_add_tcase(s, t);
	TCase *fp = tcase_create("forced promotion");
	tcase_add_checked_fixture(fp, NULL, teardown);
	tcase_set_timeout(fp, 30);
	tcase_add_test(fp, forced_promotion_is_recorded);
	tcase_add_test(fp, normal_promotion_is_not_forced);
	tcase_add_test(fp, forced_promotion_survives_the_reconnect);
	suite_add_tcase(s, fp);
	TCase *bo = tcase_create("both outdated");
	tcase_add_checked_fixture(bo, NULL, teardown);
	tcase_set_timeout(bo, 30);
	tcase_add_test(bo, both_outdated_the_clean_side_is_the_source);
	tcase_add_test(bo, both_outdated_the_side_with_bits_is_the_target);
	tcase_add_test(bo, both_outdated_without_bits_both_uptodate);
	tcase_add_test(bo, both_outdated_with_bits_on_both_stay_outdated);
	suite_add_tcase(s, bo);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
