#!/usr/bin/env bash
# timeout: 300
# The witness's links in the partition matrix (fencing resource-only, the acknowledged-write
# ledger, the sampler throughout): the cluster pair of cluster.sh, alpha primary under a write
# storm.
#   0. the pair's links cut, both nodes reach the witness: alpha has the witness record beta
#      Outdated and goes on after a short freeze; beta, denied the vote, stays secondary.
#   1. alpha loses the witness, then both do: nothing moves, no write freezes (the pair still
#      hears itself; the witness only matters once it does not).
#   2. beta -> witness dropped (one way), then the pair's links cut: beta cannot ask for the
#      vote; alpha freezes, has the witness record beta Outdated and resumes; beta learns
#      nothing from the witness it cannot reach, but its disk is not promoted without the
#      vote. After the heal beta is Outdated or resyncs: the pair converges with no manual step.
#   3. witness -> alpha dropped (alpha's requests arrive, the replies do not), then the pair's
#      links cut: alpha cannot confirm its fence nor hold a vote it never hears of, so it does
#      not ask the witness to outdate beta (it could never learn the answer) and steps down;
#      once it no longer says it is primary, beta gets the vote and takes over. After the heal
#      the pair converges by itself, beta holding every acknowledged write.
#   4. witness -> the secondary dropped, then the pair's links cut (beta primary now): beta
#      keeps the volume after fencing alpha through the witness; alpha, deaf to the witness,
#      never takes over. The heal converges by itself.
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

# the ledger of the storm now running must grow by 100 records within 10 s
storm_goes_on() {
	local n
	n=$(ledger_records "$1")
	wait_for "(( \$(ledger_records $1) > $n + 100 ))" 10 || fail "$2: writes stopped: $(tail -n 2 "$1.err")"
}

PAIR_BLANK=1 cluster_setup sync 64M
pair_report_logs
wait_for "[[ \$(role alpha) == primary ]]" 10 || fail "alpha did not become primary"
hk beta unstandby >/dev/null
wait_synced 30
sampler_start

# ---- 0. the pair cut, the witness reachable by both ----
L0=$WORK/zero.ledger
ledger_storm alpha "$L0" 0 30
wait_for "(( \$(ledger_records $L0) > 200 ))" 10 || fail "the storm got no writes acknowledged"
cut_pair
t0=$(date +%s.%N)
wait_for "[[ \$(fence alpha fences) == 1 && \$(fence alpha frozen) == false ]]" 10 ||
	fail "alpha did not freeze and resume: $(hk alpha status --json | jq -c .volumes[0].replication.fencing)"
log "0: alpha froze $(fence alpha last_ms) ms ($(fence alpha last_how)), resumed $(elapsed_since "$t0") s after the cut"
storm_goes_on "$L0" "0: alpha after the fence"
sleep 2 # beta would have promoted by now
assert_eq "$(primary_of)" "alpha " "the primary with the pair cut and the witness reachable by both"
log "0: beta: $(cl beta rule): $(cl beta reason); disk $(repl beta disk)"
heal_pair
converged 0
ledger_stop "$L0"
ledger_clean "$L0" "$(backing beta)"

# ---- 1. the witness lost, by alpha and then by both ----
L1=$WORK/one.ledger
ledger_storm alpha "$L1" 1 60
wait_for "(( \$(ledger_records $L1) > 200 ))" 10 || fail "the storm got no writes acknowledged"
f1=$(fence alpha fences)
witness_cut alpha
wait_for "[[ \$(cl alpha witness.reachable) == false ]]" 10 || fail "alpha still reaches the witness"
storm_goes_on "$L1" "1: alpha without the witness"
witness_cut beta
wait_for "[[ \$(cl beta witness.reachable) == false ]]" 10 || fail "beta still reaches the witness"
storm_goes_on "$L1" "1: both without the witness"
assert_eq "$(primary_of)" "alpha " "the primary without a witness"
assert_eq "$(fence alpha fences)" "$f1" "alpha's fences while the pair hears itself"
witness_heal alpha
witness_heal beta
wait_for "[[ \$(cl alpha witness.reachable) == true && \$(cl beta witness.reachable) == true ]]" 10 ||
	fail "the witness is not back"
