/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for generation identifiers: the decision table row by row, symmetry over colliding
 * ids (exhaustive and random), the rotations chained the way the daemon uses them, and a model of
 * two nodes whose data is tracked block by block, driven through random failures.
 */
#include <check.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "meta/gen.h"

#define K  GEN_F_CONSISTENT
#define P  GEN_F_CRASHED_PRIMARY
#define KP (GEN_F_CONSISTENT | GEN_F_CRASHED_PRIMARY)

/* current, bitmap, history[0], history[1], flags */
#define GI(c, b, h0, h1, f)                                                                        \
	{                                                                                          \
		.current = (c), .bitmap = (b), .history = {(h0), (h1)}, .flags = (f)               \
	}

/* Readable ids: G is the generation both had; X/Y what each moved on to; Q, R, S older ones. */
enum {
	G = 0x6,
	X = 0x1a,
	X2 = 0x1b,
	X3 = 0x1c,
	X4 = 0x1d,
	Y = 0x2a,
	Q = 0x51,
	R = 0x52,
	S = 0x53,
	U = 0x99
};

/* Rule names whose mirror image is another rule; every other rule is its own mirror. */
static const char *const mirror_pairs[][2] = {
    {"self-fresh", "peer-fresh"},
    {"crashed-primary-self", "crashed-primary-peer"},
    {"bitmap-self", "bitmap-peer"},
    {"bitmap-self-crashed-peer", "bitmap-peer-crashed-self"},
    {"bitmap-self-crashed-self", "bitmap-peer-crashed-peer"},
    {"history-self", "history-peer"},
    {"missed-finish-self", "missed-finish-peer"},
    {"source-inconsistent-self", "source-inconsistent-peer"},
};

static const char *mirror_rule(const char *name)
{
	for (size_t i = 0; i < sizeof(mirror_pairs) / sizeof(mirror_pairs[0]); i++) {
		if (strcmp(name, mirror_pairs[i][0]) == 0)
			return mirror_pairs[i][1];
		if (strcmp(name, mirror_pairs[i][1]) == 0)
			return mirror_pairs[i][0];
	}
	return name;
}

/* Decide from both sides; both must give the expected (mirrored) decision and rule. */
static void check_pair(const struct gen_ids *l, const struct gen_ids *p, enum gen_decision want,
                       const char *want_rule, const char *where, int line)
{
	char lb[GEN_FORMAT_SIZE], pb[GEN_FORMAT_SIZE];
	int r = -1, rr = -1;
	enum gen_decision d = gen_decide(l, p, &r);
	enum gen_decision dd = gen_decide(p, l, &rr);

	gen_format(l, lb, sizeof(lb));
	gen_format(p, pb, sizeof(pb));
	ck_assert_msg(d == want && strcmp(gen_rule_name(r), want_rule) == 0,
	              "%s line %d: local {%s} peer {%s} gave %s by %s, expected %s by %s", where,
	              line, lb, pb, gen_decision_name(d), gen_rule_name(r), gen_decision_name(want),
	              want_rule);
	ck_assert_msg(dd == gen_decision_mirror(want) &&
	                  strcmp(gen_rule_name(rr), mirror_rule(want_rule)) == 0,
	              "%s line %d (seen from the peer): gave %s by %s, expected %s by %s", where,
	              line, gen_decision_name(dd), gen_rule_name(rr),
	              gen_decision_name(gen_decision_mirror(want)), mirror_rule(want_rule));
}

#define EXPECT(l, p, want, rule) check_pair(&(l), &(p), (want), (rule), __func__, __LINE__)

static int ids_equal(const struct gen_ids *a, const struct gen_ids *b)
{
	return a->current == b->current && a->bitmap == b->bitmap &&
	       a->history[0] == b->history[0] && a->history[1] == b->history[1];
}

/* ---------------------------------------------------------------------------------------------
 * The decision table.
 */
