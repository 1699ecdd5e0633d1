# shellcheck shell=bash disable=SC2034
# Cluster helpers on top of pair.sh (source lib.sh, pair.sh, then this):
#   cluster_setup        pair_setup with heartbeat paths, a cluster section (key file, witness
#                        at 192.0.2.250:7791) and a group "svc" with one exec resource that
#                        writes WORK/NODE.marker; plus a namespace "witness" joined to alpha
#                        (192.0.2.201/30) and beta (192.0.2.205/30), running hakd --witness.
#                        CLUSTER_HB_INTERVAL / CLUSTER_DEADTIME (default 100ms / 500ms) set
#                        the heartbeats, CLUSTER_PING_INTERVAL / CLUSTER_PING_TIMEOUT (200ms /
#                        1s) the replication link's; PAIR_EXTRA adds a line to the volume
#                        section, CLUSTER_GLOBAL_EXTRA one to the global section,
#                        CLUSTER_EXTRA one to the cluster section; CLUSTER_KEY_SPLIT=1
#                        gives alpha, beta and the witness a key file each (same key), so
#                        a test can replace them one at a time; a function
#                        cluster_group_extra NODE, if defined, prints more resources for the
#                        svc group; redefine _cluster_group NODE to print another group section.
#   role NAME            NAME's role (primary/secondary/down)
#   cl NAME FIELD        a field of NAME's cluster status (jq path below .cluster)
#   witness_cut NAME / witness_heal NAME   drop / restore NAME's link to the witness
#   cut_pair / heal_pair  take both paths between the nodes down / up
#   primary_of           the nodes that are primary now ("alpha ", "beta ", "alpha beta ", "")
#   converged CASE       after a heal: both in sync by themselves, one primary, no split brain;
#                        HEALED is that primary
#   sampler_start / sampler_assert [MIN]   record every 100 ms whether each node is primary and
#                        not frozen, and what it acknowledged; assert that the two never
#                        acknowledged writes in the same round nor both served for two rounds
#                        (and that MIN samples ran)
NS_witness=hak-w-$PAIR_SID
CLUSTER_ONQL=${CLUSTER_ONQL:-demote}

# _cluster_group NODE: the group section of NODE's config (pgcluster.sh replaces it).
_cluster_group() {
	cat <<EOG
group svc {
    volume db
    monitor-interval 200ms
    resource marker {
        type exec
        start "echo $1 >$WORK/$1.marker"
        stop "rm -f $WORK/$1.marker"
        monitor "test -f $WORK/$1.marker"
        timeout 5s
    }
$(! declare -F cluster_group_extra >/dev/null || cluster_group_extra "$1")
}
EOG
}

_pair_config() {
	local n=$1
	cat >"$WORK/$n.conf" <<EOC
global {
    control-socket $WORK/$n.ctl
    log-level ${PAIR_LOG_LEVEL:-info}
    io-engine $HAK_IO_ENGINE
    state-dir $WORK/state-$n
    ${CLUSTER_GLOBAL_EXTRA:-}
}
node alpha {
    address 192.0.2.1:7789
    heartbeat-address 192.0.2.1:7790 192.0.2.129:7790
}
node beta {
    address 192.0.2.2:7789
    heartbeat-address 192.0.2.2:7790 192.0.2.130:7790
}
cluster {
    auth-key-file $(_cluster_key "$n")
    heartbeat-interval ${CLUSTER_HB_INTERVAL:-100ms}
    deadtime ${CLUSTER_DEADTIME:-500ms}
    on-quorum-loss $CLUSTER_ONQL
    witness-address 192.0.2.250:7791
    ${CLUSTER_EXTRA:-}
}
volume db {
    backing $WORK/$n.img
    nbd-socket $WORK/$n.nbd
    meta-disk $WORK/$n.meta
    mode $PAIR_MODE
    ping-interval ${CLUSTER_PING_INTERVAL:-200ms}
    ping-timeout ${CLUSTER_PING_TIMEOUT:-1s}
    connect-interval 200ms
    ${PAIR_EXTRA:-}
}
$(_pair_vol2 "$n")
$(_cluster_group "$n")
EOC
	mkdir -p "$WORK/state-$n"
	# beta starts in standby (the persistent flag), so alpha takes the primary role by itself
	if [[ $n == beta && ${CLUSTER_BETA_STANDBY:-1} == 1 ]]; then
		touch "$WORK/state-beta/cluster-1.standby"
	fi
}

