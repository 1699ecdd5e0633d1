#!/usr/bin/env bash
# timeout: 150
# The metrics endpoint's cluster part on a real cluster (cluster.sh: two heartbeat paths, a
# witness), scraped with curl and checked by promtool: both paths up and counting heartbeats both
# ways; path 2 taken down shows as path 1 down on both nodes after the deadtime while path 0 and
# the peer stay up, and comes back; the replication link cut under writes freezes them (fencing
# resource-only) until beta is Outdated: one fence counted, its frozen seconds as in the status,
# nothing frozen after, beta's disk state Outdated; the promotions counter follows the status: 1
# on alpha, which took over by itself, 0 on beta until alpha is killed, then 1 on beta with the
# peer down.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
# shellcheck source=tests/integration/metrics.sh
. "$(dirname "$0")/metrics.sh"
# shellcheck source=tests/integration/cluster.sh
. "$(dirname "$0")/cluster.sh"
require_hakd
require_cmd curl jq promtool
# shellcheck source=tests/integration/ledger.sh
. "$(dirname "$0")/ledger.sh"

PORT=9810
CLUSTER_GLOBAL_EXTRA="metrics-listen 127.0.0.1:$PORT" PAIR_BLANK=1 cluster_setup sync 64M
pair_report_logs
M=$WORK/m

# metric NODE SAMPLE: SAMPLE's value in a fresh scrape of NODE (for wait_for).
metric() {
	scrape "$1" "$M.w.$1" && m "$M.w.$1" "$2"
}

wait_synced 30
wait_for "[[ -f $WORK/alpha.marker ]]" 10 || fail "alpha did not take over: $(hk alpha status)"
for n in alpha beta; do
	wait_for "[[ \$(metric $n 'hak_heartbeat_path_up{path=\"0\"}') == 1 && \$(metric $n 'hak_heartbeat_path_up{path=\"1\"}') == 1 ]]" 5 ||
		fail "$n: the heartbeat paths are not both up: $(grep hak_heartbeat_path_up "$M.w.$n")"
	scrape "$n" "$M.$n.0"
	assert_eq "$(m "$M.$n.0" hak_cluster_peer_up)" 1 "$n: peer up"
	assert_eq "$(m "$M.$n.0" hak_cluster_promotions_total)" "$(cl "$n" promotions)" \
		"$n: promotions, metric and status"
done
assert_eq "$(m "$M.alpha.0" hak_cluster_promotions_total)" 1 "alpha's promotions"
assert_eq "$(m "$M.beta.0" hak_cluster_promotions_total)" 0 "beta's promotions"
# heartbeats flow both ways on both paths (every 100 ms)
sleep 1
scrape alpha "$M.alpha.1"
for p in 0 1; do
	for c in received sent; do
		a=$(m "$M.alpha.0" "hak_heartbeat_${c}_total{path=\"$p\"}")
		b=$(m "$M.alpha.1" "hak_heartbeat_${c}_total{path=\"$p\"}")
		((b - a >= 5)) || fail "path $p: $c heartbeats went from $a to $b in more than 1 s"
	done
	assert_eq "$(m "$M.alpha.1" "hak_heartbeat_rejected_total{path=\"$p\"}")" 0 "path $p: rejected"
	# the round trip from the echo: measured (test_heartbeat checks its accuracy on loopback;
	# here a loaded machine's scheduling shows in it)
	rtt=$(m "$M.alpha.1" "hak_heartbeat_path_rtt_seconds{path=\"$p\"}")
	awk -v r="$rtt" 'BEGIN {exit !(r > 0 && r < 0.5)}' ||
		fail "path $p: heartbeat round trip '$rtt' s, want between 0 and 500 ms"
	[[ $(cl alpha "paths[$p].rtt_us") =~ ^[0-9]+$ ]] ||
		fail "path $p: status rtt_us is '$(cl alpha "paths[$p].rtt_us")', not a measured number"
done
log "heartbeat round trips: $(grep '^hak_heartbeat_path_rtt_seconds' "$M.alpha.1" | tr '\n' ' ')"
log "both paths up on both nodes, heartbeats counted; promotions alpha 1, beta 0"