static const struct row {
	const char *what;
	struct gen_ids local, peer;
	enum gen_decision want;
	const char *rule;
} table[] = {
    /* a. both fresh */
    {"both never synced", GI(0, 0, 0, 0, 0), GI(0, 0, 0, 0, 0), GEN_NO_SYNC, "both-fresh"},
    {"both discarded (history kept)", GI(0, 0, X, G, 0), GI(0, 0, Y, G, 0), GEN_NO_SYNC,
     "both-fresh"},
    {"both fresh, stray flags", GI(0, 0, 0, 0, KP), GI(0, 0, 0, 0, K), GEN_NO_SYNC, "both-fresh"},
    /* b. one fresh */
    {"I am fresh", GI(0, 0, 0, 0, 0), GI(G, 0, 0, 0, K), GEN_FULL_TARGET, "self-fresh"},
    {"I discarded my data", GI(0, 0, Y, G, 0), GI(X, G, Q, 0, K), GEN_FULL_TARGET, "self-fresh"},
    {"fresh beats a matching bitmap", GI(0, G, 0, 0, 0), GI(G, 0, 0, 0, K), GEN_FULL_TARGET,
     "self-fresh"},
    {"peer is fresh", GI(G, 0, Q, R, K), GI(0, 0, 0, 0, 0), GEN_FULL_SOURCE, "peer-fresh"},
    {"peer fresh, I crashed", GI(G, 0, 0, 0, KP), GI(0, 0, 0, 0, 0), GEN_FULL_SOURCE, "peer-fresh"},
    {"fresh peer, I am inconsistent", GI(G, 0, 0, 0, 0), GI(0, 0, 0, 0, 0), GEN_INCONSISTENT_SOURCE,
     "source-inconsistent-self"},
    {"I am fresh, peer inconsistent", GI(0, 0, 0, 0, 0), GI(G, Q, 0, 0, 0), GEN_INCONSISTENT_SOURCE,
     "source-inconsistent-peer"},
    /* c. equal currents */
    {"in sync", GI(G, 0, 0, 0, K), GI(G, 0, 0, 0, K), GEN_NO_SYNC, "equal"},
    {"in sync with history", GI(G, 0, Q, R, K), GI(G, 0, Q, R, K), GEN_NO_SYNC, "equal"},
    {"in sync, histories differ", GI(G, 0, Q, R, K), GI(G, 0, S, 0, K), GEN_NO_SYNC, "equal"},
    {"source missed resync finish", GI(X, G, Q, 0, K), GI(X, 0, G, Q, K), GEN_NO_SYNC, "equal"},
    {"equal, both inconsistent", GI(G, 0, 0, 0, 0), GI(G, 0, 0, 0, 0), GEN_NO_SYNC, "equal"},
    {"equal, I crashed as primary", GI(G, 0, Q, 0, KP), GI(G, 0, Q, 0, K), GEN_FULL_SOURCE,
     "crashed-primary-self"},
    {"equal, peer crashed as primary", GI(G, 0, 0, 0, K), GI(G, 0, 0, 0, KP), GEN_FULL_TARGET,
     "crashed-primary-peer"},
    {"equal, peer crashed, I am inconsistent", GI(G, 0, 0, 0, 0), GI(G, 0, 0, 0, KP),
     GEN_FULL_TARGET, "crashed-primary-peer"},
    {"equal, both crashed as primary", GI(G, 0, 0, 0, KP), GI(G, 0, 0, 0, KP), GEN_SPLIT_BRAIN,
     "crashed-primary-both"},
    {"equal, I crashed but am inconsistent", GI(G, 0, 0, 0, P), GI(G, 0, 0, 0, K),
     GEN_INCONSISTENT_SOURCE, "source-inconsistent-self"},
    /* d. my bitmap is the peer's current */
    {"peer missed my writes", GI(X, G, 0, 0, K), GI(G, 0, 0, 0, K), GEN_SYNC_SOURCE, "bitmap-self"},
    {"peer missed my writes, with history", GI(X, G, Q, R, K), GI(G, 0, Q, R, K), GEN_SYNC_SOURCE,
     "bitmap-self"},
    {"several generations since", GI(X3, G, X2, X, K), GI(G, 0, Q, 0, K), GEN_SYNC_SOURCE,
     "bitmap-self"},
    {"peer is an interrupted sync target", GI(X, G, 0, 0, K), GI(G, 0, 0, 0, 0), GEN_SYNC_SOURCE,
     "bitmap-self"},
    {"peer has a stale bitmap of its own", GI(X, G, 0, 0, K), GI(G, Q, 0, 0, K), GEN_SYNC_SOURCE,
     "bitmap-self"},
    {"bitmap-self beats split-brain-bitmap", GI(X, G, 0, 0, K), GI(G, G, 0, 0, K), GEN_SYNC_SOURCE,
     "bitmap-self"},
    {"bitmap-self beats history-peer", GI(X, G, 0, 0, K), GI(G, 0, X, 0, K), GEN_SYNC_SOURCE,
     "bitmap-self"},
    {"peer crashed at the generation I left", GI(X, G, 0, 0, K), GI(G, 0, 0, 0, KP),
     GEN_FULL_SOURCE, "bitmap-self-crashed-peer"},
    {"I crashed after moving on", GI(X, G, 0, 0, KP), GI(G, 0, 0, 0, K), GEN_FULL_SOURCE,
     "bitmap-self-crashed-self"},
    {"both crashed, my bitmap matches", GI(X, G, 0, 0, KP), GI(G, 0, 0, 0, KP), GEN_FULL_SOURCE,
     "bitmap-self-crashed-peer"},
    {"my bitmap matches, I am inconsistent", GI(X, G, 0, 0, 0), GI(G, 0, 0, 0, K),
     GEN_INCONSISTENT_SOURCE, "source-inconsistent-self"},
    /* e. the peer's bitmap is my current */
    {"I missed the peer's writes", GI(G, 0, 0, 0, K), GI(X, G, 0, 0, K), GEN_SYNC_TARGET,
     "bitmap-peer"},
    {"I am an interrupted sync target", GI(G, 0, Q, 0, 0), GI(X, G, Q, 0, K), GEN_SYNC_TARGET,
     "bitmap-peer"},
    {"I crashed, peer moved on", GI(G, 0, 0, 0, KP), GI(Y, G, 0, 0, K), GEN_FULL_TARGET,
     "bitmap-peer-crashed-self"},
    {"peer crashed after moving on", GI(G, 0, 0, 0, K), GI(Y, G, 0, 0, KP), GEN_FULL_TARGET,
     "bitmap-peer-crashed-peer"},
    {"both crashed, peer bitmap matches", GI(G, 0, 0, 0, KP), GI(Y, G, 0, 0, KP), GEN_FULL_TARGET,
     "bitmap-peer-crashed-self"},
    {"peer bitmap matches, peer inconsistent", GI(G, 0, 0, 0, K), GI(Y, G, 0, 0, 0),
     GEN_INCONSISTENT_SOURCE, "source-inconsistent-peer"},
    /* d and e at once: only with colliding ids */
    {"bitmaps point at each other", GI(X, Y, 0, 0, K), GI(Y, X, 0, 0, K), GEN_SPLIT_BRAIN,
     "bitmap-cycle"},
    {"bitmaps point at each other, crashed", GI(X, Y, 0, 0, KP), GI(Y, X, 0, 0, K), GEN_SPLIT_BRAIN,
     "bitmap-cycle"},
    /* f. both moved on from the same generation */
    {"both promoted while apart", GI(X, G, 0, 0, K), GI(Y, G, 0, 0, K), GEN_SPLIT_BRAIN,
     "split-brain-bitmap"},
    {"both apart, different histories", GI(X2, G, X, 0, K), GI(Y, G, Q, R, K), GEN_SPLIT_BRAIN,
     "split-brain-bitmap"},
    {"both apart, one crashed", GI(X, G, 0, 0, KP), GI(Y, G, 0, 0, K), GEN_SPLIT_BRAIN,
     "split-brain-bitmap"},
    {"both apart, both inconsistent", GI(X, G, 0, 0, 0), GI(Y, G, 0, 0, 0), GEN_SPLIT_BRAIN,
     "split-brain-bitmap"},
    /* f'. the peer finished a resync from me, I crashed before my own finishing step */
    {"missed finish, then moved on once", GI(X2, G, X, Q, K), GI(X, 0, G, Q, K), GEN_FULL_SOURCE,
     "missed-finish-self"},
    {"missed finish, moved on beyond history", GI(X4, G, X3, X2, K), GI(X, 0, G, Q, K),
     GEN_FULL_SOURCE, "missed-finish-self"},
    {"missed finish, I crashed as primary", GI(X4, G, X3, X2, KP), GI(X, 0, G, 0, K),
     GEN_FULL_SOURCE, "missed-finish-self"},
    {"missed finish, peer crashed as primary", GI(X2, G, X, 0, K), GI(X, 0, G, 0, KP),
     GEN_FULL_SOURCE, "missed-finish-self"},
    {"the peer missed its finish", GI(X, 0, G, 0, K), GI(X3, G, X2, X, K), GEN_FULL_TARGET,
     "missed-finish-peer"},
    {"the peer missed its finish, is inconsistent", GI(X, 0, G, 0, K), GI(X3, G, X2, X, 0),
     GEN_INCONSISTENT_SOURCE, "source-inconsistent-peer"},
    /* g. a current in the other's history */
    {"peer missed the end of my resync", GI(X, 0, G, Q, K), GI(G, 0, Q, 0, 0), GEN_FULL_SOURCE,
     "history-self"},
    {"peer is two generations behind", GI(X2, 0, X, G, K), GI(G, 0, 0, 0, K), GEN_FULL_SOURCE,
     "history-self"},
    {"peer in my history and crashed", GI(X, 0, G, 0, K), GI(G, 0, 0, 0, KP), GEN_FULL_SOURCE,
     "history-self"},
    {"history beats a shared ancestor", GI(X, 0, G, Q, K), GI(G, 0, Q, 0, K), GEN_FULL_SOURCE,
     "history-self"},
    {"I missed the end of the peer's resync", GI(G, 0, Q, 0, 0), GI(X, 0, G, Q, K), GEN_FULL_TARGET,
     "history-peer"},
    {"I am in the peer's history[1]", GI(G, 0, 0, 0, K), GI(Y, Q, R, G, K), GEN_FULL_TARGET,
     "history-peer"},
    {"history match, I am inconsistent source", GI(X, 0, G, 0, 0), GI(G, 0, 0, 0, K),
     GEN_INCONSISTENT_SOURCE, "source-inconsistent-self"},
    {"currents in each other's history", GI(X, 0, Y, 0, K), GI(Y, 0, X, 0, K), GEN_SPLIT_BRAIN,
     "history-cycle"},
    /* h. a common ancestor, both diverged */
    {"my bitmap in peer history[1]", GI(X, G, 0, 0, K), GI(Y, Q, R, G, K), GEN_SPLIT_BRAIN,
     "split-brain-common-ancestor"},
    {"peer finished from me, then moved on", GI(X2, G, X, 0, K), GI(Y, X, G, 0, K), GEN_SPLIT_BRAIN,
     "split-brain-common-ancestor"},
    {"shared history[0]", GI(X, 0, G, 0, K), GI(Y, 0, G, 0, K), GEN_SPLIT_BRAIN,
     "split-brain-common-ancestor"},
    {"shared history[1] vs history[0]", GI(X, 0, Q, G, K), GI(Y, R, G, 0, K), GEN_SPLIT_BRAIN,
     "split-brain-common-ancestor"},
    {"peer bitmap in my history[1]", GI(X, 0, Q, G, K), GI(Y, G, 0, 0, K), GEN_SPLIT_BRAIN,
     "split-brain-common-ancestor"},
    {"common ancestor, both crashed", GI(X, 0, G, 0, KP), GI(Y, 0, R, G, KP), GEN_SPLIT_BRAIN,
     "split-brain-common-ancestor"},
    /* i. unrelated */
    {"nothing shared", GI(X, 0, 0, 0, K), GI(Y, 0, 0, 0, K), GEN_UNRELATED, "unrelated"},
    {"zeros are not a shared id", GI(X, 0, 0, 0, K), GI(Y, 0, 0, 0, KP), GEN_UNRELATED,
     "unrelated"},
    {"full but disjoint", GI(X, Q, R, S, K), GI(Y, G, X2, X3, K), GEN_UNRELATED, "unrelated"},
    {"ids only repeat within one side", GI(X, Q, Q, Q, K), GI(Y, R, R, Y, K), GEN_UNRELATED,
     "unrelated"},
    {"unrelated and inconsistent", GI(X, 0, 0, 0, 0), GI(U, 0, 0, 0, 0), GEN_UNRELATED,
     "unrelated"},
};

