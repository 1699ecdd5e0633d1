#!/usr/bin/env bash
# timeout: 240
# The Prometheus endpoint (metrics-listen) on a real pair, alpha primary, scraped with curl in
# each node's namespace and checked by promtool at every step:
#   1. a storm of exactly N 4 KiB writes (hak-ledger, with flushes): the write histograms (the
#      client's view, the local disk's, the peer's, the replication round trip) each count N
#      more, the write counter N more, the written bytes N*4096 more, the bytes shipped at least
#      that; every histogram is cumulative with +Inf equal to _count; the flush histogram counts
#      what the status counts;
#   2. role, disk and connection state sets match `hakctl status --json` on both nodes (one
#      state at 1 per set);
#   3. beta stopped and N more writes: out-of-sync bytes > 0 and equal to the status's, the
#      connection state leaves Connected; beta back, its resync seen as SyncSource with a rate
#      > 0 (the link throttled), then out-of-sync 0, one resync more, resynced bytes counted;
#   4. the HTTP edges: 404 for another path, 405 for POST, 400 for garbage and for a body, a
#      slow client that never finishes its request dropped after the 5 s timeout while scrapes
#      go on, 17 such clients: the 17th told 503, the endpoint back once they time out;
#   5. hakd --export with --metrics: a standalone volume's role and bytes, no replication metric;
#      without --metrics no listener at all (off by default).
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
# shellcheck source=tests/integration/metrics.sh
. "$(dirname "$0")/metrics.sh"
require_hakd
require_cmd curl jq promtool tc

LEDGER=$TOOLS/hak-ledger
[[ -x $LEDGER ]] || fail "$LEDGER is not built (make BUILD=${HAK_BUILD#"$REPO"/} SAN=1 bins)"
PORT=9810
N=400

PAIR_GLOBAL="metrics-listen 127.0.0.1:$PORT" PAIR_BLANK=1 pair_setup sync 64M
pair_report_logs
wait_synced 30
hk alpha primary db >/dev/null || fail "promoting alpha failed"

# hist_check FILE NAME LABELS: the buckets of NAME{LABELS,le=...} never decrease and the last,
# +Inf, equals NAME_count{LABELS}. Prints the count.
hist_check() {
	local f=$1 name=$2 labels=$3 count
	count=$(m "$f" "${name}_count{$labels}")
	awk -v p="${name}_bucket{$labels,le=" -v want="$count" '
		index($1, p) == 1 { if ($2 < last) bad = "decreases at " $1; last = $2; inf = $1 ~ /\+Inf/ ? $2 : inf; n++ }
		END { if (bad) { print bad; exit 1 } if (n < 2 || inf != want) { print n " buckets, +Inf " inf " vs count " want; exit 1 } }' "$f" ||
		fail "$name{$labels} is no consistent histogram in $f"
	echo "$count"
}

