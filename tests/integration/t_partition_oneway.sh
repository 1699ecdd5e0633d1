#!/usr/bin/env bash
# timeout: 240
# One-way partitions (fencing resource-only, the acknowledged-write ledger, the sampler): the
# cluster pair of cluster.sh under a write storm on alpha, the witness reachable from both. A
# blackhole route drops every packet one node sends to the other on both paths, while the other
# direction still flows, so one node hears heartbeats its peer never gets:
#   1. alpha -> beta dropped: beta finds alpha silent and asks for the vote, but the witness
#      holds it back while alpha, primary, keeps asking; alpha's replication link times out, it
#      freezes, has the witness record beta Outdated, and goes on. beta learns it is Outdated
#      from the witness. After the heal beta resyncs by itself (no split brain) and holds every
#      acknowledged write.
#   2. beta -> alpha dropped (alpha still primary): alpha finds beta silent, gets the vote,
#      fences beta through the witness and goes on; beta, which still hears alpha, never asks.
#      The heal converges by itself.
#   3. every link cut, the witness's too (alpha primary, the storm on alpha): nobody has a vote;
#      alpha freezes, then steps down (on-quorum-loss demote), fails its frozen writes and goes
#      back Outdated to the generation both share, with its failed writes in its bitmap; beta
#      does not promote. After the heal the equal generations and alpha's bitmap make a bitmap
#      resync from beta: the copies end up equal with nobody's acknowledged write lost.
# The sampler checks throughout that the two never acknowledge writes in the same round.
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

# drop_from NODE: NODE's packets to its peer vanish on both paths (the other way still flows).
drop_from() {
	local ns=NS_$1 a=2 b=130
	[[ $1 == beta ]] && a=1 b=129
	ip -n "${!ns}" route add blackhole "192.0.2.$a/32"
	ip -n "${!ns}" route add blackhole "192.0.2.$b/32"
	defer "ip -n ${!ns} route del blackhole 192.0.2.$a/32 2>/dev/null || true"
	defer "ip -n ${!ns} route del blackhole 192.0.2.$b/32 2>/dev/null || true"
}
heal_from() {
	local ns=NS_$1 a=2 b=130
	[[ $1 == beta ]] && a=1 b=129
	ip -n "${!ns}" route del blackhole "192.0.2.$a/32"
	ip -n "${!ns}" route del blackhole "192.0.2.$b/32"
}

PAIR_BLANK=1 cluster_setup sync 64M
pair_report_logs
wait_synced 30
wait_for "[[ \$(role alpha) == primary ]]" 10 || fail "alpha did not become primary"
hk beta unstandby >/dev/null
wait_synced 30
sampler_start

# ---- 1. alpha -> beta dropped ----
L1=$WORK/one.ledger
ledger_storm alpha "$L1" 1
wait_for "(( \$(ledger_records $L1) > 200 ))" 10 || fail "the storm got no writes acknowledged"
f0=$(fence alpha fences)
drop_from alpha
t0=$(date +%s.%N)
# keeps_volume N WHAT: alpha froze and resumed for the Nth time, is the only primary, beta is
# Outdated, and alpha's writes go on
keeps_volume() {
	wait_for "[[ \$(fence alpha fences) == $1 && \$(fence alpha frozen) == false ]]" 20 ||
		fail "$2: alpha did not freeze and resume: $(hk alpha status --json | jq -c .volumes[0].replication.fencing)"
	log "$2: alpha resumed $(elapsed_since "$t0") s after the cut, after a freeze of" \
		"$(fence alpha last_ms) ms ($(fence alpha last_how))"
	wait_repl beta disk Outdated 10
	local n
	n=$(ledger_records "$3")
	wait_for "(( \$(ledger_records $3) > $n + 100 ))" 10 || fail "$2: alpha's writes did not go on"
	sleep 2 # beta would have promoted by now
	assert_eq "$(primary_of)" "alpha " "$2: the primary"
	log "$2: beta: $(cl beta rule): $(cl beta reason)"
}
keeps_volume $((f0 + 1)) 1 "$L1"
ledger_stop "$L1"
heal_from alpha
converged 1
ledger_clean "$L1" "$(backing beta)"
log "1: healed: beta resynced from alpha by itself"

# ---- 2. beta -> alpha dropped, alpha primary ----
L2=$WORK/two.ledger
ledger_storm alpha "$L2" 2
wait_for "(( \$(ledger_records $L2) > 200 ))" 10 || fail "the storm got no writes acknowledged"
f0=$(fence alpha fences)
drop_from beta
t0=$(date +%s.%N)
keeps_volume $((f0 + 1)) 2 "$L2"
ledger_stop "$L2"
heal_from beta
converged 2

# ---- 3. every link cut ----
L3=$WORK/three.ledger
ledger_storm alpha "$L3" 3
wait_for "(( \$(ledger_records $L3) > 200 ))" 10 || fail "the storm got no writes acknowledged"
witness_cut alpha
witness_cut beta
path_down 1
path_down 2
wait_for "[[ \$(role alpha) == secondary ]]" 20 || fail "alpha did not step down: $(cl alpha reason)"
wait "$STORM" || true
log "3: storm on alpha: $(cat "$L3.out"); alpha $(repl alpha disk), beta $(role beta) $(repl beta disk)"
assert_eq "$(role beta)" secondary "beta without a vote"
assert_eq "$(repl alpha disk)" Outdated "alpha after stepping down unfenced"
n0=$(wc -l <"$WORK/alpha.log")
path_up 1
path_up 2
witness_heal alpha
witness_heal beta
wait_synced 60
# Two orders are right after the heal: the link comes back first and equal generations resync the
# Outdated side's blocks (its failed writes) from beta; or beta, UpToDate and alone with the
# witness's vote, is promoted first and alpha resyncs those blocks from beta's new generation.
# Either way alpha's marked blocks come from beta (and the copies are compared below).
tail -n +$((n0 + 1)) "$WORK/alpha.log" |
	grep -q -e "Equal generations, but the Outdated side has blocks out of sync" \
		-e "sync-target by rule bitmap-peer" ||
	fail "alpha's failed writes were not resynced"
wait_for "[[ -n \$(primary_of) ]]" 20 || fail "no primary after the heal"
log "3: healed: primary $(primary_of)"
sampler_assert 50
node_stop alpha
node_stop beta
assert_eq "$(sha256sum <"$(backing beta)")" "$(sha256sum <"$(backing alpha)")" "both copies"
ledger_clean "$L1" "$(backing alpha)"
ledger_clean "$L2" "$(backing beta)"
ledger_clean "$L3" "$(backing beta)"
log "PASS"