/* Returns 1 and describes the row in msg when either side's decision or rule is not the expected.
 */
static int row_wrong(const struct row *t, char *msg, size_t len)
{
	char lb[GEN_FORMAT_SIZE], pb[GEN_FORMAT_SIZE];
	int r = -1, rr = -1;
	enum gen_decision d = gen_decide(&t->local, &t->peer, &r);
	enum gen_decision dd = gen_decide(&t->peer, &t->local, &rr);

	if (d == t->want && strcmp(gen_rule_name(r), t->rule) == 0 &&
	    dd == gen_decision_mirror(t->want) &&
	    strcmp(gen_rule_name(rr), mirror_rule(t->rule)) == 0 && gen_rule_decision(r) == d &&
	    gen_decide(&t->local, &t->peer, NULL) == d)
		return 0;
	snprintf(msg, len,
	         "\n  \"%s\": local {%s} peer {%s}: %s by %s (mirror %s by %s), expected %s by %s",
	         t->what, gen_format(&t->local, lb, sizeof(lb)),
	         gen_format(&t->peer, pb, sizeof(pb)), gen_decision_name(d), gen_rule_name(r),
	         gen_decision_name(dd), gen_rule_name(rr), gen_decision_name(t->want), t->rule);
	return 1;
}

/* Every row, from both sides; all wrong rows are listed at once. */
START_TEST(decision_table)
{
	static char report[16384];
	size_t n = sizeof(table) / sizeof(table[0]), used = 0;
	int wrong = 0;

	report[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		char msg[512];
		if (!row_wrong(&table[i], msg, sizeof(msg)))
			continue;
		wrong++;
		if (used + strlen(msg) + 1 < sizeof(report)) {
			strcpy(report + used, msg);
			used += strlen(msg);
		}
	}
	ck_assert_msg(wrong == 0, "%d of %zu table rows are wrong:%s", wrong, n, report);
}
END_TEST

/* Every rule appears in the table, so every rule has a readable, reviewed example. */
START_TEST(table_covers_every_rule)
{
	int seen[GEN_RULE_COUNT] = {0};
	size_t n = sizeof(table) / sizeof(table[0]);

	ck_assert_uint_ge(n, 40);
	for (size_t i = 0; i < n; i++) {
		int r = -1, rr = -1;
		gen_decide(&table[i].local, &table[i].peer, &r);
		gen_decide(&table[i].peer, &table[i].local, &rr);
		seen[r] = seen[rr] = 1;
	}
	for (int r = 0; r < GEN_RULE_COUNT; r++)
		ck_assert_msg(seen[r], "Rule %s has no row in the table.", gen_rule_name(r));
}
END_TEST

START_TEST(names)
{
	for (int r = 0; r < GEN_RULE_COUNT; r++) {
		ck_assert_str_ne(gen_rule_name(r), "unknown");
		ck_assert_int_lt(gen_rule_decision(r), GEN_DECISION_COUNT);
		for (int o = 0; o < r; o++)
			ck_assert_str_ne(gen_rule_name(r), gen_rule_name(o));
	}
	ck_assert_str_eq(gen_rule_name(-1), "unknown");
	ck_assert_str_eq(gen_rule_name(GEN_RULE_COUNT), "unknown");
	ck_assert_int_eq(gen_rule_decision(GEN_RULE_COUNT), GEN_DECISION_COUNT);
	ck_assert_int_eq(gen_rule_decision(-3), GEN_DECISION_COUNT);
	ck_assert_str_eq(gen_decision_name(GEN_NO_SYNC), "no-sync");
	ck_assert_str_eq(gen_decision_name(GEN_SYNC_SOURCE), "sync-source");
	ck_assert_str_eq(gen_decision_name(GEN_SYNC_TARGET), "sync-target");
	ck_assert_str_eq(gen_decision_name(GEN_FULL_SOURCE), "full-source");
	ck_assert_str_eq(gen_decision_name(GEN_FULL_TARGET), "full-target");
	ck_assert_str_eq(gen_decision_name(GEN_SPLIT_BRAIN), "split-brain");
	ck_assert_str_eq(gen_decision_name(GEN_UNRELATED), "unrelated");
	ck_assert_str_eq(gen_decision_name(GEN_INCONSISTENT_SOURCE), "inconsistent-source");
	ck_assert_str_eq(gen_decision_name(GEN_DECISION_COUNT), "unknown");
	ck_assert_str_eq(gen_decision_name((enum gen_decision) - 1), "unknown");
	for (int d = 0; d < GEN_DECISION_COUNT; d++)
		ck_assert_int_eq(gen_decision_mirror(gen_decision_mirror(d)), d);
	ck_assert_int_eq(gen_decision_mirror(GEN_SYNC_SOURCE), GEN_SYNC_TARGET);
	ck_assert_int_eq(gen_decision_mirror(GEN_FULL_TARGET), GEN_FULL_SOURCE);
	ck_assert_int_eq(gen_decision_mirror(GEN_SPLIT_BRAIN), GEN_SPLIT_BRAIN);
}
END_TEST

