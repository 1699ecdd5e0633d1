#!/usr/bin/env bash
# timeout: 150
# The cluster manager end to end: namespaces alpha, beta and witness (hakd --witness), two
# heartbeat paths between the nodes, a group with one exec resource (a marker file) on the
# volume. alpha is made primary and starts the group by itself; kill -9 of alpha's hakd makes
# beta primary with the group started within a bound (detection and takeover times logged);
# alpha restarted comes back secondary and resyncs. Then both paths between alpha and beta are
# cut while the witness stays reachable: exactly one node serves as primary, the one holding the
# vote; the other does not. A sampler reads both nodes' role and freeze every 100 ms throughout:
# two primaries that both accept writes are never seen.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
# shellcheck source=tests/integration/cluster.sh
. "$(dirname "$0")/cluster.sh"
require_hakd
require_cmd jq

PAIR_BLANK=1 cluster_setup sync 64M
pair_report_logs

# serving NAME: "1" when NAME is primary and does not hold writes
serving() {
	local j
	node_alive "$1" || { echo 0; return; }
	j=$(hk "$1" status --json 2>/dev/null) || { echo 0; return; }
	jq -r 'if .volumes[0].role == "primary" and (.cluster.frozen | not) then 1 else 0 end' <<<"$j"
}


wait_synced 30
# beta is in standby: alpha, eligible, takes over by itself and starts the group
wait_for "[[ -f $WORK/alpha.marker ]]" 10 || fail "alpha did not start the group: $(hk alpha status)"
assert_eq "$(hk alpha status --json | jq -r .volumes[0].role)" primary "alpha's role"
hk beta unstandby >/dev/null
wait_for "[[ \$(cl beta standby) == false && \$(cl beta pending) == none ]]" 5 ||
	fail "beta did not leave standby: $(hk beta status)"
[[ -f $WORK/state-beta/cluster-1.standby ]] && fail "the standby flag file is still there"
wait_for "[[ \$(cl alpha rule) == serve ]]" 5 || fail "alpha's rule is $(cl alpha rule)"
assert_eq "$(cl alpha witness.reachable)" true "alpha reaches the witness"
assert_eq "$(cl beta peer.role)" primary "beta sees alpha as primary"
[[ -f $WORK/beta.marker ]] && fail "beta runs the group while secondary"
log "alpha primary with the group started; rule on beta: $(cl beta rule)"

sampler_start

# ---- crash of the primary ----
t0=$(date +%s.%N)
node_kill9 alpha
wait_for "[[ \$(cl beta peer.alive) == false ]]" 5 || fail "beta did not declare alpha dead"
t_detect=$(elapsed_since "$t0")
wait_for "[[ \$(hk beta status --json | jq -r .volumes[0].role) == primary ]]" 10 ||
	fail "beta did not become primary: $(hk beta status)"
wait_for "[[ -f $WORK/beta.marker ]]" 10 || fail "beta did not start the group: $(hk beta status)"
t_takeover=$(elapsed_since "$t0")
log "alpha killed: beta detected it after ${t_detect}s, was primary with the group running after ${t_takeover}s"
assert_le "${t_takeover%.*}" 5 "takeover within 5 s"
assert_eq "$(cl beta witness.vote)" true "beta holds the witness vote"

# ---- the old primary comes back ----
rm -f "$WORK/alpha.marker" # its process died with the crash, as with a reboot
node_start alpha
wait_for "[[ \$(hk alpha status --json | jq -r .volumes[0].role) == secondary ]]" 10 ||
	fail "alpha did not come back as secondary"
wait_synced 40
assert_eq "$(hk beta status --json | jq -r .volumes[0].role)" primary "beta stays primary"
assert_eq "$(hk alpha status --json | jq -r .volumes[0].role)" secondary "alpha stays secondary"
[[ -f $WORK/alpha.marker ]] && fail "alpha started the group while secondary"
wait_for "[[ \$(cl beta witness.vote) == false ]]" 5 || fail "beta kept the vote with its peer back"
log "alpha back as secondary and in sync; beta gave the vote back"

# ---- partition between the nodes, witness reachable from both ----
path_down 1
path_down 2
t0=$(date +%s.%N)
one_winner() {
	local a b
	a=$(serving alpha)
	b=$(serving beta)
	[[ $((a + b)) == 1 ]] || return 1
	WINNER=alpha LOSER=beta
	[[ $b == 1 ]] && WINNER=beta LOSER=alpha
	[[ $(cl "$WINNER" witness.vote) == true && $(cl "$LOSER" witness.vote) == false ]]
}
wait_for one_winner 10 || fail "no single primary after the cut: alpha $(cl alpha rule), beta $(cl beta rule)"
sleep 2
one_winner || fail "the partition did not stay with one primary: alpha $(cl alpha rule), beta $(cl beta rule)"
log "partition: $WINNER serves and holds the vote after $(elapsed_since "$t0")s; $LOSER: rule $(cl "$LOSER" rule) ($(cl "$LOSER" reason))"
[[ $(hk "$LOSER" status --json | jq -r .volumes[0].role) == primary ]] &&
	[[ $(cl "$LOSER" frozen) != true ]] && fail "$LOSER is primary and not frozen"
[[ -f $WORK/$WINNER.marker ]] || fail "$WINNER serves without its group"
wait_for "[[ ! -f $WORK/$LOSER.marker ]]" 5 || fail "$LOSER still runs the group"

sampler_assert 20
path_up 1
path_up 2
log "PASS"
