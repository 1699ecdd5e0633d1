#!/usr/bin/env bash
# timeout: 300
# Failure matrix, partitions: PostgreSQL on the cluster behind the VIP (pgcluster.sh), a
# commit-recording client and pgbench running from the client namespace, at the DEFAULT
# heartbeat settings (200 ms interval, 1 s deadtime) and replication pings (1 s, timeout 2 s).
# Both paths between the nodes are cut while the service network stays up, so each node is
# still reachable from the client:
#   e1. the witness is reachable from the primary alpha only: alpha keeps serving (after the
#       vote), beta does not promote; the VIP stays on alpha alone. Healed: beta resyncs.
#   e2. the witness is reachable from the secondary beta only: beta takes over with the vote;
#       alpha fails its writes, stops PostgreSQL and the VIP and demotes; the VIP is on beta
#       alone and every commit the client was told about is there. Healed: beta stays primary;
#       alpha, which froze its writes at the cut (fencing) and failed them when it stepped
#       down, is Outdated and resyncs from beta: no split brain, no manual step.
# A sampler checks every 100 ms that the two nodes never both serve writes.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
# shellcheck source=tests/integration/cluster.sh
. "$(dirname "$0")/cluster.sh"
# shellcheck source=tests/integration/pgcluster.sh
. "$(dirname "$0")/pgcluster.sh"

committed() { wc -l <"$PGC_LEDGER"; }
commits_go_on() {
	local c0
	c0=$(committed)
	wait_for "(( \$(committed) >= $c0 + 20 ))" "$1" ||
		fail "the client committed only $(($(committed) - c0)) rows in $1 s: $(tail -n 3 "$WORK/client.err")"
}

t_setup=$(date +%s.%N)
CLUSTER_HB_INTERVAL=200ms CLUSTER_DEADTIME=1s CLUSTER_PING_INTERVAL=1s CLUSTER_PING_TIMEOUT=2s \
	pgc_setup 256M
log "setup took $(elapsed_since "$t_setup") s"
sampler_start
pgc_client_start
pgc_pgbench_start
sleep 2

# ---- e1. witness on the primary's side ----
witness_cut beta
wait_for "[[ \$(cl beta witness.reachable) == false ]]" 20 || fail "beta still reaches the witness"
t0=$(date +%s.%N)
cut_pair
wait_for "[[ \$(cl alpha peer.alive) == false && \$(cl beta peer.alive) == false ]]" 10 ||
	fail "the nodes still hear each other"
wait_for "[[ \$(cl alpha witness.vote) == true && \$(cl alpha frozen) == false ]]" 15 ||
	fail "alpha did not get the vote and serve: $(cl alpha rule): $(cl alpha reason)"
log "e1: alpha serves with the vote $(elapsed_since "$t0") s after the cut"
commits_go_on 30
sleep 2 # beta had time to act, if it would
assert_eq "$(role alpha)" primary "alpha's role (e1)"
assert_eq "$(role beta)" secondary "beta's role (e1)"
assert_eq "$(pgc_group beta)" stopped "beta's group (e1)"
assert_eq "$(cl beta rule)" no-witness "beta's rule (e1)"
pgc_vip_on alpha
pgc_assert_rows
heal_pair
witness_heal beta
wait_synced 90
wait_for "[[ \$(cl alpha witness.vote) == false ]]" 10 || fail "alpha kept the vote after the heal"
assert_eq "$(role alpha)" primary "alpha's role after e1"
pgc_vip_on alpha
log "e1: healed, beta resynced $(repl beta bytes_resynced) bytes"

# ---- e2. witness on the secondary's side ----
witness_cut alpha
wait_for "[[ \$(cl alpha witness.reachable) == false ]]" 20 || fail "alpha still reaches the witness"
c_cut=$(committed)
t0=$(date +%s.%N)
cut_pair
pgc_wait_primary beta 60
pgc_wait_vip beta 20
t_svc=$(elapsed_since "$t0")
wait_for "[[ \$(role alpha) == secondary && \$(pgc_group alpha) == stopped ]]" 60 ||
	fail "alpha did not step down: $(role alpha), group $(pgc_group alpha): $(cl alpha reason)"
assert_eq "$(cl beta witness.vote)" true "beta holds the vote (e2)"
commits_go_on 60
log "e2: beta primary with PostgreSQL and the VIP ${t_svc} s after the cut; alpha stepped down; $(($(committed) - c_cut)) commits since the cut"
grep -q "writes to volume db now fail with EIO" "$WORK/alpha.log" || fail "alpha did not fail its writes"
pgc_vip_on beta
pgc_assert_rows
heal_pair
witness_heal alpha
wait_for "[[ \$(cl alpha peer.alive) == true && \$(cl beta peer.alive) == true ]]" 10 ||
	fail "the nodes do not hear each other after the heal"
sleep 3
assert_eq "$(role beta)" primary "beta's role after the heal"
assert_eq "$(role alpha)" secondary "alpha's role after the heal"
pgc_vip_on beta
# alpha froze its writes when it lost beta (fencing resource-only) and failed them when it
# stepped down: it marked itself Outdated at the generation both share, so the heal is a
# bitmap resync from beta, with no split brain and no operator.
grep -q "Stepped down without fencing beta" "$WORK/alpha.log" ||
	fail "alpha did not mark itself Outdated when it stepped down"
wait_synced 120
grep -q "split brain detected" "$WORK/alpha.log" "$WORK/beta.log" &&
	fail "the heal found a split brain"

log "e2: healed, alpha resynced $(repl alpha bytes_resynced) bytes"

sleep 1
pgc_pgbench_stop
pgc_client_stop
pgc_vip_on beta
pgc_assert_rows
((PGBENCH_TX > 0)) || fail "pgbench did no transaction"
sampler_assert 150
log "PASS"