# states_match NODE FILE: each state set has exactly its status value at 1.
states_match() {
	local st role disk link peer
	st=$(hk "$1" status --json)
	role=$(jq -r '.volumes[0].role' <<<"$st")
	disk=$(jq -r '.volumes[0].replication.disk' <<<"$st")
	link=$(jq -r '.volumes[0].replication.link' <<<"$st")
	peer=$(jq -r '.volumes[0].replication.peer' <<<"$st")
	assert_eq "$(m "$2" "hak_volume_role{volume=\"db\",role=\"$role\"}")" 1 "$1: role $role"
	assert_eq "$(m "$2" "hak_volume_disk_state{volume=\"db\",peer=\"$peer\",state=\"$disk\"}")" 1 \
		"$1: disk state $disk"
	assert_eq "$(m "$2" "hak_replication_connection_state{volume=\"db\",peer=\"$peer\",state=\"$link\"}")" 1 \
		"$1: connection state $link"
	for fam in hak_volume_role hak_volume_disk_state hak_replication_connection_state; do
		assert_eq "$(awk -v p="$fam{" 'index($1, p) == 1 { s += $2 } END { print s }' "$2")" 1 \
			"$1: the states of $fam at 1"
	done
	log "$1: $role, $disk, $link in the metrics as in the status"
}

VA='volume="db"'
VP='volume="db",peer="beta"'
M=$WORK/m

# ---- 1. exactly N writes ----
scrape alpha "$M.0"
declare -A before
for h in hak_volume_request_duration_seconds hak_volume_local_duration_seconds \
	hak_volume_peer_duration_seconds; do
	before[$h]=$(hist_check "$M.0" $h "$VA,op=\"write\"")
done
before[rtt]=$(hist_check "$M.0" hak_replication_round_trip_seconds "$VP,op=\"write\"")
w0=$(m "$M.0" "hak_volume_requests_total{$VA,op=\"write\"}")
b0=$(m "$M.0" "hak_volume_written_bytes_total{$VA}")
s0=$(m "$M.0" "hak_replication_sent_bytes_total{$VP}")
out=$("$LEDGER" write --uri "$(node_uri alpha)" --ledger "$WORK/l" --max-writes $N --qd 8 \
	--blocks 4096 --flush-every 50) || fail "the ledger's storm failed: $out"
assert_contains "$out" "ledger: $N writes acknowledged, 0 failed" "the storm"
scrape alpha "$M.1"
for h in "${!before[@]}"; do
	[[ $h == rtt ]] && continue
	c=$(hist_check "$M.1" "$h" "$VA,op=\"write\"")
	assert_eq "$((c - before[$h]))" $N "$h: writes counted"
done
c=$(hist_check "$M.1" hak_replication_round_trip_seconds "$VP,op=\"write\"")
assert_eq "$((c - before[rtt]))" $N "replication round trips counted"
assert_eq "$(($(m "$M.1" "hak_volume_requests_total{$VA,op=\"write\"}") - w0))" $N "write requests"
assert_eq "$(($(m "$M.1" "hak_volume_written_bytes_total{$VA}") - b0))" $((N * 4096)) \
	"bytes written"
shipped=$(($(m "$M.1" "hak_replication_sent_bytes_total{$VP}") - s0))
((shipped >= N * 4096)) || fail "only $shipped bytes shipped for $((N * 4096)) written"
flushes=$(hk alpha status --json | jq -r '.volumes[0].requests.flush')
((flushes > 0)) || fail "the storm made no flush"
assert_eq "$(hist_check "$M.1" hak_volume_request_duration_seconds "$VA,op=\"flush\"")" "$flushes" \
	"flushes in the histogram"
rtt_f=$(hist_check "$M.1" hak_replication_round_trip_seconds "$VP,op=\"flush\"")
((rtt_f > 0 && rtt_f <= flushes)) || fail "$rtt_f flush round trips for $flushes flushes"
assert_eq "$(m "$M.1" "hak_volume_out_of_sync_bytes{$VP}")" 0 "out of sync while connected"
log "$N writes: every write histogram +$N, $shipped bytes shipped, $flushes flushes ($rtt_f barriers acked)"

# ---- 2. the states, on both nodes ----
states_match alpha "$M.1"
scrape beta "$M.b"
states_match beta "$M.b"
assert_eq "$(m "$M.b" "hak_volume_requests_total{$VA,op=\"write\"}")" 0 "client writes on beta"
assert_eq "$(m "$M.b" 'hak_build_info{version="'"$(hk beta status --json | jq -r .version)"'"}')" 1 \
	"build info"

# ---- 3. out of sync while beta is away, and the resync ----
rs0=$(m "$M.1" "hak_replication_resyncs_completed_total{$VP}")
rb0=$(m "$M.1" "hak_replication_resynced_bytes_total{$VP}")
node_stop beta
wait_repl alpha link Connecting 10
out=$("$LEDGER" write --uri "$(node_uri alpha)" --ledger "$WORK/l" --max-writes 1000 --qd 8 \
	--blocks 4096) || fail "the storm without beta failed: $out"
scrape alpha "$M.2"
oos=$(m "$M.2" "hak_volume_out_of_sync_bytes{$VP}")
((oos > 0)) || fail "nothing out of sync after 1000 writes without the peer"
assert_eq "$oos" "$(repl alpha out_of_sync_bytes)" "out of sync: metric and status"
assert_eq "$(m "$M.2" "hak_replication_connection_state{$VP,state=\"Connected\"}")" 0 \
	"Connected while beta is down"
