#!/usr/bin/env bash
# timeout: 150
# Resync rate control (issue 4, item 6): 'hakctl resync VOL pause|resume' and the rate limit.
#   alpha primary with resync-rate-max 4M; with the replication path down it takes ~30 MiB of
#   ledger writes; the path comes up and alpha resyncs beta at no more than 4 MiB/s.
#   Paused on the TARGET (beta, so the pause travels to the source): the out-of-sync count stays
#   the same over 2 s and both nodes report the resync paused. Resumed: it moves again. Paused
#   and resumed on the SOURCE too; then it completes: identical copies, ledger 0 missing.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
require_hakd
require_cmd sha256sum jq

LEDGER=$TOOLS/hak-ledger
[[ -x $LEDGER ]] || fail "$LEDGER is not built (make BUILD=${HAK_BUILD#"$REPO"/} SAN=1 bins)"
L=$WORK/pause.ledger

# paused_holds WHAT: out-of-sync bytes on beta stay the same over 2 s
paused_holds() {
	local a b
	sleep 1 # what was in flight lands
	a=$(repl beta out_of_sync_bytes)
	sleep 2
	b=$(repl beta out_of_sync_bytes)
	assert_eq "$b" "$a" "$1: beta's out-of-sync bytes 2 s apart while paused"
	((a > 0)) || fail "$1: the resync finished before the pause could be seen"
	assert_eq "$(repl alpha resync.paused)" true "$1: alpha's resync paused"
	assert_eq "$(repl beta resync.paused)" true "$1: beta's resync paused"
	log "$1: out of sync stays at $a bytes while paused"
}

# moves WHAT BEFORE: the out-of-sync count drops below BEFORE (read while paused) within 3 s
moves() {
	wait_for "(( \$(repl beta out_of_sync_bytes) < $2 ))" 3 ||
		fail "$1: the resync does not move after the resume"
}

PAIR_BLANK=1 PAIR_EXTRA="resync-rate-max 4M" pair_setup sync 128M
pair_report_logs
wait_synced 30
hk alpha primary db >/dev/null || fail "promoting alpha failed"
wait_repl beta peer_role primary 10

path_down 1
wait_for "[[ \$(repl alpha link) != Connected ]]" 10 || fail "alpha did not notice the path loss"
"$LEDGER" write --uri "$(node_uri alpha)" --ledger "$L" --qd 16 --blocks 16384 \
	--max-writes 12000 >"$WORK/w.out" 2>"$WORK/w.err" || fail "ledger writer: $(cat "$WORK/w.err")"
oos=$(repl alpha out_of_sync_bytes)
log "alpha wrote alone: $(grep '^ledger:' "$WORK/w.out"); $oos bytes out of sync"
((oos > 16 << 20)) || fail "only $oos bytes out of sync; the test needs more than 16 MiB"
t0=$(date +%s.%N)
path_up 1
wait_repl alpha link SyncSource 10

out=$(hk beta resync db pause) || fail "pausing on beta failed: $out"
assert_eq "$out" "db: resync paused" "hakctl resync pause output"
paused_holds "paused on the target"
before=$(repl beta out_of_sync_bytes)
hk beta resync db resume >/dev/null || fail "resuming on beta failed"
moves "resumed on the target" "$before"
assert_eq "$(repl alpha resync.paused)" false "alpha's resync after the resume"

hk alpha resync db pause >/dev/null || fail "pausing on alpha failed"
paused_holds "paused on the source"
assert_eq "$(repl alpha resync_paused)" true "alpha's resync_paused"
before=$(repl beta out_of_sync_bytes)
hk alpha resync db resume >/dev/null || fail "resuming on alpha failed"
moves "resumed on the source" "$before"

ta=$(date +%s.%N)
a=$(repl beta out_of_sync_bytes)
sleep 1
b=$(repl beta out_of_sync_bytes)
dt=$(awk -v a="$ta" -v b="$(date +%s.%N)" 'BEGIN {printf "%.3f", b - a}')
# resync-rate-max 4M: the time between the two reads (at most dt, hakctl itself takes a while)
# moves at most 4 MiB/s, plus the bucket (256 KiB) and one run (256 KiB).
lim=$(awk -v t="$dt" 'BEGIN {printf "%d", t * 4 * 1048576 + 524288}')
assert_le $((a - b)) "$lim" "bytes resynced in ${dt}s"
((a > b)) || fail "the resync did not move in ${dt}s ($a -> $b)"
log "${dt}s of resync moved $((a - b)) bytes (limit 4 MiB/s: $lim)"
out=$(hk alpha resync db sideways 2>&1) && fail "a bad action was accepted: $out"
wait_synced 60
log "resync of $oos bytes done $(elapsed_since "$t0")s after the path came up"

hk alpha secondary db >/dev/null || fail "demoting alpha failed"
node_stop alpha
node_stop beta
[[ $(sha256sum <"$(backing alpha)") == $(sha256sum <"$(backing beta)") ]] ||
	fail "alpha's and beta's backing files differ after the resync"
out=$("$LEDGER" verify --ledger "$L" --file "$(backing beta)" 2>&1) || fail "verify: $out"
line=$(grep '^verify:' <<<"$out" | tail -n 1)
assert_eq "$(field_before "$line" missing)" 0 "missing blocks on beta"
assert_eq "$(field_before "$line" corrupt)" 0 "corrupt blocks on beta"
log "copies identical; $line"
log "all checks passed"
