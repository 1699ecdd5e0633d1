/* SPDX-License-Identifier: MIT */
/*
 * Generation identifiers: which copy of a volume is newer, and how the two nodes must sync when
 * they (re)connect. Everything here is a pure function of its arguments (no I/O, no globals, no
 * logging) so the whole decision table can be tested exhaustively; the daemon persists the ids
 * (meta) and logs the decision with gen_rule_name()/gen_decision_name()/gen_format().
 *
 * A generation is a random non-zero 64-bit id. 0 means "no id"; a never-synced disk has
 * current == 0. bitmap is the generation the peer had when we moved on without it (our dirty
 * bitmap tracks the blocks written since); history holds older generations, newest first.
 *
 * Caller contract, relied on by the rules:
 *  - a new generation starts (gen_new_current) whenever writes can happen that the peer does not
 *    see: a primary loses its peer, or a disconnected node is promoted;
 *  - GEN_F_CRASHED_PRIMARY is set at attach when the metadata says "was primary" and the node did
 *    not shut down cleanly; the resync helpers clear it;
 *  - GEN_F_CONSISTENT is set by a completed resync (gen_resync_done_target) and by a forced
 *    promotion; it is cleared when a node starts receiving a resync and by gen_discard_local.
 *    A node without it is never chosen as a sync source (GEN_INCONSISTENT_SOURCE);
 *  - at the end of a resync the target persists gen_resync_done_target() before the source
 *    persists gen_resync_done_source(). If the source misses its step, the next connect sees equal
 *    currents (rule "equal") and the source then calls gen_resync_done_source() to drop its stale
 *    bitmap id; if it moved on before reconnecting, rule "missed-finish-self" catches it;
 *  - during a bitmap-based resync the sync source sends the union of both dirty bitmaps.
 */
#ifndef HAK_GEN_H
#define HAK_GEN_H

#include <stddef.h>
#include <stdint.h>

/* The node was primary when it went down uncleanly: it may hold writes the peer never saw. */
#define GEN_F_CRASHED_PRIMARY 0x1u
/* Its data is a consistent copy of some generation (possibly an old one). */
#define GEN_F_CONSISTENT 0x2u

struct gen_ids {
	uint64_t current;
	uint64_t bitmap;
	uint64_t history[2];
	unsigned flags;
};

enum gen_decision {
	GEN_NO_SYNC,
	GEN_SYNC_SOURCE, /* bitmap-based resync, this node sends */
	GEN_SYNC_TARGET, /* bitmap-based resync, this node receives */
	GEN_FULL_SOURCE,
	GEN_FULL_TARGET,
	GEN_SPLIT_BRAIN,
	GEN_UNRELATED,
	/* The rules pick a source whose data is not consistent: refuse, an operator must decide. */
	GEN_INCONSISTENT_SOURCE,
	GEN_DECISION_COUNT
};

/*
 * The rule that produced a decision, in evaluation order (first match wins). "self"/"peer" name
 * whose bitmap/history matched or who crashed. Each rule maps to exactly one decision
 * (gen_rule_decision), so changing what a rule does is one table entry in gen.c.
 */
