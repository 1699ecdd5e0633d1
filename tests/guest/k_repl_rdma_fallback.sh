#!/usr/bin/env bash
# Runs inside the guest (tests/integration/t_kernel.sh boots it): transport rdma,tcp moving a live
# connection from TCP onto RDMA in place, on Soft-RoCE (see _pair_one_ns_setup in pair.sh).
#   1. a sync pair with 'transport rdma,tcp' starts while rdma_rxe is loaded but no rxe device
#      exists: it connects over TCP, and each node says so once;
#   2. a hak-ledger storm on alpha; meanwhile the rxe device is added ('rdma link add');
#   3. within a bounded time both nodes replicate over RDMA: four RC queue pairs, one in-place
#      move on each side, still the first connection on each (no disconnect event, no lost
#      connection in the logs: a drop-and-reconnect would count a second one), no resync;
#   4. the storm ends with 0 failed writes; after the stop both copies are identical and the
#      ledger verifies on both (0 missing, 0 corrupt).
# ping-timeout 5s, not pair.sh's 1s: librdmacm's first calls once the device exists block the
# caller's loop in this TCG guest (measured with ASan: rdma_create_id + rdma_resolve_addr up to
# 0.55 s on alpha; beta's first rdma_listen 0.74 s, and in one run about 2 s while 'rdma link add'
# still ran), so the other node heard nothing for that long. 1 s lost the link in two runs of
# eight at that moment; that measures the emulated guest, not the move, whose own frames are
# counted below (connections stays 1).
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/../integration/pair.sh"
require_hakd
require_cmd sha256sum jq rdma
LEDGER=$TOOLS/hak-ledger
[[ -x $LEDGER ]] || fail "$LEDGER is not built"

# field_before TEXT WORD: the number in front of WORD in a hak-ledger summary line.
field_before() {
	local re="([0-9]+) $2"
	[[ $1 =~ $re ]] || fail "no '$2' count in: $1"
	echo "${BASH_REMATCH[1]}"
}

verify_clean() {
	local out line
	out=$("$LEDGER" verify --ledger "$WORK/l" --file "$1" 2>&1) || fail "ledger verify on $1: $out"
	line=$(grep '^verify:' <<<"$out" | tail -n 1) || fail "no verify summary: $out"
	assert_eq "$(field_before "$line" missing)" 0 "missing blocks on $1"
	assert_eq "$(field_before "$line" corrupt)" 0 "corrupt blocks on $1"
	log "verify on $1: ${line#verify: }"
}

rc_qps() {
	rdma resource show qp 2>/dev/null | grep -c 'type RC' || true
}

PAIR_PING_TIMEOUT=5s PAIR_LOG_LEVEL=debug PAIR_TRANSPORT=rdma,tcp PAIR_ONE_NS=1 PAIR_RDMA_LATER=1 \
	PAIR_BLANK=1 pair_setup sync 64M
HAKD_LOGS[alpha]=$WORK/alpha.log
HAKD_LOGS[beta]=$WORK/beta.log
wait_synced 60
for n in alpha beta; do
	assert_eq "$(repl $n transport)" tcp "$n's transport before the rxe device exists"
	assert_eq "$(repl $n transport_retrying)" true "$n retrying RDMA"
done
assert_eq "$(rc_qps)" 0 "RC queue pairs without an rxe device"
log "connected over TCP: $(hk alpha status | grep 'link Connected over')"

hk alpha primary db >/dev/null || fail "promoting alpha failed"
wait_repl beta peer_role primary 10
"$LEDGER" write --uri "$(node_uri alpha)" --ledger "$WORK/l" --qd 8 --blocks 4096 \
	--seconds 25 >"$WORK/w.out" 2>"$WORK/w.err" &
W=$!
track_pid "$W"
wait_for "grep -q 'storms blocks' '$WORK/w.err'" 20 ||
	fail "the writer did not start within 20 s: $(cat "$WORK/w.err")"
sleep 2
t0=$(date +%s%N)
rdma_dev_add
log "added rxe-$PAIR_SID under the storm"
wait_for "[[ \$(repl alpha transport)/\$(repl beta transport) == rdma/rdma ]]" 30 ||
	fail "still $(repl alpha transport)/$(repl beta transport) 30 s after the rxe device came"
ms=$((($(date +%s%N) - t0) / 1000000))
# The move's own time, from alpha's log line (hakctl status polls slowly under TCG).
moved=$(grep -m1 'in place (move 1)' "$WORK/alpha.log" | cut -d' ' -f1)
ms_log=$((($(date -d "$moved" +%s%N) - t0) / 1000000))
log "alpha moved onto RDMA ${ms_log} ms after 'rdma link add' began (its log); the test saw both on RDMA after ${ms} ms"
# Where the time went: the RDMA tries and the move, as each node logged them.
grep -h 'RDMA\|move\|TIMING' "$WORK/alpha.log" "$WORK/beta.log" | grep -v 'No RDMA path' | tail -n 40 | sed 's/^/    /'
pid_alive "$W" || fail "the storm ended before the move: $(cat "$WORK/w.out" "$WORK/w.err")"
wait_for "(( \$(rc_qps) == 4 ))" 10 || fail "$(rc_qps) RC queue pairs after the move, want 4: $(rdma resource show qp)"
for n in alpha beta; do
	assert_eq "$(repl $n transport_switches)" 1 "in-place moves on $n"
	assert_eq "$(repl $n connections)" 1 "connections of $n (a reconnect would count 2)"
	assert_eq "$(repl $n transport_retrying)" false "$n retrying RDMA after the move"
	assert_eq "$(repl $n link)" Connected "link of $n"
	grep -q 'Event disconnect' "$WORK/$n.log" && fail "$n disconnected: $(grep 'disconnect' "$WORK/$n.log")"
	grep -q 'Lost the connection' "$WORK/$n.log" && fail "$n lost the connection: $(grep 'Lost the' "$WORK/$n.log")"
	assert_eq "$(grep -c 'replicating over TCP\.' "$WORK/$n.log")" 1 "fallback lines of $n"
	assert_contains "$(grep 'in place (move 1)' "$WORK/$n.log")" "from TCP onto RDMA" "$n's move line"
done
assert_eq "$(repl beta resyncs_completed)" 0 "resyncs after the move"

rc=0
wait "$W" || rc=$?
sum=$(grep '^ledger:' "$WORK/w.out") || fail "the writer printed no summary: $(cat "$WORK/w.err")"
assert_eq "$rc" 0 "writer exit status ($sum)"
assert_eq "$(field_before "$sum" failed)" 0 "failed writes across the move ($sum)"
log "storm across the move: $sum"
assert_eq "$(repl alpha connections)/$(repl beta connections)" 1/1 "connections after the storm"
wait_synced 30

hk alpha secondary db >/dev/null || fail "demoting alpha failed"
wait_repl beta peer_role secondary 10
node_stop alpha
node_stop beta
assert_eq "$(sha256sum <"$(backing alpha)")" "$(sha256sum <"$(backing beta)")" "the two copies"
verify_clean "$(backing alpha)"
verify_clean "$(backing beta)"
log "PASS: rdma,tcp: TCP without a device, moved onto RDMA in place ${ms_log} ms after the device came, under a storm with 0 failed writes; one connection; copies identical"
