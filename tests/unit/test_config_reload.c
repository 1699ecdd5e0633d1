/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for conf/config_reload: which differences between the running configuration and a
 * reloaded file are applied live and which are refused, the values shown for each, and that
 * applying copies exactly the live ones.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/config.h"
#include "conf/config_reload.h"

static struct hak_config *parse(const char *text)
{
	char err[512];
	struct hak_config *cfg = NULL;

	if (config_parse(text, strlen(text), "t.conf", &cfg, err, sizeof(err)) < 0)
		ck_abort_msg("config_parse: %s", err);
	return cfg;
}

static const struct reload_change *find(const struct reload_plan *p, const char *where,
                                        const char *key)
{
	for (unsigned i = 0; i < p->n; i++)
		if (strcmp(p->c[i].where, where) == 0 && strcmp(p->c[i].key, key) == 0)
			return &p->c[i];
	return NULL;
}

#define PAIR(global, cluster, vol)                                                                 \
	"global {\n" global "}\n"                                                                  \
	"node a {\n address 192.0.2.1:7789\n heartbeat-address 192.0.2.1:7790 "                    \
	"198.51.100.1:7790\n}\n"                                                                   \
	"node b {\n address 192.0.2.2:7789\n heartbeat-address 192.0.2.2:7790 "                    \
	"198.51.100.2:7790\n}\n"                                                                   \
	"cluster {\n auth-key-file /etc/hak/hb.key\n" cluster "}\n"                                \
	"volume db {\n backing /dev/vdb\n nbd-socket /run/hak/db.sock\n "                          \
	"auth-key-file /etc/hak/r.key\n" vol "}\n"

START_TEST(same_file_no_change)
{
	struct hak_config *a = parse(PAIR(" log-level info\n", "", " mode sync\n"));
	struct hak_config *b = parse(PAIR(" log-level info\n", "", " mode sync\n"));
	static struct reload_plan p;

	config_reload_diff(a, b, &p);
	ck_assert_uint_eq(p.n, 0);
	/* a default written out is no change either: values are compared, not text */
	config_free(b);
	b = parse(PAIR("", " deadtime 1s\n", ""));
	config_reload_diff(a, b, &p);
	ck_assert_uint_eq(p.n, 0);
	config_free(a);
	config_free(b);
}
END_TEST

START_TEST(live_and_refused)
{
	struct hak_config *a = parse(
	    PAIR(" log-level info\n max-clients 64\n", " fence-hook /usr/sbin/fence-a\n",
	         " mode sync\n resync-rate-max 10M\n ping-timeout 2s\n ping-interval 500ms\n"));
	struct hak_config *b = parse(PAIR(
	    " log-level debug\n max-clients 32\n", " fence-hook /usr/sbin/fence-b\n deadtime 2s\n",
	    " mode async\n resync-rate-max 100M\n ping-timeout 3s\n split-brain-hook /bin/sb\n"
	    " ping-interval 250ms\n"));
	static struct reload_plan p;
	const struct reload_change *c;
	char line[512];

	config_reload_diff(a, b, &p);
	ck_assert_uint_eq(p.n, 10);
	ck_assert_uint_eq(p.n_live, 6);
	ck_assert_uint_eq(p.n_refused, 4);
	ck_assert(!p.overflow);
	/* live: log-level (an enum shown by its name), resync-rate-max, ping-timeout, the hook
	 * paths */
	ck_assert_ptr_nonnull(c = find(&p, "global", "log-level"));
	ck_assert(c->live);
	ck_assert_str_eq(c->old_val, "info");
	ck_assert_str_eq(c->new_val, "debug");
	ck_assert_ptr_nonnull(c = find(&p, "volume db", "resync-rate-max"));
	ck_assert(c->live);
	ck_assert_str_eq(c->old_val, "10485760");
	ck_assert_str_eq(c->new_val, "104857600");
	ck_assert_ptr_nonnull(c = find(&p, "volume db", "ping-timeout"));
	ck_assert(c->live);
	ck_assert_str_eq(c->new_val, "3s");
	ck_assert_ptr_nonnull(c = find(&p, "volume db", "ping-interval"));
	ck_assert(c->live);
	ck_assert_ptr_nonnull(c = find(&p, "volume db", "split-brain-hook"));
	ck_assert(c->live);
	ck_assert_str_eq(c->old_val, "(none)");
	ck_assert_ptr_nonnull(c = find(&p, "cluster", "fence-hook"));
	ck_assert(c->live);
	/* refused: copied at start */
	ck_assert_ptr_nonnull(c = find(&p, "global", "max-clients"));
	ck_assert(!c->live);
	config_reload_describe(c, line, sizeof(line));
	ck_assert_str_eq(line, "global: max-clients 64 -> 32");
	ck_assert_ptr_nonnull(c = find(&p, "volume db", "mode"));
	ck_assert(!c->live);
	ck_assert_str_eq(c->old_val, "sync");
	ck_assert_str_eq(c->new_val, "async");
	ck_assert_ptr_nonnull(c = find(&p, "cluster", "deadtime"));
	ck_assert(!c->live);
	/* a default that follows another key is compared by its value: async's fencing is none */
	ck_assert_ptr_nonnull(c = find(&p, "volume db", "fencing"));
	ck_assert(!c->live);
	ck_assert_str_eq(c->old_val, "resource-only");
	ck_assert_str_eq(c->new_val, "none");

	/* apply: the live values, and only those, are now the running ones */
	ck_assert_int_eq(config_reload_apply(&p), 0);
	ck_assert_int_eq(a->log_level, LOG_LVL_DEBUG);
	ck_assert_uint_eq(a->volumes[0].resync_rate_max, 100u << 20);
	ck_assert(a->volumes[0].ping_timeout == 3.0);
	ck_assert(a->volumes[0].ping_interval == 0.25);
	ck_assert_str_eq(a->volumes[0].sb_hook, "/bin/sb");
	ck_assert_str_eq(a->cluster.fence_hook, "/usr/sbin/fence-b");
	ck_assert_uint_eq(a->max_clients, 64);
	ck_assert_int_eq(a->volumes[0].mode, HAK_MODE_SYNC);
	ck_assert(a->cluster.deadtime == 1.0);
	/* the strings are copies: the new configuration may go */
	config_free(b);
	ck_assert_str_eq(a->volumes[0].sb_hook, "/bin/sb");
	config_free(a);
}
END_TEST

