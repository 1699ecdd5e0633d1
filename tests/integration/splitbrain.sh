# shellcheck shell=bash disable=SC2034
# Split-brain policy scenarios, sourced by t_sb_*.sh after lib.sh and pair.sh:
#   sb_setup POLICY [DISCARD_NODE]   a synced pair (64 MiB, blank metadata) whose volume has
#                                    after-split-brain POLICY and a split-brain hook that logs
#                                    its arguments and environment to $WORK/hook.NODE;
#   sb_split FIRST A_MIB B_MIB       path 1 down; FIRST is promoted, then (0.2 s later) the other;
#                                    alpha writes A_MIB MiB of 0x11 at 0 and beta B_MIB MiB of
#                                    0x22 at 32 MiB (0: no write); both demoted; sha256 of each
#                                    backing saved in SHA_alpha / SHA_beta; path 1 up;
#   sb_expect_winner NODE            the pair resyncs on its own, both backings equal NODE's copy
#                                    from before the reconnect, and each node's hook ran with
#                                    "db NODE PEER POLICY VERDICT".

require_hakd
require_cmd qemu-io sha256sum jq

SB_POLICY=

sb_setup() {
	SB_POLICY=$1
	cat >"$WORK/hook.sh" <<'HOOK'
#!/bin/sh
echo "$1 $2 $3 $HAK_SB_POLICY $HAK_SB_VERDICT" >>"$(dirname "$0")/hook.$2"
HOOK
	chmod +x "$WORK/hook.sh"
	PAIR_EXTRA="after-split-brain $1
    split-brain-hook $WORK/hook.sh${2:+
    discard-node $2}"
	PAIR_BLANK=1 pair_setup sync 64M
	pair_report_logs
	wait_synced 30
	assert_eq "$(repl alpha after_split_brain)" "$1" "alpha's after_split_brain"
}

sb_split() {
	local first=$1 a=$2 b=$3 second out n
	second=$([[ $first == alpha ]] && echo beta || echo alpha)
	path_down 1
	defer "path_up 1"
	wait_repl alpha link Connecting 10
	wait_repl beta link Connecting 10
	out=$(hk "$first" primary db 2>&1) || fail "primary on $first: $out"
	sleep 0.2
	out=$(hk "$second" primary db 2>&1) || fail "primary on $second: $out"
	if ((a > 0)); then
		out=$(qemu-io -f raw -c "write -P 0x11 0 ${a}M" -c flush "$(node_uri alpha)" 2>&1) ||
			fail "write on alpha: $out"
	fi
	if ((b > 0)); then
		out=$(qemu-io -f raw -c "write -P 0x22 32M ${b}M" -c flush "$(node_uri beta)" 2>&1) ||
			fail "write on beta: $out"
	fi
	for n in alpha beta; do
		out=$(hk "$n" secondary db 2>&1) || fail "secondary on $n: $out"
	done
	SHA_alpha=$(sha256sum <"$(backing alpha)")
	SHA_beta=$(sha256sum <"$(backing beta)")
	[[ $SHA_alpha != "$SHA_beta" ]] || fail "the copies are identical after the split"
	path_up 1
}

# hook_saw NODE LINE: NODE's hook log has LINE (and no other kind of line).
hook_saw() {
	[[ -f $WORK/hook.$1 ]] || return 1
	! grep -qvxF "$2" "$WORK/hook.$1" && grep -qxF "$2" "$WORK/hook.$1"
}

sb_expect_hooks() {
	local va=$1 vb=$2
	wait_for "hook_saw alpha 'db alpha beta $SB_POLICY $va'" 10 ||
		fail "alpha's hook log: $(cat "$WORK/hook.alpha" 2>&1), want 'db alpha beta $SB_POLICY $va'"
	wait_for "hook_saw beta 'db beta alpha $SB_POLICY $vb'" 10 ||
		fail "beta's hook log: $(cat "$WORK/hook.beta" 2>&1), want 'db beta alpha $SB_POLICY $vb'"
	log "hooks: alpha '$(head -1 "$WORK/hook.alpha")', beta '$(head -1 "$WORK/hook.beta")'"
}

sb_expect_winner() {
	local w=$1 loser want a b
	loser=$([[ $w == alpha ]] && echo beta || echo alpha)
	want=SHA_$w
	wait_synced 60
	for n in alpha beta; do
		assert_eq "$(repl "$n" split_brain)" false "$n's split_brain after the policy"
	done
	assert_eq "$(repl "$w" split_brains_resolved)" 1 "split brains resolved on $w"
	grep -q "after-split-brain $SB_POLICY resolves it" "$WORK/$loser.log" ||
		fail "$loser's log does not say the policy resolved the split brain"
	node_stop alpha
	node_stop beta
	a=$(sha256sum <"$(backing alpha)")
	b=$(sha256sum <"$(backing beta)")
	assert_eq "$a" "${!want}" "sha256 of alpha's backing vs $w's copy before the reconnect"
	assert_eq "$b" "${!want}" "sha256 of beta's backing vs $w's copy before the reconnect"
	if [[ $w == alpha ]]; then
		sb_expect_hooks discard-peer discard-local
	else
		sb_expect_hooks discard-local discard-peer
	fi
}
