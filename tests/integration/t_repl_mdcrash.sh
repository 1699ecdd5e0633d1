#!/usr/bin/env bash
# timeout: 300
# Metadata crash safety (issue 3): a kill -9 at any instant followed by a restart never loses
# track of a block that may differ from the peer. MDCRASH_ITERATIONS (default 8) iterations:
#   the pair is in sync, alpha primary; the replication path goes down; a hak-ledger storm runs on
#   alpha (odd iterations start it at once, so the kill may catch writes still waiting for the
#   peer; even ones after alpha noticed the loss, so it tracks them in its bitmap); kill -9 of
#   alpha after a random 0-1.5 s; alpha restarts (secondary, crashed primary), is promoted again
#   (UpToDate, no --force) and takes a few more writes; every third iteration it is also stopped
#   cleanly and started once more before that, which must not make it forget the crash
#   (MDCRASH_CLEAN_RESTART_EVERY=N changes the 3, 0 never does it);
#   the path comes back, the pair syncs, both nodes stop: the backing files are identical and the
#   ledger verifies on beta's file (0 missing, 0 corrupt).
# Then one iteration kills the SECONDARY while alpha writes connected and restarts it during the
#   storm: after the resync the copies are identical again.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
require_hakd
require_cmd sha256sum jq

LEDGER=$TOOLS/hak-ledger
[[ -x $LEDGER ]] || fail "$LEDGER is not built (make BUILD=${HAK_BUILD#"$REPO"/} SAN=1 bins)"
ITER=${MDCRASH_ITERATIONS:-8}
# Every Nth iteration restarts the crashed alpha cleanly once more (0: never).
CLEAN_EVERY=${MDCRASH_CLEAN_RESTART_EVERY:-3}
BLOCKS=4096
L=$WORK/mdcrash.ledger

# storm_start ARGS...: a background hak-ledger writer on alpha; returns once it writes. Sets W.
storm_start() {
	"$LEDGER" write --uri "$(node_uri alpha)" --ledger "$L" --qd 16 --blocks "$BLOCKS" "$@" \
		>"$WORK/w.out" 2>"$WORK/w.err" &
	W=$!
	track_pid "$W"
	wait_for "grep -q 'storms blocks' '$WORK/w.err'" 10 ||
		fail "the writer did not start within 10 s: $(cat "$WORK/w.err")"
}

# storm_end WHAT STOP_REASON: wait for the writer; exit 0 and the expected stop reason. Sets ACKED.
storm_end() {
	local rc=0 sum
	wait_for "! pid_alive $W" 20 || fail "$1: the writer still runs"
	wait "$W" || rc=$?
	sum=$(grep '^ledger:' "$WORK/w.out") ||
		fail "$1: the writer printed no summary: $(cat "$WORK/w.out" "$WORK/w.err")"
	assert_eq "$rc" 0 "$1: writer exit status ($sum)"
	assert_contains "$sum" "stopped: $2" "$1: writer summary"
	ACKED=$(field_before "$sum" "writes acknowledged")
}

