#!/usr/bin/env bash
# timeout: 240
# hak's fence-peer / unfence-peer contract without Pacemaker (t_pacemaker_fence runs the real
# handlers under a real cluster): a pair without a cluster section, whose volume names two
# recording handlers; fence-peer exits with the code the test writes in WORK/fence-rc.
#   1. the policy defaults to resource-only; a Primary whose replication link is cut freezes,
#      and the handler sees HAK_VOLUME, HAK_PEER, HAK_NODE and HAK_FENCE_TIMEOUT;
#   2. exit 6 (DRBD's "the peer is primary") and exit 1 confirm nothing: no write is
#      acknowledged for 5 s, and the handler runs again every fence-timeout (2 s);
#   3. exit 4: the freeze ends, writes resume (Primary alone);
#   4. the heal: a resync, then unfence-peer runs once the peer is in sync;
#   5. the ledger finds every acknowledged write on the Primary, both copies end equal.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
# shellcheck source=tests/integration/ledger.sh
. "$(dirname "$0")/ledger.sh"
require_hakd
require_cmd jq

cat >"$WORK/fence-peer" <<EOF
#!/bin/sh
echo "fence \$HAK_VOLUME \$HAK_PEER \$HAK_NODE \$HAK_FENCE_TIMEOUT \$(date +%s.%N)" >>$WORK/handlers.log
exit \$(cat $WORK/fence-rc)
EOF
cat >"$WORK/unfence-peer" <<EOF
#!/bin/sh
echo "unfence \$HAK_VOLUME \$HAK_PEER \$HAK_NODE" >>$WORK/handlers.log
exit 0
EOF
chmod 755 "$WORK/fence-peer" "$WORK/unfence-peer"
echo 6 >"$WORK/fence-rc"
: >"$WORK/handlers.log"

PAIR_EXTRA="fence-peer $WORK/fence-peer
    unfence-peer $WORK/unfence-peer
    fence-timeout 2s" PAIR_BLANK=1 pair_setup sync 64M
pair_report_logs
wait_synced 30
hk alpha primary db >/dev/null
assert_eq "$(repl alpha fencing.policy)" resource-only "the default fencing with a fence-peer handler"
# the unfence-peer owed after a start ran once both were in sync
wait_for "[[ \$(grep -c '^unfence' $WORK/handlers.log) == 2 ]]" 10 ||
	fail "unfence-peer did not run once on each node after the first sync: $(cat "$WORK/handlers.log")"
assert_eq "$(grep -c '^fence' "$WORK/handlers.log")" 0 "fence-peer runs before any loss"

L=$WORK/storm.ledger
ledger_storm alpha "$L" 1 120
wait_for "(( \$(ledger_records $L) > 1000 ))" 30 || fail "the ledger writer did not get going: $(cat "$L.err")"

# ---- 1 and 2: the cut; the handler says 6, then 1: frozen -----------------------------------
path_down 1
wait_for "[[ \$(repl alpha fencing.frozen) == true ]]" 10 || fail "alpha did not freeze after the cut"
wait_for "grep -q '^fence' $WORK/handlers.log" 10 || fail "fence-peer did not run"
read -r _ v p n t _ <<<"$(grep -m1 '^fence' "$WORK/handlers.log")"
assert_eq "$v $p $n $t" "db beta alpha 2" "the handler's HAK_VOLUME HAK_PEER HAK_NODE HAK_FENCE_TIMEOUT"
sleep 2.5
echo 1 >"$WORK/fence-rc"
n0=$(ledger_records "$L")
sleep 5
n1=$(ledger_records "$L")
assert_eq "$n1" "$n0" "writes acknowledged while the handler answered 6, then 1"
assert_eq "$(repl alpha fencing.frozen)" true "alpha frozen"
runs=$(grep -c '^fence' "$WORK/handlers.log")
((runs >= 3)) || fail "fence-peer ran $runs times in 7.5 s of freeze with a 2 s fence-timeout"
grep -q "fence-peer handler against beta ended with exit status 6" "$WORK/alpha.log" ||
	fail "hakd did not log the failed handler"
log "frozen for 7.5 s with the handler answering 6, then 1: $runs runs, no write acknowledged"

# ---- 3. exit 4: resume ----------------------------------------------------------------------
echo 4 >"$WORK/fence-rc"
wait_for "[[ \$(repl alpha fencing.frozen) == false ]]" 10 || fail "the freeze did not end after exit 4"
assert_contains "$(repl alpha fencing.last_how)" "fence-peer handler (exit 4)" "how the freeze ended"
wait_for "(( \$(ledger_records $L) > n1 + 500 ))" 10 || fail "writes did not resume"
log "exit 4 ended the freeze after $(repl alpha fencing.last_ms) ms; writes resumed"

# ---- 4. heal: resync, unfence ----------------------------------------------------------------
path_up 1
wait_for "[[ \$(grep -c '^unfence db beta alpha' $WORK/handlers.log) == 2 ]]" 40 ||
	fail "unfence-peer did not run after the heal: $(cat "$WORK/handlers.log")"
assert_eq "$(repl beta disk)" UpToDate "beta's disk when unfence-peer ran"
log "healed: beta resynced, unfence-peer ran"

# ---- 5. nothing lost ------------------------------------------------------------------------
ledger_stop "$L"
wait_synced 30
ledger_clean "$L" "$(backing alpha)"
ledger_clean "$L" "$(backing beta)"
hk alpha secondary db >/dev/null
assert_eq "$(sha256sum <"$(backing alpha)" | cut -d' ' -f1)" \
	"$(sha256sum <"$(backing beta)" | cut -d' ' -f1)" "sha256 of the two copies"
node_stop alpha
node_stop beta
log "PASS"
