/* SPDX-License-Identifier: MIT */
/*
 * Generation identifiers: the connect-time decision and the id rotations. Pure functions only;
 * see gen.h for the caller contract the rules rely on.
 */
#include <assert.h>
#include <inttypes.h>
#include <stdio.h>

#include "gen.h"

/*
 * One entry per rule: changing what a rule does (for instance once the activity log bounds what
 * a crashed primary may hold) is a change here and nowhere else.
 */
static const struct {
	const char *name;
	enum gen_decision decision;
} rules[GEN_RULE_COUNT] = {
    [GEN_RULE_BOTH_FRESH] = {"both-fresh", GEN_NO_SYNC},
    [GEN_RULE_SELF_FRESH] = {"self-fresh", GEN_FULL_TARGET},
    [GEN_RULE_PEER_FRESH] = {"peer-fresh", GEN_FULL_SOURCE},
    [GEN_RULE_EQUAL] = {"equal", GEN_NO_SYNC},
    /* Writes in flight while connected are in no bitmap: only a full sync covers them. */
    [GEN_RULE_CRASHED_SELF] = {"crashed-primary-self", GEN_FULL_SOURCE},
    [GEN_RULE_CRASHED_PEER] = {"crashed-primary-peer", GEN_FULL_TARGET},
    [GEN_RULE_CRASHED_BOTH] = {"crashed-primary-both", GEN_SPLIT_BRAIN},
    [GEN_RULE_BITMAP_CYCLE] = {"bitmap-cycle", GEN_SPLIT_BRAIN},
    [GEN_RULE_BITMAP_SELF] = {"bitmap-self", GEN_SYNC_SOURCE},
    /* The peer's crash tail is not in my bitmap, so the bitmap would not overwrite it. */
    [GEN_RULE_BITMAP_SELF_CRASHED_PEER] = {"bitmap-self-crashed-peer", GEN_FULL_SOURCE},
    /*
     * My own crash tail from before I moved on (written while still connected, or an
     * interrupted full sync I was sending) is not in my bitmap either.
     */
    [GEN_RULE_BITMAP_SELF_CRASHED_SELF] = {"bitmap-self-crashed-self", GEN_FULL_SOURCE},
    [GEN_RULE_BITMAP_PEER] = {"bitmap-peer", GEN_SYNC_TARGET},
    [GEN_RULE_BITMAP_PEER_CRASHED_SELF] = {"bitmap-peer-crashed-self", GEN_FULL_TARGET},
    [GEN_RULE_BITMAP_PEER_CRASHED_PEER] = {"bitmap-peer-crashed-peer", GEN_FULL_TARGET},
    [GEN_RULE_SPLIT_BRAIN_BITMAP] = {"split-brain-bitmap", GEN_SPLIT_BRAIN},
    /*
     * Full, not bitmap: whether my bitmap still covers everything since the peer's current
     * depends on how far the resync had cleared it when I went down.
     */
    [GEN_RULE_MISSED_FINISH_SELF] = {"missed-finish-self", GEN_FULL_SOURCE},
    [GEN_RULE_MISSED_FINISH_PEER] = {"missed-finish-peer", GEN_FULL_TARGET},
    [GEN_RULE_HISTORY_CYCLE] = {"history-cycle", GEN_SPLIT_BRAIN},
    [GEN_RULE_HISTORY_SELF] = {"history-self", GEN_FULL_SOURCE},
    [GEN_RULE_HISTORY_PEER] = {"history-peer", GEN_FULL_TARGET},
    [GEN_RULE_SPLIT_BRAIN_ANCESTOR] = {"split-brain-common-ancestor", GEN_SPLIT_BRAIN},
    [GEN_RULE_UNRELATED] = {"unrelated", GEN_UNRELATED},
    [GEN_RULE_SOURCE_INCONSISTENT_SELF] = {"source-inconsistent-self", GEN_INCONSISTENT_SOURCE},
    [GEN_RULE_SOURCE_INCONSISTENT_PEER] = {"source-inconsistent-peer", GEN_INCONSISTENT_SOURCE},
};

static const char *const decision_names[GEN_DECISION_COUNT] = {
    [GEN_NO_SYNC] = "no-sync",         [GEN_SYNC_SOURCE] = "sync-source",
    [GEN_SYNC_TARGET] = "sync-target", [GEN_FULL_SOURCE] = "full-source",
    [GEN_FULL_TARGET] = "full-target", [GEN_SPLIT_BRAIN] = "split-brain",
    [GEN_UNRELATED] = "unrelated",     [GEN_INCONSISTENT_SOURCE] = "inconsistent-source",
};

