#!/usr/bin/env bash
# timeout: 200
# fencing resource-and-stonith, with the acknowledged-write ledger: the cluster pair of cluster.sh
# with a fence-hook (WORK/fence.sh) whose behaviour the test picks, fence-timeout 2s.
#   d. the hook hangs: the replication link (path 1) is cut under a write storm; alpha freezes,
#      runs the hook with HAK_PEER=beta and HAK_FENCE_TIMEOUT, kills it after fence-timeout, and
#      since it failed, writes stay
#      frozen (no write is acknowledged for 3 s, the freeze is reported stuck) although beta
#      marked itself Outdated; when the link returns, beta resyncs and writes resume.
#   e. the hook kills beta's hakd (as a power fence would): alpha resumes once the hook
#      succeeded; beta restarted resyncs; the copies are equal and hold every acknowledged write.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
# shellcheck source=tests/integration/cluster.sh
. "$(dirname "$0")/cluster.sh"
require_hakd
require_cmd jq sha256sum
# shellcheck source=tests/integration/ledger.sh
. "$(dirname "$0")/ledger.sh"


cat >"$WORK/fence.sh" <<EOF
#!/bin/sh
echo "peer=\$HAK_PEER timeout=\$HAK_FENCE_TIMEOUT" >>"$WORK/fence.calls"
case "\$(cat "$WORK/fence.mode")" in
kill) kill -KILL "\$(cat "$WORK/beta.pid")" && exit 0 ;;
hang) exec sleep 60 ;;
esac
exit 1
EOF
chmod +x "$WORK/fence.sh"
echo hang >"$WORK/fence.mode"
CLUSTER_EXTRA="fence-hook $WORK/fence.sh" PAIR_EXTRA="fencing resource-and-stonith
    fence-timeout 2s" PAIR_BLANK=1 cluster_setup sync 64M
pair_report_logs
wait_synced 30
wait_for "[[ \$(role alpha) == primary ]]" 10 || fail "alpha did not become primary"
hk beta unstandby >/dev/null
wait_synced 30
assert_eq "$(fence alpha policy)" resource-and-stonith "alpha's fencing"

# ---- d. the fence hook fails: writes stay frozen until the peer is back and in sync ----
L1=$WORK/d.ledger
ledger_storm alpha "$L1" 1 40
wait_for "(( \$(ledger_records $L1) > 200 ))" 10 || fail "the storm got no writes acknowledged"
path_down 1
wait_for "[[ \$(fence alpha frozen) == true ]]" 10 || fail "alpha did not freeze: $(hk alpha status)"
wait_for "[[ -s $WORK/fence.calls ]]" 10 || fail "the fence hook was not run"
assert_eq "$(head -n1 "$WORK/fence.calls")" "peer=beta timeout=2" "the hook's environment"
sleep 0.5
n0=$(ledger_records "$L1")
wait_for "[[ \$(fence alpha stuck) == true ]]" 5 || fail "the freeze was not reported stuck"
sleep 3
assert_eq "$(ledger_records "$L1")" "$n0" "writes acknowledged while the hook had failed"
assert_eq "$(fence alpha frozen)" true "alpha frozen with a failed hook"
log "d: frozen for $(fence alpha frozen_ms) ms with $(fence alpha frozen_writes) parked writes," \
	"none acknowledged; beta's disk: $(repl beta disk)"
grep "the peer is NOT fenced" "$WORK/alpha.log" || fail "alpha did not log the failed hook"
path_up 1
wait_for "[[ \$(fence alpha frozen) == false ]]" 30 || fail "alpha stayed frozen after the link returned"
log "d: resumed after $(fence alpha last_ms) ms ($(fence alpha last_how))"
wait_for "(( \$(ledger_records $L1) > $n0 + 100 ))" 10 || fail "writes did not resume"
kill -TERM "$STORM"
wait "$STORM" || true
log "d: storm: $(cat "$L1.out")"
wait_synced 30

# ---- e. the fence hook powers beta off: writes resume once it succeeded ----
echo kill >"$WORK/fence.mode"
echo "${NODE_PIDS[beta]}" >"$WORK/beta.pid"
L2=$WORK/e.ledger
ledger_storm alpha "$L2" 2 30
wait_for "(( \$(ledger_records $L2) > 200 ))" 10 || fail "the storm got no writes acknowledged"
path_down 1
wait_for "! node_alive beta" 15 || fail "the fence hook did not kill beta"
wait_for "[[ \$(fence alpha frozen) == false && \$(fence alpha fences) == 2 ]]" 10 ||
	fail "alpha did not resume after the hook succeeded: $(hk alpha status --json | jq -c .volumes[0].replication.fencing)"
log "e: alpha resumed after $(fence alpha last_ms) ms ($(fence alpha last_how))"
n1=$(ledger_records "$L2")
wait_for "(( \$(ledger_records $L2) > $n1 + 100 ))" 10 || fail "writes did not go on"
kill -TERM "$STORM"
wait "$STORM" || true
log "e: storm: $(cat "$L2.out")"
path_up 1
node_kill9 beta
node_start beta
wait_synced 40
node_stop alpha
node_stop beta
assert_eq "$(sha256sum <"$(backing beta)")" "$(sha256sum <"$(backing alpha)")" "both copies"
ledger_clean "$L1" "$(backing beta)"
ledger_clean "$L2" "$(backing beta)"
log "PASS"