states_match alpha "$M.2"
log "beta away: $oos bytes out of sync"
link_throttle 4mbit
node_start beta
saw_rate=0
for ((i = 0; i < 300; i++)); do
	scrape alpha "$M.3"
	if [[ $(m "$M.3" "hak_replication_connection_state{$VP,state=\"SyncSource\"}") == 1 ]]; then
		rate=$(m "$M.3" "hak_replication_resync_rate_bytes_per_second{$VP}")
		left=$(m "$M.3" "hak_replication_resync_remaining_bytes{$VP}")
		if [[ $rate != 0 ]]; then
			saw_rate=1
			log "resync: $rate bytes/s, $left bytes left"
			break
		fi
	fi
	[[ $(m "$M.3" "hak_volume_out_of_sync_bytes{$VP}") == 0 ]] && break
	sleep 0.1
done
((saw_rate)) || fail "no resync rate seen while alpha was SyncSource (throttle it more)"
link_throttle off
wait_synced 60
scrape alpha "$M.4"
assert_eq "$(m "$M.4" "hak_volume_out_of_sync_bytes{$VP}")" 0 "out of sync after the resync"
assert_eq "$(m "$M.4" "hak_replication_resync_rate_bytes_per_second{$VP}")" 0 "rate after the resync"
assert_eq "$(($(m "$M.4" "hak_replication_resyncs_completed_total{$VP}") - rs0))" 1 "resyncs completed"
rb=$(($(m "$M.4" "hak_replication_resynced_bytes_total{$VP}") - rb0))
((rb >= oos)) || fail "the resync counted $rb bytes for $oos out of sync"
states_match alpha "$M.4"
log "beta back: resynced $rb bytes, out of sync 0"

# ---- 4. the HTTP edges ----
ina() { ip netns exec "$NS_alpha" "$@"; }
URL=http://127.0.0.1:$PORT
assert_eq "$(ina curl -s -o /dev/null -w '%{http_code}' "$URL/")" 404 "GET /"
assert_eq "$(ina curl -s -o /dev/null -w '%{http_code}' "$URL/metrics/x")" 404 "GET /metrics/x"
assert_eq "$(ina curl -s -o /dev/null -w '%{http_code}' -X POST "$URL/metrics")" 405 "POST"
assert_eq "$(ina curl -s -D - -o /dev/null -X PUT "$URL/metrics" | tr -d '\r' | grep -i '^allow:')" \
	"Allow: GET" "405's Allow header"
assert_eq "$(ina curl -s -o /dev/null -w '%{http_code}' -X GET --data abc "$URL/metrics")" 400 \
	"GET with a body"
assert_eq "$(ina curl -s -o /dev/null -w '%{http_code}' --http1.0 -H 'Host:' "$URL/metrics")" 200 \
	"HTTP/1.0 without Host"
# raw: garbage, a TLS hello, a header folded
raw() {
	ina timeout 5 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT; printf '$1' >&3; head -n 1 <&3" | tr -d '\r'
}
assert_eq "$(raw 'hello there\r\n\r\n')" "HTTP/1.1 400 Bad Request" "garbage"
assert_eq "$(raw '\x16\x03\x01\x00\x05hello')" "HTTP/1.1 400 Bad Request" "a TLS hello"
assert_eq "$(raw 'GET /metrics HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n')" "HTTP/1.1 400 Bad Request" \
	"a folded header"

