/* SPDX-License-Identifier: MIT */
/*
 * After-split-brain policies: when the generation IDs say both nodes changed the data on their
 * own, the configured policy may pick the side whose changes are dropped instead of stopping
 * (DRBD's after-sb-0pri). A pure function, so both nodes reach the same verdict from the same
 * facts seen from either side, and a table test can prove it.
 */
#ifndef HAK_SBPOLICY_H
#define HAK_SBPOLICY_H

#include <stdint.h>

enum sb_policy {
	SB_POLICY_DISCONNECT = 0,  /* stop; an operator decides (the default) */
	SB_POLICY_DISCARD_ZERO,    /* the side that wrote nothing discards */
	SB_POLICY_DISCARD_LEAST,   /* the side that changed fewer blocks discards */
	SB_POLICY_DISCARD_YOUNGER, /* the side promoted last discards */
	SB_POLICY_DISCARD_NODE,    /* the named node discards */
	SB_POLICY_COUNT
};

enum sb_verdict {
	SB_VERDICT_DISCONNECT = 0,
	SB_VERDICT_DISCARD_LOCAL, /* this node becomes the resync target */
	SB_VERDICT_DISCARD_PEER,  /* the peer does; this node is the source */
};

struct sb_side {
	const char *node;     /* node name */
	uint64_t changes;     /* blocks set in its bitmap: written since the split */
	uint64_t promoted_ms; /* wall clock of its last promotion, 0 if unknown */
};

/*
 * The verdict for local against peer. victim: the node named by discard-node (NULL otherwise).
 * why gets a static phrase saying how the verdict was reached. Ties: discard-zero-changes with
 * no change on either side drops the changes of the node whose name sorts last;
 * discard-least-changes with equal counts falls back to discard-younger-primary; a tie or an
 * unknown promotion time there disconnects.
 */
enum sb_verdict sbpolicy_decide(enum sb_policy p, const char *victim, const struct sb_side *local,
                                const struct sb_side *peer, const char **why);

const char *sbpolicy_name(enum sb_policy p);
/* 0 and *out, or -1 if s names no policy. */
int sbpolicy_parse(const char *s, enum sb_policy *out);
const char *sbpolicy_verdict_name(enum sb_verdict v);

#endif
