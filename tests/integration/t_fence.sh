#!/usr/bin/env bash
# timeout: 240
# Fencing resource-only (the default of a sync volume in a cluster), with the acknowledged-write
# ledger. The cluster pair of cluster.sh (alpha primary, beta secondary, witness reachable):
#   a. the replication link (path 1) is cut while heartbeat path 2 lives, under a write storm:
#      alpha freezes its writes until beta has marked itself Outdated (asked over the
#      heartbeats), then writes go on; alpha is killed: beta, Outdated, refuses to promote.
#      alpha returns with the link: it promotes, beta resyncs, both copies hold every
#      acknowledged write.
#   b. beta is stopped (SIGSTOP) under a write storm: the writes wait for it, then for the
#      fence (the witness records beta Outdated), then go on; beta continued learns it is
#      Outdated, resyncs, and holds every acknowledged write.
#   c. beta is killed under a write storm, then alpha: alpha had the witness record beta
#      Outdated before it acknowledged another write, so beta, restarted alone, learns it from
#      the witness and does not promote; alpha returns and the pair serves again (either node
#      primary), nothing lost.
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



PAIR_BLANK=1 cluster_setup sync 64M
pair_report_logs
wait_synced 30
wait_for "[[ \$(role alpha) == primary ]]" 10 || fail "alpha did not become primary"
hk beta unstandby >/dev/null
wait_synced 30
assert_eq "$(fence alpha policy)" resource-only "alpha's default fencing"

# ---- a. replication link cut, heartbeats alive, then the primary dies ----
L1=$WORK/a.ledger
ledger_storm alpha "$L1" 1 30
wait_for "(( \$(ledger_records $L1) > 200 ))" 10 || fail "the storm got no writes acknowledged"
path_down 1
t0=$(date +%s.%N)
wait_for "[[ \$(fence alpha fences) == 1 ]]" 10 || fail "alpha did not freeze: $(hk alpha status)"
n_frozen=$(ledger_records "$L1")
wait_for "[[ \$(fence alpha frozen) == false ]]" 10 ||
	fail "alpha's writes stayed frozen: $(hk alpha status --json | jq -c .volumes[0].replication.fencing)"
log "a: alpha froze and resumed after $(fence alpha last_ms) ms ($(fence alpha last_how));" \
	"$(elapsed_since "$t0") s after the cut"
assert_eq "$(repl beta disk)" Outdated "beta's disk after the outdate"
wait_for "(( \$(ledger_records $L1) > $n_frozen + 100 ))" 10 ||
	fail "writes did not go on after the fence: $(tail -n 3 "$L1.err")"
grep -q "The disk is now Outdated" "$WORK/beta.log" || fail "beta did not log its Outdated mark"
node_kill9 alpha
wait "$STORM" || true
log "a: storm ended: $(cat "$L1.out")"
sleep 3 # > deadtime + a takeover: beta would have promoted by now
assert_eq "$(role beta)" secondary "beta's role with alpha dead and its disk Outdated"
log "a: beta refuses: rule $(cl beta rule): $(cl beta reason)"
grep -q "Promoted to primary" "$WORK/beta.log" && fail "beta promoted"
path_up 1
rm -f "$WORK/alpha.marker"
node_start alpha
# alpha resyncs beta at once (alpha was primary last); then either may take over: beta, now
# UpToDate, may promote before it hears alpha's first heartbeat, and the witness lets only one
# of them. One primary, and both copies with every acknowledged write, is what counts.
wait_for "[[ \$(primary_of) == 'alpha ' || \$(primary_of) == 'beta ' ]]" 20 ||
	fail "no single primary after alpha came back: $(primary_of); alpha $(cl alpha reason); beta $(cl beta reason)"
p1=$(primary_of)
log "c: alpha came back; ${p1}is primary"
wait_synced 40
assert_eq "$(primary_of)" "$p1" "the primary once in sync"
assert_eq "$(repl beta disk)" UpToDate "beta after the resync"
ledger_clean "$L1" "$(backing beta)"