# slow CLIENTS: open CLIENTS connections that send half a request and wait; each records when
# its connection was closed by hakd into WORK/slow.N.
slow() {
	local k
	for ((k = 0; k < $1; k++)); do
		ip netns exec "$NS_alpha" timeout 20 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT; printf 'GET /met' >&3; t0=\$(date +%s%N); cat <&3 >$WORK/slow.$k.out; echo \$(( (\$(date +%s%N) - t0) / 1000000 )) >$WORK/slow.$k" &
		track_pid $!
	done
}
rm -f "$WORK"/slow.*
slow 1
sleep 0.5
t0=$(date +%s%N)
scrape alpha "$M.5"
assert_le $((($(date +%s%N) - t0) / 1000000)) 2000 "a scrape next to a slow client (ms)"
wait_for "[[ -s $WORK/slow.0 ]]" 10 || fail "the slow client was not dropped within 10 s"
ms=$(cat "$WORK/slow.0")
((ms >= 4000 && ms <= 7500)) || fail "the slow client was dropped after $ms ms, not after the 5 s timeout"
assert_eq "$(cat "$WORK/slow.0.out")" "" "what the slow client got"
log "a slow client was dropped after $ms ms; a scrape meanwhile took no wait"
rm -f "$WORK"/slow.*
slow 16
wait_for "[[ \$(ina ss -Htn state established '( sport = :$PORT )' | wc -l) -ge 16 ]]" 5 ||
	fail "the 16 slow clients did not connect: $(ina ss -tn)"
sleep 0.3
assert_eq "$(ina curl -s -o /dev/null -w '%{http_code}' "$URL/metrics")" 503 "the 17th client"
wait_for "[[ \$(ls $WORK/slow.? $WORK/slow.?? 2>/dev/null | grep -c -v out) -ge 16 ]]" 10 ||
	fail "the 16 slow clients were not dropped"
scrape alpha "$M.6"
log "16 slow clients: the 17th got 503, a scrape works once they timed out"
assert_eq "$(hk alpha status --json | jq -r '.volumes[0].replication.link')" Connected \
	"the pair after all that"
node_stop alpha
node_stop beta

# ---- 5. hakd --export, with and without --metrics (in alpha's namespace, both nodes down) ----
assert_eq "$(ina ss -Hltn | wc -l)" 0 "listeners with both nodes down"
truncate -s 16M "$WORK/x.img"
head -c 1048576 /dev/urandom >"$WORK/x.data"
# export_start [ARGS...]: hakd --export WORK/x.img in alpha's namespace, pid in XPID (ip netns
# exec execs it: a function in the background would leave a subshell's pid instead)
export_start() {
	ip netns exec "$NS_alpha" "$HAKD" --export "$WORK/x.img" --socket "$WORK/x.sock" --control "$WORK/x.ctl" \
		--foreground "$@" </dev/null >>"$WORK/x.log" 2>&1 &
	XPID=$!
	track_pid "$XPID"
	HAKD_LOGS[x]=$WORK/x.log
	wait_for "[[ -S $WORK/x.sock ]]" 10 || fail "hakd --export did not start: $(tail -n 5 "$WORK/x.log")"
}
export_stop() {
	local rc=0
	kill -TERM "$XPID"
	wait "$XPID" || rc=$?
	assert_eq "$rc" 0 "hakd --export's exit status after SIGTERM"
	rm -f "$WORK/x.sock"
}
export_start --metrics 127.0.0.1:$PORT
nbdcopy "$WORK/x.data" "nbd+unix:///x.img?socket=$WORK/x.sock" || fail "nbdcopy into the export failed"
scrape alpha "$M.x"
assert_eq "$(m "$M.x" 'hak_volume_role{volume="x.img",role="standalone"}')" 1 "the export's role"
assert_eq "$(m "$M.x" 'hak_volume_written_bytes_total{volume="x.img"}')" 1048576 "bytes nbdcopy wrote"
assert_eq "$(m "$M.x" 'hak_volume_request_duration_seconds_count{volume="x.img",op="write"}')" \
	"$(m "$M.x" 'hak_volume_requests_total{volume="x.img",op="write"}')" "writes timed and counted"
grep -q '^hak_replication_\|^hak_volume_disk_state\|^hak_heartbeat' "$M.x" &&
	fail "a standalone export has replication or cluster metrics: $(grep -m 3 '^hak_replication_\|^hak_heartbeat' "$M.x")"
export_stop
assert_eq "$(ina ss -Hltn | wc -l)" 0 "listeners after the export stopped"
export_start
assert_eq "$(ina ss -Hltn | wc -l)" 0 "listeners of an export without --metrics"
export_stop
log "hakd --export: metrics with --metrics, no listener without"
log "PASS"