# _cluster_key NODE: the cluster key file NODE's config names.
_cluster_key() {
	if [[ ${CLUSTER_KEY_SPLIT:-0} == 1 ]]; then
		echo "$WORK/cluster-$1.key"
	else
		echo "$WORK/cluster.key"
	fi
}

cluster_setup() {
	local k
	head -c 32 /dev/urandom | base64 >"$WORK/cluster.key"
	chmod 600 "$WORK/cluster.key"
	if [[ ${CLUSTER_KEY_SPLIT:-0} == 1 ]]; then
		for k in alpha beta witness; do cp -p "$WORK/cluster.key" "$(_cluster_key $k)"; done
	fi
	ip netns add "$NS_witness"
	defer "ip netns del $NS_witness 2>/dev/null || true"
	pair_setup "${1:-sync}" "${2:-64M}"
	ip -n "$NS_witness" link set lo up
	ip -n "$NS_witness" addr add 192.0.2.250/32 dev lo
	local x ns net
	for x in a b; do
		ns=NS_alpha net=201
		[[ $x == b ]] && ns=NS_beta net=205
		ip link add "w$x-$PAIR_SID" type veth peer name "v$x-$PAIR_SID"
		ip link set "w$x-$PAIR_SID" netns "$NS_witness"
		ip link set "v$x-$PAIR_SID" netns "${!ns}"
		ip -n "$NS_witness" addr add "192.0.2.$net/30" dev "w$x-$PAIR_SID"
		ip -n "${!ns}" addr add "192.0.2.$((net + 1))/30" dev "v$x-$PAIR_SID"
		ip -n "$NS_witness" link set "w$x-$PAIR_SID" up
		ip -n "${!ns}" link set "v$x-$PAIR_SID" up
		ip -n "${!ns}" route add 192.0.2.250/32 via "192.0.2.$net"
	done
	sed "s|$(_cluster_key alpha)|$(_cluster_key witness)|" "$WORK/alpha.conf" >"$WORK/witness.conf"
	ip netns exec "$NS_witness" "$HAKD" --witness --config "$WORK/witness.conf" --foreground \
		</dev/null >>"$WORK/witness.log" 2>&1 &
	WITNESS_PID=$!
	track_pid "$WITNESS_PID"
}

role() {
	node_alive "$1" || { echo down; return; }
	hk "$1" status --json 2>/dev/null | jq -r '.volumes[0].role' || echo unknown
}

cl() {
	hk "$1" status --json | jq -r ".cluster.$2"
}

witness_cut() {
	local ns=NS_$1
	ip -n "${!ns}" link set "v${1:0:1}-$PAIR_SID" down
}

witness_heal() {
	local ns=NS_$1
	ip -n "${!ns}" link set "v${1:0:1}-$PAIR_SID" up
	ip -n "${!ns}" route replace 192.0.2.250/32 via "192.0.2.$([[ $1 == alpha ]] && echo 201 || echo 205)"
}

cut_pair() {
	path_down 1
	path_down 2
}

heal_pair() {
	path_up 1
	path_up 2
}

primary_of() {
	local r
	for r in alpha beta; do
		if [[ $(role "$r") == primary ]]; then echo -n "$r "; fi
	done
}

converged() {
	wait_synced 60
	wait_for "[[ -n \$(primary_of) ]]" 30 ||
		fail "$1: no primary after the heal: alpha $(cl alpha reason); beta $(cl beta reason)"
	grep -q "split brain detected" "$WORK/alpha.log" "$WORK/beta.log" && fail "$1: split brain after the heal"
	HEALED=$(primary_of)
	HEALED=${HEALED% }
	log "$1: healed: primary $HEALED"
}