# compare_and_restart WHAT: demote, stop both, identical files, ledger clean on beta's file; then
# both run again, in sync, alpha primary.
compare_and_restart() {
	local out rc=0 line
	hk alpha secondary db >/dev/null || fail "$1: demoting alpha failed"
	wait_repl beta peer_role secondary 10
	node_stop alpha
	node_stop beta
	SHA_A=$(sha256sum <"$(backing alpha)")
	SHA_B=$(sha256sum <"$(backing beta)")
	if [[ $SHA_A != "$SHA_B" ]]; then
		cmp -l "$(backing alpha)" "$(backing beta)" | awk '{print int(($1 - 1) / 4096)}' |
			uniq | head -n 20 | tr '\n' ' ' >"$WORK/diff.blocks" || true
		fail "$1: alpha's and beta's backing files differ; first differing 4 KiB blocks:" \
			"$(cat "$WORK/diff.blocks")"
	fi
	out=$("$LEDGER" verify --ledger "$L" --file "$(backing beta)" 2>&1) || rc=$?
	line=$(grep '^verify:' <<<"$out" | tail -n 1) || true
	((rc == 0)) || fail "$1: the ledger does not verify on beta's file (exit $rc): $out"
	assert_eq "$(field_before "$line" missing)" 0 "$1: missing blocks on beta"
	assert_eq "$(field_before "$line" corrupt)" 0 "$1: corrupt blocks on beta"
	VERIFY_LINE=${line#verify: }
	node_start alpha
	node_start beta
	wait_synced 30
	hk alpha primary db >/dev/null || fail "$1: promoting alpha failed"
	wait_repl beta peer_role primary 10
}

PAIR_BLANK=1 pair_setup sync 32M
HAKD_LOGS[alpha]=$WORK/alpha.log
HAKD_LOGS[beta]=$WORK/beta.log
wait_synced 30
hk alpha primary db >/dev/null || fail "promoting alpha failed"
wait_repl beta peer_role primary 10

T0=$(date +%s.%N)
for ((i = 1; i <= ITER; i++)); do
	ti=$(date +%s.%N)
	what="iteration $i"
	path_down 1
	if ((i % 2 == 0)); then
		# alpha has noticed: every write from here on goes to its bitmap only.
		wait_for "[[ \$(repl alpha link) != Connected ]]" 10 ||
			fail "$what: alpha did not notice the path going down"
		mode="after the loss was noticed"
	else
		mode="right after the path went down"
	fi
	storm_start --seconds 30
	delay=$(awk -v r="$RANDOM" 'BEGIN {printf "%.2f", 1.5 * r / 32767}')
	sleep "$delay"
	node_kill9 alpha
	storm_end "$what" "server disconnected"
	acked=$ACKED
	node_start alpha
	assert_eq "$(repl alpha role)" secondary "$what: role of the restarted alpha"
	assert_eq "$(repl alpha crashed_primary)" true "$what: crashed_primary of the restarted alpha"
	extra=""
	if ((CLEAN_EVERY > 0 && i % CLEAN_EVERY == 0)); then
		# A clean restart in between must keep the mark: the bitmap may lack the last bits.
		node_stop alpha
		node_start alpha
		extra=", a clean restart (crashed_primary then $(repl alpha crashed_primary))"
	fi
	out=$(hk alpha primary db 2>&1) || fail "$what: promoting the restarted alpha failed: $out"
	storm_start --max-writes 500
	storm_end "$what (after the restart)" "max writes reached"
	path_up 1
	wait_synced 60
	rb=$(repl beta bytes_resynced)
	compare_and_restart "$what"
	log "$what: storm started $mode, alpha killed after ${delay}s ($acked writes acked)$extra;" \
		"copies identical after a resync of $rb bytes; beta: $VERIFY_LINE;" \
		"$(elapsed_since "$ti")s"
done
log "$ITER crash iterations in $(elapsed_since "$T0")s"

# ---- the secondary crashes under a connected storm ------------------------------------------
ti=$(date +%s.%N)
storm_start --seconds 4
sleep 1
node_kill9 beta
sleep 0.5
node_start beta
storm_end "secondary kill" "time limit"
assert_contains "$(grep '^ledger:' "$WORK/w.out")" " 0 failed" "secondary kill: writer summary"
wait_synced 60
assert_eq "$(repl beta crashed_primary)" false "secondary kill: crashed_primary of beta"
rb=$(repl beta bytes_resynced)
compare_and_restart "secondary kill"
log "secondary kill: beta killed under a storm of $ACKED acked writes and restarted during it;" \
	"copies identical after a resync of $rb bytes; beta: $VERIFY_LINE; $(elapsed_since "$ti")s"
node_stop alpha
node_stop beta
log "all checks passed"
