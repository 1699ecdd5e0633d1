/* SPDX-License-Identifier: MIT */
#include "sbpolicy.h"

#include <stddef.h>
#include <string.h>

static const char *const policy_names[SB_POLICY_COUNT] = {
    [SB_POLICY_DISCONNECT] = "disconnect",
    [SB_POLICY_DISCARD_ZERO] = "discard-zero-changes",
    [SB_POLICY_DISCARD_LEAST] = "discard-least-changes",
    [SB_POLICY_DISCARD_YOUNGER] = "discard-younger-primary",
    [SB_POLICY_DISCARD_NODE] = "discard-node",
};

const char *sbpolicy_name(enum sb_policy p)
{
	return (unsigned)p < SB_POLICY_COUNT ? policy_names[p] : "unknown";
}

int sbpolicy_parse(const char *s, enum sb_policy *out)
{
	for (unsigned i = 0; i < SB_POLICY_COUNT; i++) {
		if (strcmp(s, policy_names[i]) == 0) {
			*out = (enum sb_policy)i;
			return 0;
		}
	}
	return -1;
}

const char *sbpolicy_verdict_name(enum sb_verdict v)
{
	switch (v) {
	case SB_VERDICT_DISCARD_LOCAL:
		return "discard-local";
	case SB_VERDICT_DISCARD_PEER:
		return "discard-peer";
	default:
		return "disconnect";
	}
}

static enum sb_verdict younger(const struct sb_side *l, const struct sb_side *p, const char **why)
{
	/* Without both times the order of the promotions is unknown: guessing could drop the
	 * newer data. */
	if (l->promoted_ms == 0 || p->promoted_ms == 0) {
		*why = "a promotion time is unknown";
		return SB_VERDICT_DISCONNECT;
	}
	if (l->promoted_ms == p->promoted_ms) {
		*why = "both were promoted at the same time";
		return SB_VERDICT_DISCONNECT;
	}
	*why = "the younger primary discards";
	return l->promoted_ms > p->promoted_ms ? SB_VERDICT_DISCARD_LOCAL : SB_VERDICT_DISCARD_PEER;
}

enum sb_verdict sbpolicy_decide(enum sb_policy p, const char *victim, const struct sb_side *l,
                                const struct sb_side *r, const char **why)
{
	const char *dummy;
	if (!why)
		why = &dummy;
	switch (p) {
	case SB_POLICY_DISCARD_ZERO:
		if (l->changes && r->changes) {
			*why = "both nodes changed data";
			return SB_VERDICT_DISCONNECT;
		}
		if (l->changes != r->changes) {
			*why = "the node without changes discards";
			return l->changes ? SB_VERDICT_DISCARD_PEER : SB_VERDICT_DISCARD_LOCAL;
		}
		/* Neither wrote: either copy will do, as long as both pick the same one. */
		*why = "neither node changed data; the node whose name sorts last discards";
		return strcmp(l->node, r->node) > 0 ? SB_VERDICT_DISCARD_LOCAL
		                                    : SB_VERDICT_DISCARD_PEER;
	case SB_POLICY_DISCARD_LEAST:
		if (l->changes != r->changes) {
			*why = "the node with fewer changes discards";
			return l->changes < r->changes ? SB_VERDICT_DISCARD_LOCAL
			                               : SB_VERDICT_DISCARD_PEER;
		}
		return younger(l, r, why);
	case SB_POLICY_DISCARD_YOUNGER:
		return younger(l, r, why);
	case SB_POLICY_DISCARD_NODE:
		if (victim && strcmp(victim, l->node) == 0) {
			*why = "this node is the configured discard-node";
			return SB_VERDICT_DISCARD_LOCAL;
		}
		if (victim && strcmp(victim, r->node) == 0) {
			*why = "the peer is the configured discard-node";
			return SB_VERDICT_DISCARD_PEER;
		}
		*why = "the configured discard-node is neither node";
		return SB_VERDICT_DISCONNECT;
	default:
		*why = "the policy is disconnect";
		return SB_VERDICT_DISCONNECT;
	}
}