# The sampler talks to both control sockets directly (hakctl under ASan is too slow for 100 ms):
# one line per round, "TIME ALPHA BETA ALPHA_BYTES BETA_BYTES": 1 for a node that is primary and
# not frozen, and the bytes its volume acknowledged as written so far (-1: no answer).
sampler_start() {
	rm -f "$WORK/sampler.stop" "$WORK/samples"
	python3 - "$WORK" <<'PY' &
import json, os, socket, sys, time
work = sys.argv[1]
def serving(n):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(0.5)
        s.connect(f"{work}/{n}.ctl")
        s.sendall(b'{"cmd":"status"}\n')
        buf = b""
        while not buf.endswith(b"\n"):
            c = s.recv(65536)
            if not c:
                break
            buf += c
        s.close()
        j = json.loads(buf)
        v = j["volumes"][0]
        return (int(v["role"] == "primary" and not j["cluster"]["frozen"]),
                int(v["bytes"]["write"]))
    except Exception:
        return (0, -1)
# Rounds start on a fixed 100 ms grid rather than 100 ms after the previous one ended, so the
# time the two requests take on a loaded machine does not stretch the cadence; a round that
# overran the grid starts the next one at once, without a burst to catch up.
with open(f"{work}/samples", "a") as out:
    due = time.monotonic()
    for _ in range(6000):
        if os.path.exists(f"{work}/sampler.stop"):
            break
        a, b = serving('alpha'), serving('beta')
        out.write(f"{time.time():.3f} {a[0]} {b[0]} {a[1]} {b[1]}\n")
        out.flush()
        due += 0.1
        late = time.monotonic() - due
        if late < 0:
            time.sleep(-late)
        else:
            due = time.monotonic()
PY
	SAMPLER_PID=$!
	SAMPLER_T0=$(date +%s.%N)
	track_pid "$SAMPLER_PID"
}

# sampler_assert MIN_SAMPLES: the samples must cover the whole scenario, from sampler_start to
# here (first and last sample within 3 s of either end, one sample per 200 ms of it at least, and
# no gap between two samples over 1.5 s, a round whose two requests both timed out at 0.5 s plus
# slack), so a sampler that stalled or died early fails; MIN_SAMPLES is only a floor on top of
# that. The gap is what the "two rounds in a row" rule rests on: a long one could hide two
# primaries for longer than the 1 s deadtime.
sampler_assert() {
	local n both t1 cover ok w head tail gap
	t1=$(date +%s.%N)
	touch "$WORK/sampler.stop"
	wait "$SAMPLER_PID" || true
	n=$(wc -l <"$WORK/samples")
	# Two violations: both nodes acknowledged writes in the same round (their counters grew
	# since the previous one), or both were primary and not frozen for two rounds in a row.
	# One round alone is not one: the two nodes are read one after the other, and each
	# notices the lost peer within a heartbeat interval of the other.
	read -r both acked single <<<"$(awk '
		{
			da = $4 >= 0 && pa >= 0 && $4 > pa
			db = $5 >= 0 && pb >= 0 && $5 > pb
			acked += da && db
			if ($2 == 1 && $3 == 1) { run++; if (run == 2) both++; if (run == 1) single++ }
			else run = 0
			pa = $4; pb = $5
		}
		BEGIN {pa = -1; pb = -1}
		END {print both + 0, acked + 0, single + 0}' "$WORK/samples")"
	log "sampler: $n samples; rounds in which both acknowledged writes: $acked; both serving" \
		"for two rounds in a row: $both (for one round: $single)"
	cover=$(awk -v t0="$SAMPLER_T0" -v t1="$t1" -v n="$n" -v min="${1:-20}" '
		NR == 1 {a = $1} NR > 1 && $1 - b > gap {gap = $1 - b} {b = $1}
		END {
			w = t1 - t0
			ok = NR >= min && n * 2 >= w * 10 && a - t0 <= 3 && t1 - b <= 3 && gap <= 1.5
			printf "%d %.1f %.1f %.1f %.2f", ok, w, a - t0, t1 - b, gap
		}' "$WORK/samples")
	read -r ok w head tail gap <<<"$cover"
	log "sampler: the longest gap between two samples was ${gap} s"
	((ok)) || fail "the sampler took $n samples (at least ${1:-20} wanted) over a ${w} s" \
		"scenario, the first ${head} s after the start and the last ${tail} s before the end," \
		"with at most ${gap} s (1.5 s allowed) between two"
	assert_eq "$acked" 0 "rounds in which both nodes acknowledged writes"
	assert_eq "$both" 0 "two serving primaries for two rounds in a row"
}