START_TEST(adding_a_fence_hook_is_refused)
{
	/* whether a hook exists is part of the cluster decision from its start */
	struct hak_config *a = parse(PAIR("", "", ""));
	struct hak_config *b = parse(PAIR("", " fence-hook /usr/sbin/fence\n", ""));
	static struct reload_plan p;
	const struct reload_change *c;

	config_reload_diff(a, b, &p);
	ck_assert_uint_eq(p.n, 1);
	ck_assert_ptr_nonnull(c = find(&p, "cluster", "fence-hook"));
	ck_assert(!c->live);
	config_reload_diff(b, a, &p);
	ck_assert_uint_eq(p.n_refused, 1);
	config_free(a);
	config_free(b);
}
END_TEST

START_TEST(sections_added_or_renamed)
{
	struct hak_config *a = parse("volume db {\n backing /x\n nbd-socket /run/db.sock\n}\n");
	struct hak_config *b = parse("volume db {\n backing /x\n nbd-socket /run/db.sock\n}\n"
	                             "volume logs {\n backing /y\n nbd-socket /run/logs.sock\n}\n");
	struct hak_config *c2 = parse("volume db {\n backing /z\n nbd-socket /run/db.sock\n}\n");
	static struct reload_plan p;
	const struct reload_change *c;

	config_reload_diff(a, b, &p);
	ck_assert_uint_eq(p.n, 1);
	ck_assert_ptr_nonnull(c = find(&p, "volume sections", "(names)"));
	ck_assert(!c->live);
	ck_assert_str_eq(c->old_val, "db");
	ck_assert_str_eq(c->new_val, "db logs");
	/* a volume's backing store is no live change */
	config_reload_diff(a, c2, &p);
	ck_assert_ptr_nonnull(c = find(&p, "volume db", "backing"));
	ck_assert(!c->live);
	ck_assert_str_eq(c->new_val, "/z");
	config_free(a);
	config_free(b);
	config_free(c2);
}
END_TEST

START_TEST(groups_and_custom_keys)
{
	const char *g1 = PAIR("", "", "") "group pg {\n volume db\n resource ip {\n type vip\n"
	                                  " address 192.0.2.10/24\n interface eth0\n }\n}\n";
	const char *g2 = PAIR("", "", "") "group pg {\n volume db\n resource ip {\n type vip\n"
	                                  " address 192.0.2.11/24\n interface eth0\n }\n}\n";
	char t2[4096];
	struct hak_config *a = parse(g1), *b = parse(g2), *c3;
	static struct reload_plan p;
	const struct reload_change *c;

	config_reload_diff(a, b, &p);
	ck_assert_uint_eq(p.n, 1);
	ck_assert_ptr_nonnull(c = find(&p, "group pg resource ip", "address"));
	ck_assert(!c->live);
	/* a CUSTOM key: the heartbeat addresses, shown as written */
	snprintf(t2, sizeof(t2), "%s", g1);
	char *at = strstr(t2, "198.51.100.2:7790");
	ck_assert_ptr_nonnull(at);
	memcpy(at, "198.51.100.9", 12);
	c3 = parse(t2);
	config_reload_diff(a, c3, &p);
	ck_assert_uint_eq(p.n, 1);
	ck_assert_ptr_nonnull(c = find(&p, "node b", "heartbeat-address"));
	ck_assert_str_eq(c->old_val, "192.0.2.2:7790 198.51.100.2:7790");
	ck_assert_str_eq(c->new_val, "192.0.2.2:7790 198.51.100.9:7790");
	config_free(a);
	config_free(b);
	config_free(c3);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("config_reload");
	TCase *t = tcase_create("core");
	tcase_add_test(t, same_file_no_change);
	tcase_add_test(t, live_and_refused);
	tcase_add_test(t, adding_a_fence_hook_is_refused);
	tcase_add_test(t, sections_added_or_renamed);
	tcase_add_test(t, groups_and_custom_keys);
	suite_add_tcase(s, t);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
