#!/usr/bin/env bash
# timeout: 180
# hakctl wait-sync (issue 27, item 5) on a pair with a 48 MiB out-of-sync region, resynced at
# resync-rate-max 4M (about 12 s):
#   while the replication path is down: --timeout 1 exits 4 (the copies differ);
#   during the resync, on a terminal (script -qc): --timeout 2 exits 4 after redrawing its
#     progress bar in place ('\r[###---]  NN.N%'), never a new line per update;
#   through a pipe: plain lines, at most one every 5 s, then "in sync: db" and exit 0, and at
#     that moment both copies have the same sha256;
#   a disconnected (StandAlone) volume: exit 5 with the reason; an unknown volume: exit 1.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
require_hakd
require_cmd sha256sum jq nbdcopy script

# ws NODE ARGS...: wait-sync on NODE, through a pipe; sets WS_RC, WS_OUT (stdout), WS_ERR
ws() {
	local n=$1
	shift
	WS_RC=0
	WS_OUT=$(timeout 120 "$HAKCTL" --control "$WORK/$n.ctl" wait-sync "$@" 2>"$WORK/ws.err") ||
		WS_RC=$?
	WS_ERR=$(cat "$WORK/ws.err")
}

same_copies() {
	[[ $(sha256sum <"$(backing alpha)") == "$(sha256sum <"$(backing beta)")" ]]
}

PAIR_BLANK=1 PAIR_EXTRA="resync-rate-max 4M" pair_setup sync 128M
pair_report_logs
ws alpha db --timeout 30
assert_eq "$WS_RC" 0 "wait-sync on a blank pair (stderr: $WS_ERR)"
assert_contains "$WS_OUT" "in sync: db (after " "wait-sync's last line"
hk alpha primary db >/dev/null || fail "promoting alpha failed"
wait_repl beta peer_role primary 10

path_down 1
wait_for "[[ \$(repl alpha link) != Connected ]]" 10 || fail "alpha did not notice the path loss"
head -c 48M /dev/urandom >"$WORK/src"
nbdcopy "$WORK/src" "$(node_uri alpha)" || fail "writing 48 MiB on alpha failed"
oos=$(repl alpha out_of_sync_bytes)
((oos >= 48 << 20)) || fail "only $oos bytes out of sync after writing 48 MiB"
ws alpha --timeout 1
assert_eq "$WS_RC" 4 "wait-sync --timeout 1 with the path down (stdout: $WS_OUT; stderr: $WS_ERR)"
assert_contains "$WS_ERR" "hakctl wait-sync: not in sync after 1 s: db: Connecting, disk UpToDate" \
	"wait-sync's timeout message"
same_copies && fail "the copies are already the same with the path down"

path_up 1
wait_repl alpha link SyncSource 10
script -qec "timeout 20 '$HAKCTL' --control '$WORK/beta.ctl' wait-sync db --timeout 2" \
	/dev/null >"$WORK/tty.out" 2>&1 </dev/null && rc=0 || rc=$?
tty_out=$(cat "$WORK/tty.out")
assert_eq "$rc" 4 "wait-sync --timeout 2 on a terminal during the resync (output: $tty_out)"
# redrawn in place: several carriage returns, each followed by the bar and a percentage
n=$(grep -o $'\r\[[#-]*\] *[0-9.]*%' "$WORK/tty.out" | wc -l)
((n >= 2)) || fail "the progress bar was drawn $n times in 2 s on a terminal: $(od -c "$WORK/tty.out" | head -20)"
assert_contains "$tty_out" "MiB/s, ETA" "the terminal's progress bar"
assert_contains "$tty_out" "(db: SyncTarget, disk Inconsistent, peer UpToDate)" \
	"the terminal's progress bar"
# one line for the bar (ended by the timeout message), not one per redraw
lines=$(tr -cd '\n' <"$WORK/tty.out" | wc -c)
((lines <= 3)) || fail "$lines lines on the terminal; the bar must be redrawn in place"
log "terminal: the bar was drawn $n times in place, $lines lines"

same_copies && fail "the copies are the same before the resync finished"
t0=$(date +%s.%N)
ws beta db
secs=$(elapsed_since "$t0")
assert_eq "$WS_RC" 0 "wait-sync through a pipe (stderr: $WS_ERR)"
same_copies || fail "wait-sync returned 0 but the copies differ"
assert_eq "$(repl beta disk)" UpToDate "beta's disk after wait-sync"
assert_eq "$(repl alpha out_of_sync_bytes)" 0 "alpha's out-of-sync bytes after wait-sync"
log "wait-sync returned after ${secs}s: $WS_OUT"
[[ $WS_OUT != *$'\r'* ]] || fail "a carriage return in wait-sync's output through a pipe"
last=$(tail -n 1 <<<"$WS_OUT")
[[ $last =~ ^in\ sync:\ db\ \(after\ [0-9.]+\ s\)$ ]] || fail "wait-sync's last line: $last"
# a progress line: wait-sync saw the resync unfinished, and waited for its end
progress=$(grep -c '^wait-sync: [0-9.]*% resynced, ' <<<"$WS_OUT" || true)
((progress >= 1)) || fail "no progress line through a pipe (the resync ended too early?): $WS_OUT"
max=$(awk -v s="$secs" 'BEGIN {printf "%d", s / 5 + 1}')
assert_le "$progress" "$max" "progress lines in ${secs}s (one every 5 s at most)"

hk beta disconnect db >/dev/null || fail "disconnecting beta failed"
ws beta db --timeout 30
assert_eq "$WS_RC" 5 "wait-sync on a StandAlone volume (stdout: $WS_OUT; stderr: $WS_ERR)"
assert_contains "$WS_ERR" "hakctl wait-sync: volume db is StandAlone (disconnected); it connects again after 'hakctl connect db'" \
	"wait-sync's message for a StandAlone volume"
ws beta nosuch --timeout 5
assert_eq "$WS_RC" 1 "wait-sync on an unknown volume"
assert_eq "$WS_ERR" "hakctl wait-sync: hakd serves no volume named nosuch; it serves: db." \
	"wait-sync's message for an unknown volume"
hk beta connect db >/dev/null || fail "connecting beta again failed"
ws beta --timeout 60
assert_eq "$WS_RC" 0 "wait-sync after connect (stderr: $WS_ERR)"

hk alpha secondary db >/dev/null || fail "demoting alpha failed"
node_stop alpha
node_stop beta
same_copies || fail "the copies differ at the end"
log "all checks passed"
