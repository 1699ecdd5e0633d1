/* SPDX-License-Identifier: MIT */
/* Unit tests for disk-failure classification: which errors detach a disk, and their names. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "volume/diskerr.h"

START_TEST(disk_errors)
{
	static const struct {
		int err;
		bool disk;
	} t[] = {
	    {EIO, true},     {ENXIO, true},     {ENODEV, true},   {ENOMEDIUM, true},
	    {EROFS, true},   {EREMOTEIO, true}, {EBADF, true},    {EUCLEAN, true},
	    {ENOSPC, false}, {EDQUOT, false},   {ENOTSUP, false}, {EOPNOTSUPP, false},
	    {EINVAL, false}, {EFBIG, false},    {ENOMEM, false},  {EAGAIN, false},
	    {0, false},      {EINTR, false},    {EPERM, false},   {ECANCELED, false},
	};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		ck_assert_msg(diskerr_is_disk_error(t[i].err) == t[i].disk,
		              "errno %d (%s): expected %s", t[i].err, strerror(t[i].err),
		              t[i].disk ? "a disk failure" : "no disk failure");
	ck_assert_str_eq(diskerr_errno_name(EIO), "EIO");
	ck_assert_str_eq(diskerr_errno_name(ENODEV), "ENODEV");
	ck_assert_str_eq(diskerr_errno_name(-12345), "EUNKNOWN");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("diskerr");
	TCase *t = tcase_create("core");
	tcase_add_test(t, disk_errors);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