enum gen_rule {
	GEN_RULE_BOTH_FRESH,   /* both current == 0 → no-sync (promote with --force) */
	GEN_RULE_SELF_FRESH,   /* my current == 0 → full-target */
	GEN_RULE_PEER_FRESH,   /* peer current == 0 → full-source */
	GEN_RULE_EQUAL,        /* equal currents, nobody crashed → no-sync */
	GEN_RULE_CRASHED_SELF, /* equal currents, I crashed as primary → full-source */
	GEN_RULE_CRASHED_PEER, /* equal currents, peer crashed as primary → full-target */
	GEN_RULE_CRASHED_BOTH, /* equal currents, both crashed as primary → split-brain */
	GEN_RULE_BITMAP_CYCLE, /* each bitmap == the other's current → split-brain */
	GEN_RULE_BITMAP_SELF,  /* my bitmap == peer current → sync-source */
	GEN_RULE_BITMAP_SELF_CRASHED_PEER, /* ... but the peer crashed as primary → full-source */
	GEN_RULE_BITMAP_SELF_CRASHED_SELF, /* ... but I crashed as primary → full-source */
	GEN_RULE_BITMAP_PEER,              /* peer bitmap == my current → sync-target */
	GEN_RULE_BITMAP_PEER_CRASHED_SELF, /* ... but I crashed as primary → full-target */
	GEN_RULE_BITMAP_PEER_CRASHED_PEER, /* ... but the peer crashed as primary → full-target */
	GEN_RULE_SPLIT_BRAIN_BITMAP,       /* equal bitmaps, different currents → split-brain */
	GEN_RULE_MISSED_FINISH_SELF,   /* peer took my resync, I missed my step → full-source */
	GEN_RULE_MISSED_FINISH_PEER,   /* the mirror image → full-target */
	GEN_RULE_HISTORY_CYCLE,        /* each current is in the other's history → split-brain */
	GEN_RULE_HISTORY_SELF,         /* peer current in my history → full-source */
	GEN_RULE_HISTORY_PEER,         /* my current in peer history → full-target */
	GEN_RULE_SPLIT_BRAIN_ANCESTOR, /* a shared bitmap/history id → split-brain */
	GEN_RULE_UNRELATED,            /* nothing shared → unrelated */
	GEN_RULE_SOURCE_INCONSISTENT_SELF, /* I would be the source but am inconsistent */
	GEN_RULE_SOURCE_INCONSISTENT_PEER, /* the peer would be the source but is inconsistent */
	GEN_RULE_COUNT
};

/*
 * Compare the two id sets at connect time. *rule (if rule is not NULL) receives the
 * enum gen_rule that matched. The result seen from the peer is always the mirror image
 * (gen_decision_mirror), whatever the ids, so both sides agree on the direction.
 */
enum gen_decision gen_decide(const struct gen_ids *local, const struct gen_ids *peer, int *rule);
/* The decision a rule produces; GEN_DECISION_COUNT for an unknown rule id. */
enum gen_decision gen_rule_decision(int rule);
/* The same decision seen from the other node: source <-> target, others unchanged. */
enum gen_decision gen_decision_mirror(enum gen_decision d);
/* Short names for logs: "bitmap-self", "sync-source", ...; "unknown" for out-of-range values. */
const char *gen_rule_name(int rule);
const char *gen_decision_name(enum gen_decision d);

/*
 * Start a new generation with the random id fresh (non-zero and different from every id in g,
 * asserted: the caller draws again on a collision). The first move away from the peer records
 * the peer's generation as bitmap; later moves (bitmap already set) push current into history.
 * From current == 0 (a forced promotion of a fresh or discarded disk) it starts a new lineage:
 * history is cleared, so the discarded past cannot pass for a resync the peer finished.
 */
void gen_new_current(struct gen_ids *g, uint64_t fresh);
/* The peer now has my data: the bitmap generation goes to history; clears crashed-primary. */
void gen_resync_done_source(struct gen_ids *g);
/*
 * I now have the source's data: adopt its ids as they are once the source has run
 * gen_resync_done_source() (whether or not source already has), so both sides end equal except
 * flags. Clears crashed-primary, sets consistent. source->current must be non-zero (asserted).
 */
void gen_resync_done_target(struct gen_ids *g, const struct gen_ids *source);
/*
 * `hakctl resolve --discard-local`: forget this node's generation (current = 0, kept in history
 * for the record) so the next connect makes it a full-sync target of any consistent peer.
 * Clears crashed-primary and consistent.
 */
void gen_discard_local(struct gen_ids *g);

/* Enough for gen_format: "C:<16 hex> B:<16 hex> H:<16 hex>:<16 hex> F:<flags>". */
#define GEN_FORMAT_SIZE 96
/*
 * "C:0123456789ABCDEF B:... H:...:... F:CP" into buf (truncated to len, always terminated);
 * flags: C = consistent, P = crashed-primary, - = none. Returns buf.
 */
const char *gen_format(const struct gen_ids *g, char *buf, size_t len);

#endif
