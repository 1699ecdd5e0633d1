/* SPDX-License-Identifier: MIT */
/* Unit tests for the pure part of Diskless operation: which handshakes a Diskless node may
 * complete. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "repl/diskless.h"
#include "repl/repl.h"

START_TEST(handshake_verdicts)
{
	static const struct {
		int self, peer;
		uint64_t sg, pg;
		enum diskless_verdict want;
	} t[] = {
	    /* Neither Diskless: the generation IDs decide. */
	    {DISK_UPTODATE, DISK_UPTODATE, 7, 7, DL_NONE},
	    {DISK_INCONSISTENT, DISK_UPTODATE, 7, 9, DL_NONE},
	    {DISK_OUTDATED, DISK_FAILED, 7, 7, DL_NONE},
	    /* A Diskless primary meets its UpToDate peer of the same generation. */
	    {DISK_DISKLESS, DISK_UPTODATE, 7, 7, DL_ACCEPT},
	    {DISK_UPTODATE, DISK_DISKLESS, 7, 7, DL_ACCEPT},
	    /* Nobody can serve. */
	    {DISK_DISKLESS, DISK_DISKLESS, 7, 7, DL_BOTH_DISKLESS},
	    {DISK_DISKLESS, DISK_OUTDATED, 7, 7, DL_NO_GOOD_COPY},
	    {DISK_DISKLESS, DISK_INCONSISTENT, 7, 7, DL_NO_GOOD_COPY},
	    {DISK_INCONSISTENT, DISK_DISKLESS, 7, 7, DL_NO_GOOD_COPY},
	    {DISK_DISKLESS, DISK_FAILED, 7, 7, DL_NO_GOOD_COPY},
	    /* Another generation: the peer was promoted or written elsewhere meanwhile. */
	    {DISK_DISKLESS, DISK_UPTODATE, 7, 8, DL_NO_GOOD_COPY},
	    {DISK_UPTODATE, DISK_DISKLESS, 8, 7, DL_NO_GOOD_COPY},
	    /* Never synced (generation 0) is no copy either. */
	    {DISK_DISKLESS, DISK_UPTODATE, 0, 0, DL_NO_GOOD_COPY},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		ck_assert_msg(
		    diskless_handshake(t[i].self, t[i].peer, t[i].sg, t[i].pg) == t[i].want,
		    "row %zu: self %s, peer %s, gens %llu/%llu: got %d, want %d", i,
		    repl_disk_name(t[i].self), repl_disk_name(t[i].peer),
		    (unsigned long long)t[i].sg, (unsigned long long)t[i].pg,
		    diskless_handshake(t[i].self, t[i].peer, t[i].sg, t[i].pg), t[i].want);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("diskless");
	TCase *t = tcase_create("core");
	tcase_add_test(t, handshake_verdicts);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
