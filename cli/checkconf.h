/* SPDX-License-Identifier: MIT */
/*
 * hakctl check-config FILE: every mistake of a hak.conf, without a daemon.
 */
#ifndef HAK_CLI_CHECKCONF_H
#define HAK_CLI_CHECKCONF_H

/* argv[0] is "check-config". Prints each error as "FILE:LINE:COL: sentence." on stdout and
 * returns 0 when the file is right, EXIT_USAGE (1) otherwise. */
int checkconf_run(int argc, char **argv);

#endif