static int gen_in_history(const struct gen_ids *g, uint64_t id)
{
	return id != 0 && (g->history[0] == id || g->history[1] == id);
}

/* Any non-zero id of {bitmap, history} on one side equal to one of the same set on the other. */
static int gen_share_ancestor(const struct gen_ids *a, const struct gen_ids *b)
{
	const uint64_t x[3] = {a->bitmap, a->history[0], a->history[1]};
	const uint64_t y[3] = {b->bitmap, b->history[0], b->history[1]};

	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 3; j++)
			if (x[i] != 0 && x[i] == y[j])
				return 1;
	return 0;
}

/*
 * The rules proper. Symmetry (the peer computes the mirror image) holds by construction: every
 * rule is either symmetric in (local, peer) or one half of a self/peer pair tested at the same
 * point, and when both halves of a pair hold at once — only possible when ids collide — the pair
 * yields a symmetric split-brain instead of letting the evaluation order pick a direction.
 */
static int gen_match(const struct gen_ids *l, const struct gen_ids *p)
{
	int lc = !!(l->flags & GEN_F_CRASHED_PRIMARY), pc = !!(p->flags & GEN_F_CRASHED_PRIMARY);

	if (l->current == 0 && p->current == 0)
		return GEN_RULE_BOTH_FRESH;
	if (l->current == 0)
		return GEN_RULE_SELF_FRESH;
	if (p->current == 0)
		return GEN_RULE_PEER_FRESH;
	if (l->current == p->current) {
		if (lc && pc)
			return GEN_RULE_CRASHED_BOTH;
		if (lc)
			return GEN_RULE_CRASHED_SELF;
		return pc ? GEN_RULE_CRASHED_PEER : GEN_RULE_EQUAL;
	}

	int self_bm = l->bitmap != 0 && l->bitmap == p->current;
	int peer_bm = p->bitmap != 0 && p->bitmap == l->current;
	if (self_bm && peer_bm)
		return GEN_RULE_BITMAP_CYCLE;
	if (self_bm) {
		if (pc)
			return GEN_RULE_BITMAP_SELF_CRASHED_PEER;
		return lc ? GEN_RULE_BITMAP_SELF_CRASHED_SELF : GEN_RULE_BITMAP_SELF;
	}
	if (peer_bm) {
		if (lc)
			return GEN_RULE_BITMAP_PEER_CRASHED_SELF;
		return pc ? GEN_RULE_BITMAP_PEER_CRASHED_PEER : GEN_RULE_BITMAP_PEER;
	}
	if (l->bitmap != 0 && l->bitmap == p->bitmap)
		return GEN_RULE_SPLIT_BRAIN_BITMAP;
	/*
	 * A resync target that finishes pushes the source's bitmap id into history[0] and has no
	 * bitmap; nothing else leaves that pattern (a forced start from current 0 clears history).
	 * So the peer took my data and never moved on, while I, having missed my own finishing
	 * step, kept a stale bitmap id and perhaps moved on several times since — more than the
	 * history depth could follow. The two halves exclude each other (bitmap 0 vs non-zero).
	 */
	if (l->bitmap != 0 && p->bitmap == 0 && p->history[0] == l->bitmap)
		return GEN_RULE_MISSED_FINISH_SELF;
	if (p->bitmap != 0 && l->bitmap == 0 && l->history[0] == p->bitmap)
		return GEN_RULE_MISSED_FINISH_PEER;

	int self_hist = gen_in_history(l, p->current), peer_hist = gen_in_history(p, l->current);
	if (self_hist && peer_hist)
		return GEN_RULE_HISTORY_CYCLE;
	if (self_hist)
		return GEN_RULE_HISTORY_SELF;
	if (peer_hist)
		return GEN_RULE_HISTORY_PEER;
	if (gen_share_ancestor(l, p))
		return GEN_RULE_SPLIT_BRAIN_ANCESTOR;
	return GEN_RULE_UNRELATED;
}

enum gen_decision gen_decide(const struct gen_ids *local, const struct gen_ids *peer, int *rule)
{
	int r = gen_match(local, peer);
	enum gen_decision d = rules[r].decision;