# ---- b. the secondary frozen (SIGSTOP) under a write storm ----
L3=$WORK/b.ledger
ledger_storm alpha "$L3" 3 30
wait_for "(( \$(ledger_records $L3) > 200 ))" 10 || fail "the storm got no writes acknowledged"
kill -STOP "${NODE_PIDS[beta]}"
defer "kill -CONT ${NODE_PIDS[beta]} 2>/dev/null || true"
t0=$(date +%s.%N)
# beta answers nothing: the writes in flight wait for it, then for the fence
wait_for "[[ \$(fence alpha fences) == 1 && \$(fence alpha frozen) == false ]]" 10 ||
	fail "alpha did not freeze and resume: $(hk alpha status --json | jq -c .volumes[0].replication.fencing)"
log "b: beta stopped; alpha resumed $(elapsed_since "$t0") s later, after a freeze of" \
	"$(fence alpha last_ms) ms ($(fence alpha last_how))"
n1=$(ledger_records "$L3")
wait_for "(( \$(ledger_records $L3) > $n1 + 100 ))" 10 || fail "writes did not go on without beta"
kill -CONT "${NODE_PIDS[beta]}"
kill -TERM "$STORM"
wait_for "[[ \$(repl beta disk) == Outdated || \$(repl beta link) == SyncTarget ]]" 10 ||
	log "b: beta resumed as $(repl beta disk) / $(repl beta link)"
wait "$STORM" || true
log "b: storm: $(cat "$L3.out")"
wait_synced 40
ledger_clean "$L3" "$(backing beta)"

# ---- c. the secondary dies, then the primary; the secondary restarts alone ----
L2=$WORK/c.ledger
ledger_storm alpha "$L2" 2 30
wait_for "(( \$(ledger_records $L2) > 200 ))" 10 || fail "the storm got no writes acknowledged"
node_kill9 beta
wait_for "[[ \$(fence alpha fences) == 2 && \$(fence alpha frozen) == false ]]" 10 ||
	fail "alpha did not freeze and resume: $(hk alpha status --json | jq -c .volumes[0].replication.fencing)"
log "c: alpha resumed after $(fence alpha last_ms) ms ($(fence alpha last_how))"
n1=$(ledger_records "$L2")
wait_for "(( \$(ledger_records $L2) > $n1 + 100 ))" 10 || fail "writes did not go on without beta"
node_kill9 alpha
wait "$STORM" || true
log "c: storm ended: $(cat "$L2.out")"
node_start beta
wait_for "[[ \$(repl beta disk) == Outdated ]]" 10 || fail "beta did not learn it is Outdated: $(hk beta status)"
sleep 3
assert_eq "$(role beta)" secondary "beta restarted alone"
log "c: beta restarted alone stays secondary: $(cl beta reason)"
rm -f "$WORK/alpha.marker" "$WORK/beta.marker"
node_start alpha
# alpha resyncs beta at once (alpha was primary last); then either may take over: beta, now
# UpToDate, may promote before it hears alpha's first heartbeat, and the witness lets only one
# of them. One primary, and both copies with every acknowledged write, is what counts.
wait_for "[[ \$(primary_of) == 'alpha ' || \$(primary_of) == 'beta ' ]]" 20 ||
	fail "no single primary after alpha came back: $(primary_of); alpha $(cl alpha reason); beta $(cl beta reason)"
p1=$(primary_of)
log "c: alpha came back; ${p1}is primary"
wait_synced 40
assert_eq "$(primary_of)" "$p1" "the primary once in sync"
ledger_clean "$L2" "$(backing beta)"
ledger_clean "$L1" "$(backing beta)"

node_stop alpha
node_stop beta
assert_eq "$(sha256sum <"$(backing beta)")" "$(sha256sum <"$(backing alpha)")" "both copies"
ledger_clean "$L2" "$(backing alpha)"
log "PASS"