# ---- one path down ----
path_down 2
for n in alpha beta; do
	wait_for "[[ \$(metric $n 'hak_heartbeat_path_up{path=\"1\"}') == 0 ]]" 5 ||
		fail "$n: path 1 still up in the metrics: $(grep hak_heartbeat_path "$M.w.$n")"
	assert_eq "$(m "$M.w.$n" 'hak_heartbeat_path_up{path="0"}')" 1 "$n: path 0 with path 1 down"
	assert_eq "$(m "$M.w.$n" hak_cluster_peer_up)" 1 "$n: peer up with path 1 down"
	age=$(m "$M.w.$n" 'hak_heartbeat_path_last_heard_seconds{path="1"}')
	awk -v a="$age" 'BEGIN { exit !(a >= 0.5) }' || fail "$n: path 1 down but last heard $age s ago"
done
path_up 2
for n in alpha beta; do
	wait_for "[[ \$(metric $n 'hak_heartbeat_path_up{path=\"1\"}') == 1 ]]" 5 ||
		fail "$n: path 1 did not come back in the metrics"
done
log "path 1 down then up again, seen by both nodes"

# ---- the fence: the replication link cut under writes ----
hk beta unstandby >/dev/null
wait_synced 30
scrape alpha "$M.alpha.f0"
assert_eq "$(m "$M.alpha.f0" 'hak_fences_total{volume="db",peer="beta"}')" 0 "fences before"
assert_eq "$(m "$M.alpha.f0" 'hak_fence_frozen_seconds_total{volume="db",peer="beta"}')" 0 \
	"frozen time before"
L=$WORK/f.ledger
ledger_storm alpha "$L" 1 30
wait_for "(( \$(ledger_records $L) > 100 ))" 10 || fail "the storm got no writes acknowledged"
path_down 1
wait_for "[[ \$(fence alpha fences) == 1 && \$(fence alpha frozen) == false ]]" 15 ||
	fail "alpha did not freeze and resume: $(hk alpha status --json | jq -c .volumes[0].replication.fencing)"
n=$(ledger_records "$L")
wait_for "(( \$(ledger_records $L) > $n + 50 ))" 10 || fail "writes did not go on after the fence"
scrape alpha "$M.alpha.f1"
assert_eq "$(m "$M.alpha.f1" 'hak_fences_total{volume="db",peer="beta"}')" 1 "fences"
assert_eq "$(m "$M.alpha.f1" 'hak_fence_frozen{volume="db",peer="beta"}')" 0 "frozen after"
assert_eq "$(m "$M.alpha.f1" 'hak_fence_frozen_writes{volume="db",peer="beta"}')" 0 \
	"frozen writes after"
total_ms=$(fence alpha total_ms)
assert_eq "$(m "$M.alpha.f1" 'hak_fence_frozen_seconds_total{volume="db",peer="beta"}')" \
	"$(awk -v t="$total_ms" 'BEGIN { printf "%.15g", t / 1000 }')" "frozen seconds, metric and status"
assert_eq "$(m "$M.alpha.f1" 'hak_heartbeat_path_up{path="0"}')" 0 "path 0 with the link cut"
scrape beta "$M.beta.f1"
assert_eq "$(m "$M.beta.f1" 'hak_volume_disk_state{volume="db",peer="alpha",state="Outdated"}')" 1 \
	"beta's disk state after the fence"
ledger_stop "$L"
path_up 1
wait_synced 40
log "the link cut under writes: one fence, $total_ms ms frozen, beta Outdated, then resynced"

# ---- failover ----
wait_for "[[ \$(cl beta standby) == false && \$(cl beta pending) == none ]]" 5 ||
	fail "beta did not leave standby: $(hk beta status)"
node_kill9 alpha
wait_for "[[ \$(hk beta status --json | jq -r .volumes[0].role) == primary ]]" 10 ||
	fail "beta did not take over: $(hk beta status)"
scrape beta "$M.beta.2"
assert_eq "$(m "$M.beta.2" hak_cluster_promotions_total)" 1 "beta's promotions after the failover"
assert_eq "$(m "$M.beta.2" hak_cluster_peer_up)" 0 "beta: peer up with alpha dead"
assert_eq "$(m "$M.beta.2" 'hak_heartbeat_path_up{path="0"}')" 0 "beta: path 0 with alpha dead"
assert_eq "$(m "$M.beta.2" 'hak_volume_role{volume="db",role="primary"}')" 1 "beta's role"
log "alpha killed: beta primary, its promotions 1, the peer and both paths down"
node_stop beta
log "PASS"