	/*
	 * Copying an inconsistent disk (an interrupted resync target) would spread a half-written
	 * state and then mark the receiver consistent. Checked after the rules so it also covers
	 * every future rule; symmetric because the mirror view tests the same node.
	 */
	if ((d == GEN_SYNC_SOURCE || d == GEN_FULL_SOURCE) && !(local->flags & GEN_F_CONSISTENT))
		r = GEN_RULE_SOURCE_INCONSISTENT_SELF;
	else if ((d == GEN_SYNC_TARGET || d == GEN_FULL_TARGET) &&
	         !(peer->flags & GEN_F_CONSISTENT))
		r = GEN_RULE_SOURCE_INCONSISTENT_PEER;
	if (rule)
		*rule = r;
	return rules[r].decision;
}

enum gen_decision gen_rule_decision(int rule)
{
	if (rule < 0 || rule >= GEN_RULE_COUNT)
		return GEN_DECISION_COUNT;
	return rules[rule].decision;
}

enum gen_decision gen_decision_mirror(enum gen_decision d)
{
	switch (d) {
	case GEN_SYNC_SOURCE:
		return GEN_SYNC_TARGET;
	case GEN_SYNC_TARGET:
		return GEN_SYNC_SOURCE;
	case GEN_FULL_SOURCE:
		return GEN_FULL_TARGET;
	case GEN_FULL_TARGET:
		return GEN_FULL_SOURCE;
	default:
		return d;
	}
}

const char *gen_rule_name(int rule)
{
	if (rule < 0 || rule >= GEN_RULE_COUNT)
		return "unknown";
	return rules[rule].name;
}

const char *gen_decision_name(enum gen_decision d)
{
	if ((unsigned)d >= GEN_DECISION_COUNT)
		return "unknown";
	return decision_names[d];
}

static void gen_push_history(struct gen_ids *g, uint64_t id)
{
	g->history[1] = g->history[0];
	g->history[0] = id;
}

void gen_new_current(struct gen_ids *g, uint64_t fresh)
{
	/* A reused id would make one generation look like another's ancestor or descendant. */
	assert(fresh != 0);
	assert(fresh != g->current && fresh != g->bitmap);
	assert(fresh != g->history[0] && fresh != g->history[1]);

	if (g->current == 0) {
		/* Forced start from nothing: a new lineage, and nothing the peer has. */
		g->bitmap = 0;
		g->history[0] = g->history[1] = 0;
	} else if (g->bitmap == 0) {
		g->bitmap = g->current;
	} else {
		gen_push_history(g, g->current); /* the bitmap still names what the peer has */
	}
	g->current = fresh;
}

void gen_resync_done_source(struct gen_ids *g)
{
	if (g->bitmap != 0) {
		gen_push_history(g, g->bitmap);
		g->bitmap = 0;
	}
	/* The peer now holds my crash tail too; keeping the flag would force a full sync forever.
	 */
	g->flags &= ~GEN_F_CRASHED_PRIMARY;
}

void gen_resync_done_target(struct gen_ids *g, const struct gen_ids *source)
{
	struct gen_ids s = *source;

	assert(s.current != 0);
	/* Normalise, so it does not matter whether the source's snapshot predates its own step. */
	gen_resync_done_source(&s);
	g->current = s.current;
	g->bitmap = 0;
	g->history[0] = s.history[0];
	g->history[1] = s.history[1];
	g->flags = (g->flags & ~GEN_F_CRASHED_PRIMARY) | GEN_F_CONSISTENT;
}

void gen_discard_local(struct gen_ids *g)
{
	/* Newest first: current descends from bitmap, which descends from history. */
	const uint64_t chain[4] = {g->current, g->bitmap, g->history[0], g->history[1]};
	uint64_t keep[2] = {0, 0};
	int n = 0;

	for (int i = 0; i < 4 && n < 2; i++)
		if (chain[i] != 0)
			keep[n++] = chain[i];
	g->current = 0;
	g->bitmap = 0;
	g->history[0] = keep[0];
	g->history[1] = keep[1];
	g->flags &= ~(GEN_F_CRASHED_PRIMARY | GEN_F_CONSISTENT);
}

const char *gen_format(const struct gen_ids *g, char *buf, size_t len)
{
	char f[3];
	int n = 0;

	if (g->flags & GEN_F_CONSISTENT)
		f[n++] = 'C';
	if (g->flags & GEN_F_CRASHED_PRIMARY)
		f[n++] = 'P';
	if (n == 0)
		f[n++] = '-';
	f[n] = '\0';
	if (len > 0)
		snprintf(buf, len,
		         "C:%016" PRIX64 " B:%016" PRIX64 " H:%016" PRIX64 ":%016" PRIX64 " F:%s",
		         g->current, g->bitmap, g->history[0], g->history[1], f);
	return buf;
}