log "1: no freeze, no move: $(ledger_records "$L1") writes acknowledged"

# ---- 2. beta -> witness dropped, then the pair cut ----
ip -n "$NS_beta" route replace blackhole 192.0.2.250/32
defer "ip -n $NS_beta route del blackhole 192.0.2.250/32 2>/dev/null || true"
wait_for "[[ \$(cl beta witness.reachable) == false ]]" 10 || fail "beta still hears the witness"
cut_pair
t0=$(date +%s.%N)
wait_for "[[ \$(fence alpha fences) == 2 && \$(fence alpha frozen) == false ]]" 10 ||
	fail "alpha did not freeze and resume: $(hk alpha status --json | jq -c .volumes[0].replication.fencing)"
log "2: alpha froze $(fence alpha last_ms) ms ($(fence alpha last_how)), resumed $(elapsed_since "$t0") s after the cut"
[[ $(fence alpha last_how) == *witness* ]] || fail "alpha's fence was confirmed by '$(fence alpha last_how)'"
storm_goes_on "$L1" "2: alpha after the fence"
sleep 2 # beta would have promoted by now
assert_eq "$(primary_of)" "alpha " "the primary with beta cut from the pair and the witness"
log "2: beta: $(cl beta rule): $(cl beta reason)"
witness_heal beta
heal_pair
converged 2
ledger_stop "$L1"
ledger_clean "$L1" "$(backing beta)"

# ---- 3. witness -> alpha dropped, then the pair cut ----
L3=$WORK/three.ledger
ledger_storm alpha "$L3" 3 60
wait_for "(( \$(ledger_records $L3) > 200 ))" 10 || fail "the storm got no writes acknowledged"
ip -n "$NS_witness" route add blackhole 192.0.2.202/32
defer "ip -n $NS_witness route del blackhole 192.0.2.202/32 2>/dev/null || true"
wait_for "[[ \$(cl alpha witness.reachable) == false ]]" 10 || fail "alpha still hears the witness"
cut_pair
t0=$(date +%s.%N)
sleep 6 # detection, vote, fence, stepping down, whatever follows
log "3: $(elapsed_since "$t0") s after the cut: primary: $(primary_of); alpha $(cl alpha rule)" \
	"$(repl alpha disk) frozen $(fence alpha frozen), beta $(cl beta rule) $(repl beta disk)"
assert_eq "$(primary_of)" "beta " "the primary after alpha lost the witness's replies and beta"
ledger_stop "$L3"
ip -n "$NS_witness" route del blackhole 192.0.2.202/32
heal_pair
converged 3
ledger_clean "$L3" "$(backing "$HEALED")"

# ---- 4. witness -> the secondary dropped, then the pair cut ----
p=$HEALED
s=alpha
[[ $p == alpha ]] && s=beta
L4=$WORK/four.ledger
ledger_storm "$p" "$L4" 2 60
wait_for "(( \$(ledger_records $L4) > 200 ))" 10 || fail "the storm got no writes acknowledged"
sip=206
[[ $s == alpha ]] && sip=202
ip -n "$NS_witness" route add blackhole "192.0.2.$sip/32"
defer "ip -n $NS_witness route del blackhole 192.0.2.$sip/32 2>/dev/null || true"
wait_for "[[ \$(cl $s witness.reachable) == false ]]" 10 || fail "$s still hears the witness"
cut_pair
t0=$(date +%s.%N)
sleep 6
log "4: $(elapsed_since "$t0") s after the cut ($p primary, $s secondary deaf to the witness):" \
	"primary: $(primary_of); $p $(cl "$p" rule) $(repl "$p" disk) frozen $(fence "$p" frozen)," \
	"$s $(cl "$s" rule) $(repl "$s" disk)"
assert_eq "$(primary_of)" "$p " "the primary after $s lost the witness's replies and $p"
ledger_stop "$L4"
ip -n "$NS_witness" route del blackhole "192.0.2.$sip/32"
heal_pair
converged 4
sampler_assert 50
ledger_clean "$L4" "$(backing "$HEALED")"
node_stop alpha
node_stop beta
assert_eq "$(sha256sum <"$(backing beta)")" "$(sha256sum <"$(backing alpha)")" "both copies"
log "PASS"
