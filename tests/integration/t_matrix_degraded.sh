#!/usr/bin/env bash
# timeout: 300
# Failure matrix, faults the primary rides out: PostgreSQL on the cluster behind the VIP
# (pgcluster.sh), a commit-recording client and pgbench running from the client namespace.
#   b. The postmaster is killed (SIGKILL): the group restarts PostgreSQL in place on alpha; no
#      failover, the VIP stays.
#   c. Heartbeat path 2 goes down: no failover; both nodes show the path dead and the pair
#      degraded; back to healthy when it returns.
#   d. Path 1, which also carries replication, goes down while path 2 still carries heartbeats:
#      no failover, commits go on, alpha's out-of-sync count grows; on return the pair resyncs
#      and an online verify finds both copies equal.
#   f. Both nodes lose the witness: no action, alpha keeps serving unfrozen.
# After each: alpha is the only primary, the VIP is on alpha only, the database answers there
# and holds every commit the client was told about. A sampler checks every 100 ms that the two
# nodes never both serve writes.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
# shellcheck source=tests/integration/cluster.sh
. "$(dirname "$0")/cluster.sh"
# shellcheck source=tests/integration/pgcluster.sh
. "$(dirname "$0")/pgcluster.sh"

res_field() {
	hk "$1" status --json | jq -r ".groups[0].resources[] | select(.name == \"$2\") | .$3"
}
committed() { wc -l <"$PGC_LEDGER"; }
# commits_go_on SECS: the client commits at least 20 more rows within SECS
commits_go_on() {
	local c0
	c0=$(committed)
	wait_for "(( \$(committed) >= $c0 + 20 ))" "$1" ||
		fail "the client committed only $(($(committed) - c0)) rows in $1 s: $(tail -n 3 "$WORK/client.err")"
}
# still_alpha WHAT: alpha alone primary, not frozen, with the VIP; beta secondary; no takeover
still_alpha() {
	assert_eq "$(role alpha)" primary "alpha's role ($1)"
	assert_eq "$(role beta)" secondary "beta's role ($1)"
	assert_eq "$(cl alpha frozen)" false "alpha frozen ($1)"
	assert_eq "$(pgc_group alpha)" started "alpha's group ($1)"
	assert_eq "$(pgc_group beta)" stopped "beta's group ($1)"
	pgc_vip_on alpha
}

t_setup=$(date +%s.%N)
pgc_setup 256M
log "setup took $(elapsed_since "$t_setup") s"
sampler_start
pgc_client_start
pgc_pgbench_start
sleep 2

# ---- b. the database process dies ----
pm=$(pgc_postmaster alpha)
if [[ -z $pm ]] || ! pid_alive "$pm"; then
	fail "no running postmaster on alpha (pid '$pm')"
fi
t0=$(date +%s.%N)
kill -KILL "$pm"
wait_for "[[ \$(res_field alpha postgres restarts) == 1 && \$(pgc_group alpha) == started ]]" 60 ||
	fail "PostgreSQL was not restarted in place: $(hk alpha status)"
pm2=$(pgc_postmaster alpha)
[[ -n $pm2 && $pm2 != "$pm" ]] || fail "the postmaster pid did not change ($pm -> $pm2)"
pgc_wait_db 30
commits_go_on 30
log "b: postmaster $pm killed; PostgreSQL restarted in place as $pm2, commits again after $(elapsed_since "$t0") s"
assert_eq "$(res_field alpha fs restarts)" 0 "restarts of the mount"
assert_eq "$(res_field alpha disk restarts)" 0 "restarts of the attach"
still_alpha "after the database crash"
pgc_assert_rows

# ---- c. one heartbeat path lost ----
path_down 2
wait_for "[[ \$(cl alpha 'paths[1].alive') == false && \$(cl beta 'paths[1].alive') == false ]]" 10 ||
	fail "the nodes do not see path 2 dead: $(hk alpha status --json | jq -c .cluster.paths)"
sleep 3 # six times the deadtime
assert_eq "$(cl alpha 'paths[0].alive')" true "path 1 on alpha"
assert_eq "$(cl alpha peer.alive)" true "the peer seen from alpha with one path"
assert_contains "$(cl alpha actions)" degraded "alpha's cluster actions with a path down"
assert_contains "$(cl beta actions)" degraded "beta's cluster actions with a path down"
commits_go_on 20
still_alpha "with heartbeat path 2 down"
path_up 2
wait_for "[[ \$(cl alpha 'paths[1].alive') == true && \$(cl beta 'paths[1].alive') == true ]]" 10 ||
	fail "path 2 did not come back"
wait_for "[[ \$(cl alpha actions) != *degraded* && \$(cl beta actions) != *degraded* ]]" 10 ||
	fail "the pair stays degraded: alpha $(cl alpha actions), beta $(cl beta actions)"
log "c: heartbeat path 2 lost and back: no failover, the pair degraded meanwhile"
pgc_assert_rows

# ---- d. the replication link lost, heartbeats on path 2 ----
path_down 1
wait_repl alpha link Connecting 15
oos1=$(repl alpha out_of_sync_bytes)
commits_go_on 20
wait_for "(( \$(repl alpha out_of_sync_bytes) > $oos1 ))" 10 || fail "alpha's out-of-sync count does not grow"
oos2=$(repl alpha out_of_sync_bytes)
assert_eq "$(cl alpha peer.alive)" true "the peer seen from alpha over path 2"
assert_eq "$(cl beta 'paths[1].alive')" true "path 2 on beta"
still_alpha "with the replication link down"
log "d: replication link down, heartbeats on path 2: no failover, out of sync $oos1 -> $oos2 bytes"
path_up 1
wait_synced 90
log "d: link back, resynced $(repl beta bytes_resynced) bytes"
out=$(hk alpha verify db 2>&1) || fail "verify on alpha: $out"
wait_for "[[ \$(repl alpha verify.running) == false ]]" 120 || fail "the verify did not finish"
vst=$(hk alpha status --json | jq -c '.volumes[0].replication.verify')
assert_eq "$(jq -r .differing_blocks <<<"$vst")" 0 "blocks that differ after the resync (online verify)"
log "d: online verify under load: $vst"
still_alpha "after the replication link came back"
pgc_assert_rows

# ---- f. the witness lost by both ----
witness_cut alpha
witness_cut beta
wait_for "[[ \$(cl alpha witness.reachable) == false && \$(cl beta witness.reachable) == false ]]" 20 ||
	fail "the nodes still reach the witness"
sleep 3
commits_go_on 20
still_alpha "without the witness"
assert_contains "$(cl alpha actions)" degraded "alpha's cluster actions without the witness"
witness_heal alpha
witness_heal beta
wait_for "[[ \$(cl alpha witness.reachable) == true && \$(cl beta witness.reachable) == true ]]" 20 ||
	fail "the nodes do not reach the witness again"
log "f: witness lost by both and back: alpha served throughout"

sleep 1
pgc_pgbench_stop
pgc_client_stop
still_alpha "at the end"
pgc_assert_rows
# without the load, a last verify: both copies equal
out=$(hk alpha verify db 2>&1) || fail "verify on alpha: $out"
wait_for "[[ \$(repl alpha verify.running) == false ]]" 120 || fail "the last verify did not finish"
vst=$(hk alpha status --json | jq -c '.volumes[0].replication.verify')
assert_eq "$(jq -r .differing_blocks <<<"$vst")" 0 "blocks that differ at the end"
log "last verify, load stopped: $vst"
((PGBENCH_TX > 0)) || fail "pgbench did no transaction"
sampler_assert 100
log "PASS"