START_TEST(format)
{
	struct gen_ids g = GI(0x0123456789abcdefULL, 0xA, 0, UINT64_MAX, KP);
	char buf[GEN_FORMAT_SIZE], small[12];

	ck_assert_ptr_eq(gen_format(&g, buf, sizeof(buf)), buf);
	ck_assert_str_eq(buf, "C:0123456789ABCDEF B:000000000000000A H:0000000000000000:"
	                      "FFFFFFFFFFFFFFFF F:CP");
	g.flags = 0;
	gen_format(&g, buf, sizeof(buf));
	ck_assert_str_eq(buf + strlen(buf) - 4, " F:-");
	g.flags = P;
	gen_format(&g, buf, sizeof(buf));
	ck_assert_str_eq(buf + strlen(buf) - 4, " F:P");
	gen_format(&g, small, sizeof(small));
	ck_assert_str_eq(small, "C:012345678");
	ck_assert_ptr_null(gen_format(&g, NULL, 0));
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Symmetry: the peer's view is the mirror image, for any ids, including colliding ones.
 */
static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* mirror[r]: the rule the peer reports when this side reports r (from the name pairs above). */
static void mirror_ids(int mirror[GEN_RULE_COUNT])
{
	for (int r = 0; r < GEN_RULE_COUNT; r++) {
		mirror[r] = -1;
		for (int o = 0; o < GEN_RULE_COUNT; o++)
			if (strcmp(mirror_rule(gen_rule_name(r)), gen_rule_name(o)) == 0)
				mirror[r] = o;
		ck_assert_int_ge(mirror[r], 0);
	}
}

/* Returns the rule seen from l, or -1 after describing an asymmetric pair in msg. */
static int symmetric_rule(const struct gen_ids *l, const struct gen_ids *p,
                          const int mirror[GEN_RULE_COUNT], char *msg, size_t len)
{
	int r = -1, rr = -1;
	enum gen_decision d = gen_decide(l, p, &r), dd = gen_decide(p, l, &rr);
	char lb[GEN_FORMAT_SIZE], pb[GEN_FORMAT_SIZE];

	if (dd == gen_decision_mirror(d) && rr == mirror[r] && gen_rule_decision(r) == d)
		return r;
	snprintf(msg, len, "local {%s} peer {%s}: %s by %s, mirror %s by %s",
	         gen_format(l, lb, sizeof(lb)), gen_format(p, pb, sizeof(pb)), gen_decision_name(d),
	         gen_rule_name(r), gen_decision_name(dd), gen_rule_name(rr));
	return -1;
}

/* Every tuple over ids {0, 1, 2, 3} and every flag combination: 4^8 * 16 pairs. */
START_TEST(symmetry_exhaustive)
{
	static const uint64_t pool[4] = {0, 0x11, 0x22, 0x33};
	int hit[GEN_RULE_COUNT] = {0}, mirror[GEN_RULE_COUNT];
	char msg[512];
	long pairs = 0;

	mirror_ids(mirror);
	for (unsigned v = 0; v < (1u << 16); v++) {
		for (unsigned f = 0; f < 16; f++) {
			struct gen_ids l = GI(pool[v & 3], pool[(v >> 2) & 3], pool[(v >> 4) & 3],
			                      pool[(v >> 6) & 3], f & 3);
			struct gen_ids p = GI(pool[(v >> 8) & 3], pool[(v >> 10) & 3],
			                      pool[(v >> 12) & 3], pool[(v >> 14) & 3], f >> 2);
			int r = symmetric_rule(&l, &p, mirror, msg, sizeof(msg));

			if (r < 0)
				ck_abort_msg("Asymmetric decision: %s", msg);
			hit[r]++;
			pairs++;
		}
	}
	ck_assert_int_eq(pairs, 1L << 20);
	for (int r = 0; r < GEN_RULE_COUNT; r++)
		ck_assert_msg(hit[r] > 0, "Rule %s never fired in the exhaustive sweep.",
		              gen_rule_name(r));
}
END_TEST

/* Random tuples from a pool of 6 ids (so collisions are frequent), with random flags. */
START_TEST(symmetry_random)
{
	static const uint64_t pool[6] = {0, 0x11, 0x22, 0x33, 0xdeadbeefcafef00dULL, UINT64_MAX};
	uint64_t seed = 0x9e3779b97f4a7c15ULL;
	int mirror[GEN_RULE_COUNT];
	char msg[512];

	mirror_ids(mirror);
	for (int i = 0; i < 300000; i++) {
		uint64_t v = xorshift(&seed);
		struct gen_ids l = GI(pool[v % 6], pool[(v >> 8) % 6], pool[(v >> 16) % 6],
		                      pool[(v >> 24) % 6], (v >> 32) & 3);
		struct gen_ids p = GI(pool[(v >> 34) % 6], pool[(v >> 42) % 6], pool[(v >> 50) % 6],
		                      pool[(v >> 58) % 6], (v >> 62) & 3);

		if (symmetric_rule(&l, &p, mirror, msg, sizeof(msg)) < 0)
			ck_abort_msg("Asymmetric decision at iteration %d: %s", i, msg);
	}
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Rotation helpers as properties over random id sets.
 */
static struct gen_ids random_ids(uint64_t *seed, int nonfresh)
{
	static const uint64_t pool[5] = {0, 0x11, 0x22, 0x33, 0x44};
	uint64_t v = xorshift(seed);
	struct gen_ids g = GI(pool[v % 5], pool[(v >> 8) % 5], pool[(v >> 16) % 5],
	                      pool[(v >> 24) % 5], (v >> 32) & 3);

	if (nonfresh && g.current == 0)
		g.current = 0x55;
	return g;
}

START_TEST(discard_local_property)
{
	uint64_t seed = 12345;

	for (int i = 0; i < 20000; i++) {
		struct gen_ids l = random_ids(&seed, 0), p = random_ids(&seed, 1), before = l;

		gen_discard_local(&l);
		ck_assert_uint_eq(l.current, 0);
		ck_assert_uint_eq(l.bitmap, 0);
		ck_assert_uint_eq(l.flags & KP, 0);
		/* The old current is kept for the record. */
		if (before.current != 0)
			ck_assert_uint_eq(l.history[0], before.current);
		p.flags |= K;
		EXPECT(l, p, GEN_FULL_TARGET, "self-fresh");
		p.flags &= ~K;
		EXPECT(l, p, GEN_INCONSISTENT_SOURCE, "source-inconsistent-peer");
	}
	/* The record: current, then bitmap, newest first. */
	struct gen_ids g = GI(X, G, Q, R, KP);
	gen_discard_local(&g);
	ck_assert(ids_equal(&g, &(struct gen_ids)GI(0, 0, X, G, 0)));
	g = (struct gen_ids)GI(X, 0, Q, R, K);
	gen_discard_local(&g);
	ck_assert(ids_equal(&g, &(struct gen_ids)GI(0, 0, X, Q, 0)));
	/* Discarding twice keeps the same record. */
	gen_discard_local(&g);
	ck_assert(ids_equal(&g, &(struct gen_ids)GI(0, 0, X, Q, 0)));
}
END_TEST

START_TEST(resync_done_property)
{
	uint64_t seed = 777;

	for (int i = 0; i < 20000; i++) {
		struct gen_ids s = random_ids(&seed, 1), t = random_ids(&seed, 0);
		struct gen_ids s_before = s, t2 = random_ids(&seed, 0);

		s.flags |= K;
		gen_resync_done_target(&t, &s); /* from the snapshot before the source's step */
		gen_resync_done_source(&s);
		gen_resync_done_target(&t2, &s); /* from the snapshot after it */
		ck_assert(ids_equal(&t, &s));
		ck_assert(ids_equal(&t2, &s));
		ck_assert_uint_eq(s.bitmap, 0);
		ck_assert_uint_eq(s.current, s_before.current);
		ck_assert_uint_eq(t.flags & KP, K);
		ck_assert_uint_eq(s.flags & P, 0);
		EXPECT(s, t, GEN_NO_SYNC, "equal");
		/* The bitmap generation went to history. */
		if (s_before.bitmap != 0) {
			ck_assert_uint_eq(s.history[0], s_before.bitmap);
			ck_assert_uint_eq(s.history[1], s_before.history[0]);
		} else {
			ck_assert_uint_eq(s.history[0], s_before.history[0]);
		}
	}
}
END_TEST

START_TEST(new_current_rotation)
{
	struct gen_ids g = GI(G, 0, Q, R, K);

	gen_new_current(&g, X);
	ck_assert(ids_equal(&g, &(struct gen_ids)GI(X, G, Q, R, 0)));
	gen_new_current(&g, X2);
	ck_assert(ids_equal(&g, &(struct gen_ids)GI(X2, G, X, Q, 0)));
	gen_new_current(&g, X3);
	ck_assert(ids_equal(&g, &(struct gen_ids)GI(X3, G, X2, X, 0)));
	ck_assert_uint_eq(g.flags, K); /* flags are not the rotation's business */
	/* A forced promotion of a fresh disk: nothing the peer has, so no bitmap. */
	struct gen_ids f = GI(0, 0, 0, 0, 0);
	gen_new_current(&f, X);
	ck_assert(ids_equal(&f, &(struct gen_ids)GI(X, 0, 0, 0, 0)));
	/* After a discard (current 0, history kept) a forced start is a new lineage. */
	struct gen_ids d = GI(0, 0, Y, G, 0);
	gen_new_current(&d, X);
	ck_assert(ids_equal(&d, &(struct gen_ids)GI(X, 0, 0, 0, 0)));
}
END_TEST

START_TEST(new_current_zero_aborts)
{
	struct gen_ids g = GI(G, 0, 0, 0, K);
	gen_new_current(&g, 0);
}
END_TEST

START_TEST(new_current_reuse_aborts)
{
	struct gen_ids g = GI(X, G, Q, 0, K);
	gen_new_current(&g, Q);
}
END_TEST

START_TEST(done_target_fresh_source_aborts)
{
	struct gen_ids g = GI(G, 0, 0, 0, K), s = GI(0, 0, 0, 0, K);
	gen_resync_done_target(&g, &s);
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * Scenarios, chaining rotations the way the daemon will.
 */

/* Resync from s to t to completion, target first (the caller contract). */
static void finish_resync(struct gen_ids *s, struct gen_ids *t)
{
	gen_resync_done_target(t, s);
	gen_resync_done_source(s);
	ck_assert(ids_equal(s, t));
}

/* (1) Secondary dies, primary writes on; bitmap resync back; then in sync. */
START_TEST(scenario_secondary_dies)
{
	struct gen_ids a = GI(G, 0, Q, 0, K), b = GI(G, 0, Q, 0, K);

	EXPECT(a, b, GEN_NO_SYNC, "equal");
	gen_new_current(&a, X); /* primary a loses its peer */
	EXPECT(a, b, GEN_SYNC_SOURCE, "bitmap-self");
	b.flags &= ~K; /* b starts receiving */
	EXPECT(a, b, GEN_SYNC_SOURCE, "bitmap-self");
	finish_resync(&a, &b);
	ck_assert(ids_equal(&a, &(struct gen_ids)GI(X, 0, G, Q, 0)));
	ck_assert_uint_eq(b.flags, K);
	EXPECT(a, b, GEN_NO_SYNC, "equal");
}
END_TEST

/* (2) The primary crashes, the secondary takes over; the old primary must be overwritten. */
START_TEST(scenario_primary_crashes)
{
	struct gen_ids a = GI(G, 0, 0, 0, K), b = GI(G, 0, 0, 0, K);

	a.flags |= P; /* a was primary and went down uncleanly */
	/* If a comes back before anyone took over, its tail must reach b. */
	EXPECT(a, b, GEN_FULL_SOURCE, "crashed-primary-self");
	gen_new_current(&b, Y); /* b is promoted while a is away */
	EXPECT(a, b, GEN_FULL_TARGET, "bitmap-peer-crashed-self");
	finish_resync(&b, &a);
	ck_assert_uint_eq(a.flags, K);
	EXPECT(a, b, GEN_NO_SYNC, "equal");

	/* Crashed, came back alone, was promoted again: its old tail is still unsynced. */
	struct gen_ids c = GI(G, 0, 0, 0, KP), d = GI(G, 0, 0, 0, K);
	gen_new_current(&c, X);
	EXPECT(c, d, GEN_FULL_SOURCE, "bitmap-self-crashed-self");
	finish_resync(&c, &d);
	ck_assert_uint_eq(c.flags, K);
	EXPECT(c, d, GEN_NO_SYNC, "equal");
}
END_TEST

/* (3) Partition, both promote and write: split brain until one side discards. */
START_TEST(scenario_split_brain)
{
	struct gen_ids a = GI(G, 0, Q, 0, K), b = GI(G, 0, Q, 0, K);

	gen_new_current(&a, X); /* primary a loses its peer */
	gen_new_current(&b, Y); /* b is promoted on its side */
	EXPECT(a, b, GEN_SPLIT_BRAIN, "split-brain-bitmap");
	gen_new_current(&a, X2); /* more cycles on one side do not hide it */
	gen_new_current(&a, X3);
	EXPECT(a, b, GEN_SPLIT_BRAIN, "split-brain-bitmap");
	b.flags |= P; /* nor does a crash */
	EXPECT(a, b, GEN_SPLIT_BRAIN, "split-brain-bitmap");

	gen_discard_local(&b);
	EXPECT(b, a, GEN_FULL_TARGET, "self-fresh");
	EXPECT(a, b, GEN_FULL_SOURCE, "peer-fresh");
	/* Forcing the discarded side primary instead starts a lineage of its own. */
	struct gen_ids b2 = b;
	gen_new_current(&b2, U);
	b2.flags |= K;
	ck_assert(ids_equal(&b2, &(struct gen_ids)GI(U, 0, 0, 0, 0)));
	EXPECT(a, b2, GEN_UNRELATED, "unrelated");
	finish_resync(&a, &b);
	EXPECT(a, b, GEN_NO_SYNC, "equal");
}
END_TEST

/* (4) Repeated disconnect cycles, interrupted resyncs, role swaps, missed finishes. */
START_TEST(scenario_repeated_cycles)
{
	struct gen_ids a = GI(G, 0, 0, 0, K), b = GI(G, 0, 0, 0, K);
	uint64_t id = 0x100;

	/* Completed cycles: each starts from a clean bitmap. */
	for (int i = 0; i < 5; i++) {
		gen_new_current(&a, ++id);
		ck_assert_uint_eq(a.bitmap, b.current);
		EXPECT(a, b, GEN_SYNC_SOURCE, "bitmap-self");
		finish_resync(&a, &b);
		EXPECT(a, b, GEN_NO_SYNC, "equal");
	}
	/* Interrupted cycles: the bitmap keeps naming b's generation while history overflows. */
	uint64_t bgen = b.current;
	for (int i = 0; i < 4; i++) {
		gen_new_current(&a, ++id);
		b.flags &= ~K; /* a resync started and was cut */
		EXPECT(a, b, GEN_SYNC_SOURCE, "bitmap-self");
	}
	ck_assert_uint_eq(a.bitmap, bgen);
	finish_resync(&a, &b);
	EXPECT(a, b, GEN_NO_SYNC, "equal");

	/* Roles swap while connected (no new generation), then a dies: b is now the source. */
	gen_new_current(&b, ++id);
	EXPECT(a, b, GEN_SYNC_TARGET, "bitmap-peer");
	finish_resync(&b, &a);

	/* The source missed its final step: equal currents, and the stale bitmap is dropped. */
	gen_new_current(&a, ++id);
	gen_resync_done_target(&b, &a);
	EXPECT(a, b, GEN_NO_SYNC, "equal");
	ck_assert_uint_ne(a.bitmap, 0);
	/* Had it moved on before meeting the peer again, any number of times: still found. */
	struct gen_ids a2 = a, b2 = b;
	for (int i = 0; i < 4; i++) {
		gen_new_current(&a2, ++id);
		EXPECT(a2, b, GEN_FULL_SOURCE, "missed-finish-self");
	}
	/* Unless the peer moved on as well: then both diverged. */
	gen_new_current(&b2, ++id);
	EXPECT(a2, b2, GEN_SPLIT_BRAIN, "split-brain-common-ancestor");
	gen_resync_done_source(&a);
	ck_assert(ids_equal(&a, &b));

	/* The target missed its final step: the source's history still finds it. */
	gen_new_current(&a, ++id);
	uint64_t stale = b.current;
	gen_resync_done_source(&a);
	ck_assert_uint_eq(b.current, stale);
	EXPECT(a, b, GEN_FULL_SOURCE, "history-self");
	gen_new_current(&a, ++id); /* and a moves on once more before b is back */
	EXPECT(a, b, GEN_FULL_SOURCE, "history-self");
	finish_resync(&a, &b);
	EXPECT(a, b, GEN_NO_SYNC, "equal");
}
END_TEST

/* (5) Blank creation: both sides created with the same generation. */
START_TEST(scenario_blank_creation)
{
	struct gen_ids a = GI(0, 0, 0, 0, 0), b = GI(0, 0, 0, 0, 0);

	EXPECT(a, b, GEN_NO_SYNC, "both-fresh");
	/* Operator forces a primary: a full initial sync follows. */
	gen_new_current(&a, X);
	a.flags |= K;
	EXPECT(a, b, GEN_FULL_SOURCE, "peer-fresh");
	finish_resync(&a, &b);
	EXPECT(a, b, GEN_NO_SYNC, "equal");
	/* Or both are created with the same id (known-blank disks): nothing to sync. */
	struct gen_ids c = GI(G, 0, 0, 0, K), d = GI(G, 0, 0, 0, K);
	EXPECT(c, d, GEN_NO_SYNC, "equal");
}
END_TEST

/* (6) Two volumes that never shared data. */
START_TEST(scenario_unrelated)
{
	struct gen_ids a = GI(0, 0, 0, 0, K), b = GI(0, 0, 0, 0, K);
	uint64_t id = 0x100;

	gen_new_current(&a, 0xa0);
	gen_new_current(&b, 0xb0);
	EXPECT(a, b, GEN_UNRELATED, "unrelated");
	for (int i = 0; i < 3; i++) {
		gen_new_current(&a, ++id);
		gen_new_current(&b, id + 0x1000);
		EXPECT(a, b, GEN_UNRELATED, "unrelated");
	}
}
END_TEST

/* ---------------------------------------------------------------------------------------------
 * A model of two nodes. Each block of a tiny volume holds the id of the write that last touched
 * it; the daemon's use of the ids (new generation on promotion or peer loss, crashed-primary on
 * an unclean primary stop, resync helpers) is replayed through random failures. On every connect
 * the model checks: both sides agree; no acknowledged write is lost by the chosen direction; a
 * bitmap resync (union of both dirty bitmaps) really makes the copies equal; no-sync only when
 * they are; split brain exactly when both sides started a generation since they were last in
 * sync. Interrupted resyncs, a crash between the two finishing steps, in-flight writes lost with
 * a crashing primary and discard-local resolution are all part of the walk.
 */
#define NB   4   /* blocks in the modelled volume */
#define MAXW 512 /* write ids per walk */
#ifndef MODEL_WALKS
#define MODEL_WALKS 6000
#endif
#ifndef MODEL_STEPS
#define MODEL_STEPS 300
#endif
#ifndef MODEL_SEED
#define MODEL_SEED 0x2545f4914f6cdd1dULL
#endif

struct mnode {
	struct gen_ids g;
	int up, primary, diverged;
	unsigned data[NB]; /* id of the last write to each block; 0 = never written */
	unsigned dirty;    /* blocks written since the bitmap generation was recorded */
	uint64_t seen[MAXW / 64];
};

struct model {
	struct mnode n[2];
	int connected, no_interrupt;
	uint64_t acked[MAXW / 64];
	unsigned next_write;
	uint64_t next_id, rng;
	size_t tlen;
	char trace[32768];
	char fail[512];
	long decisions[GEN_DECISION_COUNT];
	long rules[GEN_RULE_COUNT];
};

static void mtrace(struct model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void mtrace(struct model *m, const char *fmt, ...)
{
	va_list ap;
	if (m->tlen + 256 > sizeof(m->trace))
		m->tlen = 0; /* only the tail of a long walk matters */
	va_start(ap, fmt);
	int n = vsnprintf(m->trace + m->tlen, sizeof(m->trace) - m->tlen, fmt, ap);
	va_end(ap);
	if (n > 0)
		m->tlen += (size_t)n < sizeof(m->trace) - m->tlen ? (size_t)n : 0;
}

static void mfail(struct model *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void mfail(struct model *m, const char *fmt, ...)
{
	va_list ap;
	if (m->fail[0])
		return;
	va_start(ap, fmt);
	vsnprintf(m->fail, sizeof(m->fail), fmt, ap);
	va_end(ap);
}

static unsigned mrand(struct model *m, unsigned n)
{
	return (unsigned)(xorshift(&m->rng) >> 11) % n;
}

static void set_bit64(uint64_t *s, unsigned w)
{
	s[w / 64] |= 1ULL << (w % 64);
}

static int test_bit64(const uint64_t *s, unsigned w)
{
	return (s[w / 64] >> (w % 64)) & 1;
}

static void model_new_gen(struct model *m, int i)
{
	char b[GEN_FORMAT_SIZE];
	gen_new_current(&m->n[i].g, ++m->next_id);
	m->n[i].diverged = 1;
	mtrace(m, "  node %d new generation: %s\n", i, gen_format(&m->n[i].g, b, sizeof(b)));
}

/* The link is gone: every primary still running starts a generation the peer will not see. */
static void model_disconnect(struct model *m)
{
	if (!m->connected)
		return;
	m->connected = 0;
	for (int i = 0; i < 2; i++)
		if (m->n[i].up && m->n[i].primary)
			model_new_gen(m, i);
}

static void model_crash(struct model *m, int i)
{
	struct mnode *n = &m->n[i];
	mtrace(m, "node %d crashes%s\n", i, n->primary ? " as primary" : "");
	if (n->primary)
		n->g.flags |= P;
	n->primary = 0;
	n->up = 0;
	model_disconnect(m);
}

static void model_write(struct model *m, int i, int acked)
{
	unsigned w = ++m->next_write, b = mrand(m, NB);
	struct mnode *n = &m->n[i], *o = &m->n[1 - i];

	n->data[b] = w;
	set_bit64(n->seen, w);
	if (acked)
		set_bit64(m->acked, w);
	if (m->connected && acked) {
		o->data[b] = w;
		set_bit64(o->seen, w);
	} else if (!m->connected) {
		n->dirty |= 1u << b;
	}
	mtrace(m, "node %d writes w%u to block %u%s\n", i, w, b, acked ? "" : " (in flight)");
}

static void model_copy(struct mnode *s, struct mnode *t, unsigned mask)
{
	for (unsigned b = 0; b < NB; b++) {
		if (!(mask & (1u << b)))
			continue;
		t->data[b] = s->data[b];
		if (s->data[b])
			set_bit64(t->seen, s->data[b]);
		s->dirty &= ~(1u << b);
		t->dirty &= ~(1u << b);
	}
}

static void model_check_equal(struct model *m, const char *what)
{
	for (unsigned b = 0; b < NB; b++)
		if (m->n[0].data[b] != m->n[1].data[b])
			mfail(m, "After %s block %u differs: w%u on node 0, w%u on node 1.", what,
			      b, m->n[0].data[b], m->n[1].data[b]);
}

/* Resync from node s; full or bitmap-based; possibly cut short. */
static void model_sync(struct model *m, int si, int full)
{
	struct mnode *s = &m->n[si], *t = &m->n[1 - si];
	unsigned mask = full ? (1u << NB) - 1 : s->dirty | t->dirty;
	unsigned outcome = m->no_interrupt ? 9 : mrand(m, 10);

	for (unsigned w = 1; w <= m->next_write; w++)
		if (test_bit64(m->acked, w) && test_bit64(t->seen, w) && !test_bit64(s->seen, w))
			mfail(m, "Acknowledged write w%u is on the target (node %d) only.", w,
			      1 - si);
	if (t->primary)
		mfail(m, "The sync target (node %d) is primary.", 1 - si);
	t->g.flags &= ~K;
	m->connected = 1;
	if (outcome < 2) {
		model_copy(s, t, mask & (unsigned)xorshift(&m->rng));
		mtrace(m, "  resync cut short\n");
		if (mrand(m, 2))
			model_crash(m, (int)mrand(m, 2));
		else
			model_disconnect(m);
		return;
	}
	model_copy(s, t, mask);
	model_check_equal(m, full ? "a full resync" : "a bitmap resync");
	memcpy(t->seen, s->seen, sizeof(t->seen));
	gen_resync_done_target(&t->g, &s->g);
	s->diverged = t->diverged = 0;
	if (outcome == 2) {
		mtrace(m, "  resync done on the target, source crashes before its step\n");
		model_crash(m, si);
		return;
	}
	gen_resync_done_source(&s->g);
	int r = -1;
	if (gen_decide(&s->g, &t->g, &r) != GEN_NO_SYNC || r != GEN_RULE_EQUAL)
		mfail(m, "A finished resync is followed by %s.", gen_rule_name(r));
}

static void model_resolve(struct model *m)
{
	int v = (int)mrand(m, 2), r = -1;
	struct mnode *vn = &m->n[v], *sn = &m->n[1 - v];

	mtrace(m, "  operator: discard-local on node %d\n", v);
	vn->primary = 0;
	gen_discard_local(&vn->g);
	vn->diverged = 0;
	/* The operator chose to drop what only the victim had. */
	for (unsigned w = 1; w <= m->next_write; w++)
		if (test_bit64(vn->seen, w) && !test_bit64(sn->seen, w))
			m->acked[w / 64] &= ~(1ULL << (w % 64));
	if (gen_decide(&vn->g, &sn->g, &r) != GEN_FULL_TARGET)
		mfail(m, "After discard-local the victim decides %s.", gen_rule_name(r));
	model_sync(m, 1 - v, 1);
}

static void model_connect(struct model *m)
{
	struct mnode *a = &m->n[0], *b = &m->n[1];
	char ab[GEN_FORMAT_SIZE], bb[GEN_FORMAT_SIZE];
	int r = -1, rr = -1;
	enum gen_decision d = gen_decide(&a->g, &b->g, &r), dd = gen_decide(&b->g, &a->g, &rr);

	mtrace(m, "connect {%s} {%s}: %s by %s\n", gen_format(&a->g, ab, sizeof(ab)),
	       gen_format(&b->g, bb, sizeof(bb)), gen_decision_name(d), gen_rule_name(r));
	m->decisions[d]++;
	m->rules[r]++;
	m->rules[rr]++;
	if (dd != gen_decision_mirror(d))
		mfail(m, "The nodes disagree: %s and %s.", gen_decision_name(d),
		      gen_decision_name(dd));
	/*
	 * Both diverged ⇔ a stop. Unrelated counts as a stop only there: it happens when a
	 * missed finish and a split brain stack up with each side several generations on, past
	 * what a two-deep history can relate (a known limit; still no data lost).
	 */
	int stop = d == GEN_SPLIT_BRAIN || (d == GEN_UNRELATED && a->diverged && b->diverged);
	if (stop != (a->diverged && b->diverged))
		mfail(m, "Decision %s by %s, but diverged: %d and %d.", gen_decision_name(d),
		      gen_rule_name(r), a->diverged, b->diverged);
	switch (d) {
	case GEN_NO_SYNC:
		model_check_equal(m, "no-sync");
		for (int i = 0; i < 2; i++) {
			if (r == GEN_RULE_EQUAL && m->n[i].g.bitmap != 0)
				gen_resync_done_source(&m->n[i].g); /* it missed that step */
			m->n[i].dirty = 0;
			m->n[i].diverged = 0;
		}
		m->connected = 1;
		break;
	case GEN_SYNC_SOURCE:
	case GEN_SYNC_TARGET:
		model_sync(m, d == GEN_SYNC_SOURCE ? 0 : 1, 0);
		break;
	case GEN_FULL_SOURCE:
	case GEN_FULL_TARGET:
		model_sync(m, d == GEN_FULL_SOURCE ? 0 : 1, 1);
		break;
	case GEN_SPLIT_BRAIN:
	case GEN_UNRELATED:
		if (stop)
			model_resolve(m);
		break;
	default:
		mfail(m, "Unexpected decision %s by %s.", gen_decision_name(d), gen_rule_name(r));
		break;
	}
}

static void model_step(struct model *m)
{
	int i = (int)mrand(m, 2);
	struct mnode *n = &m->n[i], *o = &m->n[1 - i];
	unsigned ev = mrand(m, 100);

	if (ev < 35) {
		if (n->up && n->primary)
			model_write(m, i, 1);
	} else if (ev < 38) {
		if (n->up && n->primary && m->connected) {
			model_write(m, i, 0);
			model_crash(m, i);
		}
	} else if (ev < 43) {
		if (n->up)
			model_crash(m, i);
	} else if (ev < 46) {
		if (n->up) {
			mtrace(m, "node %d stops cleanly\n", i);
			n->primary = 0;
			n->up = 0;
			model_disconnect(m);
		}
	} else if (ev < 51) {
		if (m->connected) {
			mtrace(m, "link lost\n");
			model_disconnect(m);
		}
	} else if (ev < 63) {
		if (!n->up) {
			mtrace(m, "node %d starts\n", i);
			n->up = 1;
		}
	} else if (ev < 75) {
		if (n->up && !n->primary && (n->g.flags & K) && n->g.current != 0 &&
		    !(m->connected && o->primary)) {
			mtrace(m, "node %d promoted%s\n", i, m->connected ? " (connected)" : "");
			if (!m->connected)
				model_new_gen(m, i);
			n->primary = 1;
		}
	} else if (ev < 80) {
		if (n->primary) {
			mtrace(m, "node %d demoted\n", i);
			n->primary = 0;
		}
	} else {
		if (n->up && o->up && !m->connected)
			model_connect(m);
	}
}

static void model_walk(struct model *m, uint64_t seed, int steps)
{
	memset(m, 0, offsetof(struct model, decisions));
	m->rng = seed;
	m->next_id = 0x1000;
	m->n[0].up = m->n[1].up = 1;
	if (mrand(m, 2)) {
		/* Known-blank disks created with one shared generation. */
		m->n[0].g.current = m->n[1].g.current = ++m->next_id;
		m->n[0].g.flags = m->n[1].g.flags = K;
		m->connected = 1;
	} else {
		/* Forced promotion of one fresh disk; the other waits for its full sync. */
		model_new_gen(m, 0);
		m->n[0].g.flags = K;
		m->n[0].primary = 1;
	}
	for (int s = 0; s < steps && !m->fail[0] && m->next_write + 2 < MAXW; s++)
		model_step(m);
	/* Finale: everything comes back and stays up; the copies must converge. */
	m->no_interrupt = 1;
	m->n[0].up = m->n[1].up = 1;
	for (int k = 0; k < 4 && !m->connected && !m->fail[0]; k++)
		model_connect(m);
	if (!m->connected)
		mfail(m, "The nodes never converged.");
	model_check_equal(m, "the final connect");
	for (unsigned w = 1; w <= m->next_write; w++)
		if (test_bit64(m->acked, w) && !test_bit64(m->n[0].seen, w))
			mfail(m, "Acknowledged write w%u was lost.", w);
}

START_TEST(model_random_walk)
{
	static struct model m;
	uint64_t seed = MODEL_SEED;

	memset(&m, 0, sizeof(m));
	for (int walk = 0; walk < MODEL_WALKS; walk++) {
		uint64_t s = xorshift(&seed);
		model_walk(&m, s, MODEL_STEPS);
		if (m.fail[0]) {
			fprintf(stderr, "Model trace (walk %d, seed %#llx):\n%s", walk,
			        (unsigned long long)s, m.trace);
			ck_abort_msg("Model walk %d failed: %s", walk, m.fail);
		}
	}
#ifdef MODEL_STATS
	for (int r = 0; r < GEN_RULE_COUNT; r++)
		fprintf(stderr, "%-28s %ld\n", gen_rule_name(r), m.rules[r]);
#endif
	/*
	 * The walks must reach every rule a correct daemon can reach. The others need colliding
	 * ids or a broken caller contract (both-fresh: the model always bootstraps a generation;
	 * history-*: only when a source finishes before its target).
	 */
	static const int reachable[] = {
	    GEN_RULE_SELF_FRESH,
	    GEN_RULE_PEER_FRESH,
	    GEN_RULE_EQUAL,
	    GEN_RULE_CRASHED_SELF,
	    GEN_RULE_CRASHED_PEER,
	    GEN_RULE_BITMAP_SELF,
	    GEN_RULE_BITMAP_SELF_CRASHED_PEER,
	    GEN_RULE_BITMAP_SELF_CRASHED_SELF,
	    GEN_RULE_BITMAP_PEER,
	    GEN_RULE_BITMAP_PEER_CRASHED_SELF,
	    GEN_RULE_BITMAP_PEER_CRASHED_PEER,
	    GEN_RULE_SPLIT_BRAIN_BITMAP,
	    GEN_RULE_MISSED_FINISH_SELF,
	    GEN_RULE_MISSED_FINISH_PEER,
	    GEN_RULE_SPLIT_BRAIN_ANCESTOR,
	};
	for (size_t k = 0; k < sizeof(reachable) / sizeof(reachable[0]); k++)
		ck_assert_msg(m.rules[reachable[k]] > 0, "The model never reached rule %s.",
		              gen_rule_name(reachable[k]));
	ck_assert_int_eq(m.decisions[GEN_INCONSISTENT_SOURCE], 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("gen");
	TCase *t = tcase_create("table");
	tcase_add_test(t, decision_table);
	tcase_add_test(t, table_covers_every_rule);
	tcase_add_test(t, names);
	tcase_add_test(t, format);
	suite_add_tcase(s, t);

	TCase *p = tcase_create("properties");
	tcase_set_timeout(p, 120);
	tcase_add_test(p, symmetry_exhaustive);
	tcase_add_test(p, symmetry_random);
	tcase_add_test(p, discard_local_property);
	tcase_add_test(p, resync_done_property);
	tcase_add_test(p, new_current_rotation);
	suite_add_tcase(s, p);

	TCase *sc = tcase_create("scenarios");
	tcase_add_test(sc, scenario_secondary_dies);
	tcase_add_test(sc, scenario_primary_crashes);
	tcase_add_test(sc, scenario_split_brain);
	tcase_add_test(sc, scenario_repeated_cycles);
	tcase_add_test(sc, scenario_blank_creation);
	tcase_add_test(sc, scenario_unrelated);
	suite_add_tcase(s, sc);

	TCase *m = tcase_create("model");
	tcase_set_timeout(m, 120);
	tcase_add_test(m, model_random_walk);
	suite_add_tcase(s, m);

	SRunner *sr = srunner_create(s);
	/* Contract violations abort; only observable when each test runs in its own process. */
	if (srunner_fork_status(sr) != CK_NOFORK) {
		TCase *a = tcase_create("contract");
		tcase_add_test_raise_signal(a, new_current_zero_aborts, SIGABRT);
		tcase_add_test_raise_signal(a, new_current_reuse_aborts, SIGABRT);
		tcase_add_test_raise_signal(a, done_target_fresh_source_aborts, SIGABRT);
		suite_add_tcase(s, a);
	}
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
