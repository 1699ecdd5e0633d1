#!/usr/bin/env bash
# timeout: 120
# after-split-brain disconnect (explicit, the default) and a policy that cannot decide
# (discard-zero-changes when both wrote): the split brain stops both nodes (StandAlone,
# split_brain true, nothing resynced, each keeps its own write), each node's hook ran with
# verdict disconnect, and the event stream carried a split-brain line.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
# shellcheck source=tests/integration/splitbrain.sh
. "$(dirname "$0")/splitbrain.sh"

both_stopped() {
	local n
	for n in alpha beta; do
		[[ $(hk "$n" status --json | jq -r '.volumes[0].replication | "\(.split_brain) \(.link)"') == "true StandAlone" ]] || return 1
	done
}

sb_setup discard-zero-changes
timeout 60 "$HAKCTL" --control "$WORK/alpha.ctl" events --timeout 50 >"$WORK/ev.alpha" 2>&1 &
EV=$!
track_pid "$EV"
sleep 0.3
sb_split alpha 1 1
wait_for both_stopped 10 || fail "the split brain did not stop both nodes"
sb_expect_hooks disconnect disconnect
wait_for "grep -q '^split-brain ' $WORK/ev.alpha" 10 || fail "no split-brain event on alpha: $(cat "$WORK/ev.alpha")"
grep -qE '^split-brain time:[0-9.]+ volume:db peer:beta rule:[a-z-]+ policy:discard-zero-changes verdict:disconnect why:both-nodes-changed-data$' "$WORK/ev.alpha" ||
	fail "alpha's split-brain event: $(cat "$WORK/ev.alpha")"
sleep 1
both_stopped || fail "the split brain state did not last"
assert_eq "$(sha256sum <"$(backing alpha)")" "$SHA_alpha" "alpha's copy after the split brain"
assert_eq "$(sha256sum <"$(backing beta)")" "$SHA_beta" "beta's copy after the split brain"
assert_contains "$(repl alpha last_refusal)" "after-split-brain discard-zero-changes: both nodes changed data" "alpha's last_refusal"
log "PASS: an undecidable policy stops both nodes, runs the hooks and emits the event"
