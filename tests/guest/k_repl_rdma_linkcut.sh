#!/usr/bin/env bash
# Runs inside the guest (tests/integration/t_kernel.sh boots it): a real link cut under an RDMA
# pair (Soft-RoCE; the one-device layout of _pair_one_ns_setup in pair.sh).
#   1. a sync pair with 'transport rdma', alpha primary, a hak-ledger storm on alpha;
#   2. the rxe device's netdev taken down (ip link set ... down) mid-storm: alpha drops the link
#      (measured: by which reason, the device's port event or the ping timeout, and how fast),
#      keeps acknowledging writes and tracks them in its bitmap (out_of_sync > 0);
#   3. the netdev up again: the pair reconnects over RDMA (4 RC queue pairs) and resyncs (on
#      Linux 6.1's rxe only after the device is made anew with both nodes stopped; see there);
#   4. both stop, the copies are identical and the ledger verifies on both with 0 missing.
# The SIGSTOP cut stays in k_repl_rdma.sh: it is the peer dying silently, this is the link.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/../integration/pair.sh"
require_hakd
require_cmd sha256sum jq rdma
# shellcheck source=tests/integration/ledger.sh
. "$(dirname "$0")/../integration/ledger.sh"

ms_since() {
	echo $((($(date +%s%N) - $1) / 1000000))
}

NETDEV=
PAIR_TRANSPORT=rdma PAIR_BLANK=1 pair_setup sync 64M
pair_report_logs
NETDEV=ha1-$PAIR_SID
defer "ip link set $NETDEV up 2>/dev/null || true"
wait_synced 60
hk alpha primary db >/dev/null || fail "promoting alpha failed"
wait_repl beta peer_role primary 10
qps=$(rdma_rc_qps)
((qps >= 4)) || fail "$qps RC queue pairs with the pair connected, want 4"

# ---- 1-2. the storm, the link down under it ---------------------------------------------------
# rxe notices: with its netdev down the port goes DOWN (rdma link show: state DOWN,
# physical_state DISABLED) and the device raises IBV_EVENT_PORT_ERR, though the local routes of
# both addresses stay and the packets would loop inside rxe anyway.
"$LEDGER" write --uri "$(node_uri alpha)" --ledger "$WORK/l1" --qd 8 --blocks 4096 \
	--seconds 20 >"$WORK/w1.out" 2>"$WORK/w1.err" &
W=$!
track_pid "$W"
wait_for "grep -q 'storms blocks' '$WORK/w1.err'" 20 ||
	fail "the writer did not start within 20 s: $(cat "$WORK/w1.err")"
sleep 1
lost0=$(grep -c 'Lost the connection' "$WORK/alpha.log" || true)
t0=$(date +%s%N)
ip link set "$NETDEV" down
wait_for "(( \$(grep -c 'Lost the connection' '$WORK/alpha.log') > $lost0 ))" 15 || {
	ip link set "$NETDEV" up
	fail "alpha did not drop the link within 15 s of $NETDEV going down"
}
# How fast, from hakd's own timestamp (polling status under TCG takes longer than the drop).
why=$(grep 'Lost the connection' "$WORK/alpha.log" | sed -n "$((lost0 + 1))p")
t1=$(date -d "${why%% *}" +%s%N)
dt=$(((t1 - t0) / 1000000))
log "alpha dropped the link ${dt} ms after $NETDEV went down: ${why#*: }"
wait_for "[[ \$(repl alpha link) != Connected ]]" 5 || fail "alpha logged the drop but reports Connected"
# Writes go on while cut off, each one marked: the count grows past what the drop marked.
oos1=$(repl alpha out_of_sync_bytes)
wait_for "(( \$(repl alpha out_of_sync_bytes) > $oos1 ))" 5 || {
	ip link set "$NETDEV" up
	fail "alpha tracks no new out-of-sync bytes while cut off (still $oos1)"
}
sleep 1
oos=$(repl alpha out_of_sync_bytes)
ip link set "$NETDEV" up
log "alpha cut off: $oos1 bytes out of sync at the drop, $oos while writing on; $NETDEV up again"

# ---- 3. back over RDMA, resynced -------------------------------------------------------------
rc=0
wait "$W" || rc=$?
sum=$(grep '^ledger:' "$WORK/w1.out") || fail "the writer printed no summary: $(cat "$WORK/w1.err")"
assert_eq "$rc" 0 "writer exit status ($sum)"
assert_eq "$(field_before "$sum" failed)" 0 "failed writes across the link cut ($sum)"
log "storm across the cut: $sum"
# Linux 6.1's rxe connects no more on a device whose connections were torn down while its port
# was down: measured with rping alone (a connected rping pair, the netdev down, both killed, the
# netdev up: a new rping pair on a new port times out; without connections across the cut it
# connects), and with both hakd restarted. So the pair gets 10 s to reconnect on its own (a
# kernel that recovers passes here), then both nodes stop, the device is made anew, and they
# start again: the resync after the cut is what is tested then.
t0=$(date +%s%N)
if wait_for "[[ \$(repl alpha link) != Connecting ]]" 10; then
	log "reconnected on the same rxe device in $(ms_since "$t0") ms"
else
	log "no reconnect on rxe-$PAIR_SID 10 s after $NETDEV came back (rxe on Linux 6.1); re-creating the device with both nodes stopped"
	node_stop alpha
	node_stop beta
	rdma link delete "rxe-$PAIR_SID"
	rdma_dev_add
	node_start alpha
	node_start beta
	t0=$(date +%s%N)
fi
wait_synced 120
log "connected over RDMA and resynced $(repl alpha bytes_resynced) bytes in $(ms_since "$t0") ms"
((qps = $(rdma_rc_qps), qps >= 4)) || fail "$qps RC queue pairs after the reconnect, want 4"

# ---- 4. quiesce and compare -------------------------------------------------------------------
if [[ $(repl alpha role) == primary ]]; then
	hk alpha secondary db >/dev/null || fail "demoting alpha failed"
	wait_repl beta peer_role secondary 10
fi
node_stop alpha
node_stop beta
assert_eq "$(sha256sum <"$(backing alpha)")" "$(sha256sum <"$(backing beta)")" "the two copies"
for f in alpha beta; do
	ledger_verify "$WORK/l1" --file "$(backing $f)"
done
log "PASS: RDMA link cut ($NETDEV down) under a storm: dropped ${dt} ms after the cut, $oos bytes tracked, connected again over RDMA and resynced; copies identical, 0 acknowledged writes missing"
