/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the cluster key ring (cluster/keyring.h): the keys a packet goes out and is
 * checked under through a rotation, with real key files replaced by rename; a second
 * replacement before the other side caught up; a witness that needs both nodes; a bad file
 * that leaves the keys in use; the end of the grace period.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cluster/keyring.h"

static char dir[64], path[128];

static void setup(void)
{
	strcpy(dir, "/tmp/hak-keyring-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/cluster.key", dir);
}

static void teardown(void)
{
	char tmp[160];

	snprintf(tmp, sizeof(tmp), "%s.new", path);
	unlink(tmp);
	unlink(path);
	rmdir(dir);
}

static void put(const char *text, mode_t mode)
{
	char tmp[160];
	int fd;

	snprintf(tmp, sizeof(tmp), "%s.new", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, mode);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fchmod(fd, mode), 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	ck_assert_int_eq(rename(tmp, path), 0);
}

static bool is(const struct key_bytes *k, const char *text)
{
	return k->len == strlen(text) && memcmp(k->bytes, text, k->len) == 0;
}

static const char A[] = "key number one, sixteen+", B[] = "key number two, sixteen+",
                  C[] = "key number three, sixteen+";

START_TEST(rotation_with_one_peer)
{
	struct keyring kr;
	const struct key_bytes *k[2];
	char err[300];
	int64_t t = 1000;

	put(A, 0600);
	ck_assert_int_eq(keyring_init(&kr, path, "cluster key", 1, err, sizeof(err)), 0);
	ck_assert_str_eq(keyring_state(&kr), "none");
	ck_assert_uint_eq(keyring_send_keys(&kr, k), 1);
	ck_assert(is(k[0], A));
	ck_assert_uint_eq(keyring_recv_keys(&kr, k), 1);
	ck_assert_int_eq(keyring_refresh(&kr, t), 0); /* unchanged file */

	put(B, 0600);
	ck_assert_int_eq(keyring_refresh(&kr, t + 10), 0); /* checked at most once a second */
	ck_assert_int_eq(keyring_refresh(&kr, t + KEYRING_CHECK_MS), 1);
	ck_assert_str_eq(keyring_state(&kr), "waiting");
	ck_assert_uint_eq(kr.rotations, 1);
	/* the peer still on A understands the first packet, one on B the second */
	ck_assert_uint_eq(keyring_send_keys(&kr, k), 2);
	ck_assert(is(k[0], A) && is(k[1], B));
	ck_assert_uint_eq(keyring_recv_keys(&kr, k), 2);
	ck_assert(is(k[0], B) && is(k[1], A));
	/* a packet under the old key says nothing */
	keyring_seen(&kr, 1, 1, t + 1500);
	ck_assert_str_eq(keyring_state(&kr), "waiting");
	/* one under the new key: the peer rotated too */
	keyring_seen(&kr, 0, 1, t + 1600);
	ck_assert_str_eq(keyring_state(&kr), "grace");
	ck_assert_uint_eq(keyring_send_keys(&kr, k), 1);
	ck_assert(is(k[0], B));
	ck_assert_uint_eq(keyring_recv_keys(&kr, k), 2);
	keyring_refresh(&kr, t + 1600 + KEYRING_GRACE_MS - 1);
	ck_assert_str_eq(keyring_state(&kr), "grace");
	keyring_refresh(&kr, t + 1600 + KEYRING_GRACE_MS);
	ck_assert_str_eq(keyring_state(&kr), "none");
	ck_assert_uint_eq(keyring_recv_keys(&kr, k), 1);
	ck_assert(is(k[0], B));
	keyring_clear(&kr);
}
END_TEST

START_TEST(second_replacement_keeps_the_peers_key)
{
	struct keyring kr;
	const struct key_bytes *k[2];
	char err[300];

	put(A, 0600);
	ck_assert_int_eq(keyring_init(&kr, path, "cluster key", 1, err, sizeof(err)), 0);
	put(B, 0600);
	ck_assert_int_eq(keyring_refresh(&kr, 5000), 1);
	put(C, 0600);
	ck_assert_int_eq(keyring_refresh(&kr, 5000 + KEYRING_CHECK_MS), 1);
	/* the peer was never seen on B: A is still the key it is known to use */
	ck_assert_uint_eq(keyring_send_keys(&kr, k), 2);
	ck_assert(is(k[0], A) && is(k[1], C));
	/* rewriting the same key is no rotation */
	put(C, 0600);
	ck_assert_int_eq(keyring_refresh(&kr, 5000 + 2 * KEYRING_CHECK_MS), 0);
	ck_assert_uint_eq(kr.rotations, 2);
	/* after the switch, a new replacement keeps the key now in use as the old one */
	keyring_seen(&kr, 0, 1, 8000);
	put(A, 0600);
	ck_assert_int_eq(keyring_refresh(&kr, 5000 + 3 * KEYRING_CHECK_MS), 1);
	ck_assert_uint_eq(keyring_send_keys(&kr, k), 2);
	ck_assert(is(k[0], C) && is(k[1], A));
	keyring_clear(&kr);
}
END_TEST

START_TEST(witness_needs_both_nodes)
{
	struct keyring kr;
	const struct key_bytes *k[2];
	char err[300];

	put(A, 0600);
	ck_assert_int_eq(keyring_init(&kr, path, "cluster key", 3, err, sizeof(err)), 0);
	put(B, 0600);
	ck_assert_int_eq(keyring_refresh(&kr, 2000), 1);
	keyring_seen(&kr, 0, 1, 2100);
	ck_assert_str_eq(keyring_state(&kr), "waiting");
	ck_assert_uint_eq(keyring_send_keys(&kr, k), 2);
	keyring_seen(&kr, 0, 2, 2200);
	ck_assert_str_eq(keyring_state(&kr), "grace");
	keyring_clear(&kr);
}
END_TEST

START_TEST(bad_file_keeps_the_keys)
{
	struct keyring kr;
	const struct key_bytes *k[2];
	char err[300];

	put(A, 0600);
	ck_assert_int_eq(keyring_init(&kr, path, "cluster key", 1, err, sizeof(err)), 0);
	put("short", 0600);
	ck_assert_int_eq(keyring_refresh(&kr, 3000), -1);
	put(B, 0644); /* readable by others: refused */
	ck_assert_int_eq(keyring_refresh(&kr, 3000 + KEYRING_CHECK_MS), -1);
	/* a removed file is reported once, not at every check */
	unlink(path);
	ck_assert_int_eq(keyring_refresh(&kr, 3000 + 2 * KEYRING_CHECK_MS), -1);
	ck_assert_int_eq(keyring_refresh(&kr, 3000 + 3 * KEYRING_CHECK_MS), 0);
	ck_assert_str_eq(keyring_state(&kr), "none");
	ck_assert_uint_eq(keyring_send_keys(&kr, k), 1);
	ck_assert(is(k[0], A));
	/* and the first load reports what is wrong */
	put("short", 0600);
	ck_assert_int_eq(keyring_init(&kr, path, "cluster key", 1, err, sizeof(err)), -1);
	ck_assert_msg(strstr(err, "cluster key") != NULL, "%s", err);
	keyring_clear(&kr);
}
END_TEST

static Suite *keyring_suite(void)
{
	Suite *s = suite_create("keyring");
	TCase *tc = tcase_create("rotation");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, rotation_with_one_peer);
	tcase_add_test(tc, second_replacement_keeps_the_peers_key);
	tcase_add_test(tc, witness_needs_both_nodes);
	tcase_add_test(tc, bad_file_keeps_the_keys);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(keyring_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
