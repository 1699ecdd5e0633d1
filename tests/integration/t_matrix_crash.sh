#!/usr/bin/env bash
# timeout: 300
# Failure matrix, node crash: PostgreSQL on the cluster behind the VIP (pgcluster.sh), a
# commit-recording client and pgbench running from the client namespace throughout.
#   1. Power loss of the primary alpha (SIGKILL to hakd, the postmaster and everything else in
#      its namespace): beta becomes primary, runs PostgreSQL and holds the VIP; every commit the
#      client was told about is in beta's database.
#   2. alpha restarts: it comes back secondary, resyncs, and does not run the group.
#   3. Planned switchover back (hakctl switchover --to alpha): alpha primary with the database
#      and the VIP, nothing lost.
# A sampler checks every 100 ms that the two nodes never both serve writes.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
# shellcheck source=tests/integration/cluster.sh
. "$(dirname "$0")/cluster.sh"
# shellcheck source=tests/integration/pgcluster.sh
. "$(dirname "$0")/pgcluster.sh"

t_setup=$(date +%s.%N)
pgc_setup 256M
log "setup took $(elapsed_since "$t_setup") s"
pgc_vip_on alpha
sampler_start
pgc_client_start
pgc_pgbench_start
sleep 3

# ---- 1. power loss of the primary ----
before=$(wc -l <"$PGC_LEDGER")
t0=$(date +%s.%N)
pgc_crash alpha
pgc_wait_primary beta 60
pgc_wait_vip beta 10
t_svc=$(elapsed_since "$t0")
wait_for "(( \$(wc -l <$PGC_LEDGER) > $before + 20 ))" 60 ||
	fail "the client committed nothing more after the failover: $(tail -n 3 "$WORK/client.err")"
log "alpha crashed: beta primary with PostgreSQL and the VIP after ${t_svc} s; client commits again after $(elapsed_since "$t0") s"
assert_eq "$(cl beta witness.vote)" true "beta holds the witness vote"
pgc_vip_on beta
pgc_assert_rows

# ---- 2. alpha comes back as secondary and resyncs ----
node_start alpha
wait_for "[[ \$(role alpha) == secondary ]]" 20 || fail "alpha did not come back as secondary"
wait_synced 90
assert_eq "$(role beta)" primary "beta's role after alpha's return"
assert_eq "$(pgc_group alpha)" stopped "alpha's group while secondary"
pgc_vip_on beta
log "alpha back as secondary, in sync after $(repl alpha bytes_resynced) bytes resynced"

# ---- 3. planned switchover back to alpha ----
sleep 2
t0=$(date +%s.%N)
hk alpha switchover --to alpha >/dev/null || fail "switchover --to alpha was refused"
pgc_wait_primary alpha 120
pgc_wait_vip alpha 10
log "switchover back to alpha done in $(elapsed_since "$t0") s"
pgc_wait_db 30
sleep 3
pgc_pgbench_stop
pgc_client_stop
pgc_vip_on alpha
assert_eq "$(role beta)" secondary "beta's role after the switchover"
assert_eq "$(pgc_group beta)" stopped "beta's group after the switchover"
pgc_assert_rows
((PGBENCH_TX > 0)) || fail "pgbench did no transaction"
sampler_assert 100
log "PASS"
