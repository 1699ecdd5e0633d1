#!/usr/bin/env bash
# Runs inside the guest (tests/integration/t_kernel.sh boots it): replication over RDMA, on
# Soft-RoCE (rdma_rxe; see _pair_one_ns_setup in pair.sh for why both nodes share one device).
#   1. a sync pair with 'transport rdma' connects; its four streams are RC queue pairs (rdma
#      resource show);
#   2. a hak-ledger storm on alpha, then alpha killed with SIGKILL mid-storm, beta (UpToDate)
#      promoted without --force: 0 acknowledged writes missing on it;
#   3. alpha restarts as a secondary and is resynced over RDMA;
#   4. the link cut under a storm on beta: alpha frozen (SIGSTOP), beta's ping timeout drops the
#      RDMA streams, beta keeps writing and tracks the blocks in its bitmap; alpha thawed, it
#      finds its queue pairs disconnected, the pair reconnects over RDMA and resyncs;
#   5. both stop, the copies are identical and both ledgers verify on both files.
# Not a device removal: with Linux 6.1's rxe, 'rdma link delete' waits until every process that
# opened the device has exited (rxe cannot disassociate a user context; measured: it hung with
# both hakd running), so it can cut a link only by killing the nodes.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/../integration/pair.sh"
require_hakd
require_cmd sha256sum jq rdma
# shellcheck source=tests/integration/ledger.sh
. "$(dirname "$0")/../integration/ledger.sh"

PAIR_TRANSPORT=rdma PAIR_BLANK=1 pair_setup sync 64M
HAKD_LOGS[alpha]=$WORK/alpha.log
HAKD_LOGS[beta]=$WORK/beta.log
wait_synced 60
# 2 streams (data, meta) per node, each its own RC queue pair.
qps=$(rdma_rc_qps)
((qps >= 4)) || fail "$qps RC queue pairs with the pair connected, want 4: $(rdma resource show qp)"
log "connected over RDMA: $qps RC queue pairs"

# ---- 2. storm, kill the primary, promote the standby ----------------------------------------
hk alpha primary db >/dev/null || fail "promoting alpha failed"
wait_repl beta peer_role primary 10
"$LEDGER" write --uri "$(node_uri alpha)" --ledger "$WORK/l1" --qd 16 --blocks 4096 \
	--seconds 60 >"$WORK/w1.out" 2>"$WORK/w1.err" &
W=$!
track_pid "$W"
wait_for "grep -q 'storms blocks' '$WORK/w1.err'" 20 ||
	fail "the writer did not start within 20 s: $(cat "$WORK/w1.err")"
sleep 3
pid_alive "$W" || fail "the writer ended before the kill: $(cat "$WORK/w1.out" "$WORK/w1.err")"
node_kill9 alpha
wait_for "! pid_alive $W" 15 || fail "the writer still runs 15 s after the kill"
rc=0
wait "$W" || rc=$?
sum=$(grep '^ledger:' "$WORK/w1.out") || fail "the writer printed no summary: $(cat "$WORK/w1.err")"
assert_eq "$rc" 0 "writer exit status ($sum)"
acked=$(field_before "$sum" "writes acknowledged")
((acked > 0)) || fail "no write was acknowledged in 3 s over RDMA: $sum"
log "storm over RDMA until the kill: $sum"
wait_for "[[ \$(repl beta link) != Connected ]]" 10 ||
	fail "beta still believes it is connected to the killed alpha"
assert_eq "$(repl beta disk)" UpToDate "disk of the survivor beta"
out=$(hk beta primary db 2>&1) || fail "promoting beta without --force failed: $out"
ledger_verify "$WORK/l1" --uri "$(node_uri beta)"

# ---- 3. alpha back as secondary, resynced over RDMA -----------------------------------------
node_start alpha
wait_synced 90
assert_eq "$(repl alpha role)" secondary "role of the restarted alpha"
log "alpha resynced $(repl alpha bytes_resynced) bytes from beta over RDMA"

# ---- 4. the link cut under writes: alpha frozen, then thawed --------------------------------
# Blocks of their own (from 32 MiB): the first ledger's blocks must keep what it acknowledged.
"$LEDGER" write --uri "$(node_uri beta)" --ledger "$WORK/l2" --qd 8 --blocks 4096 \
	--region-offset $((32 << 20)) --seconds 8 >"$WORK/w2.out" 2>"$WORK/w2.err" &
W=$!
track_pid "$W"
wait_for "grep -q 'storms blocks' '$WORK/w2.err'" 20 ||
	fail "the second writer did not start within 20 s: $(cat "$WORK/w2.err")"
sleep 1
kill -STOP "${NODE_PIDS[alpha]}"
log "froze alpha (pid ${NODE_PIDS[alpha]}) under the storm"
wait_for "[[ \$(repl beta link) != Connected ]]" 15 || {
	kill -CONT "${NODE_PIDS[alpha]}"
	fail "beta still reports Connected 15 s after alpha froze"
}
sleep 2
link=$(repl beta link)
oos=$(repl beta out_of_sync_bytes)
kill -CONT "${NODE_PIDS[alpha]}"
((oos > 0)) || fail "beta wrote without its peer but tracks $oos out-of-sync bytes"
log "beta cut off: link $link, $oos bytes out of sync; alpha thawed"
rc=0
wait "$W" || rc=$?
sum=$(grep '^ledger:' "$WORK/w2.out") || fail "the second writer printed no summary"
assert_eq "$rc" 0 "second writer exit status ($sum)"
assert_eq "$(field_before "$sum" failed)" 0 "failed writes across the link cut ($sum)"
log "storm across the cut: $sum"
wait_synced 120
log "reconnected over RDMA and resynced"
((qps = $(rdma_rc_qps), qps >= 4)) || fail "$qps RC queue pairs after the reconnect, want 4"

# ---- 5. quiesce and compare -----------------------------------------------------------------
hk beta secondary db >/dev/null || fail "demoting beta failed"
wait_repl alpha peer_role secondary 10
node_stop alpha
node_stop beta
assert_eq "$(sha256sum <"$(backing alpha)")" "$(sha256sum <"$(backing beta)")" "the two copies"
for f in alpha beta; do
	ledger_verify "$WORK/l1" --file "$(backing $f)"
	ledger_verify "$WORK/l2" --file "$(backing $f)"
done
log "PASS: sync pair over RDMA: kill -9 and promotion with 0 acknowledged writes missing, resync, a frozen peer cut off and back with resync; copies identical"
