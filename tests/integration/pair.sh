# shellcheck shell=bash disable=SC2034
# Two-node helpers for replication tests. Source after lib.sh:
#   . "$(dirname "$0")/lib.sh"; . "$(dirname "$0")/pair.sh"
#
# pair_setup [MODE] [SIZE]   namespaces alpha/beta (per-run names), two veth paths
#                            (path 1: 192.0.2.1 <-> .2, the replication link; path 2:
#                            192.0.2.129 <-> .130), a config per node, metadata, both hakd running.
#                            PAIR_BLANK=1 creates blank metadata (no initial sync).
#                            PAIR_EXTRA="key value" adds a line to the volume block.
#                            PAIR_GLOBAL="key value" adds a line to the global block.
#                            PAIR_NO_START=1 leaves both hakd stopped (node_start them later).
#                            PAIR_PING_TIMEOUT=DURATION instead of 1s (volume db).
#                            Both nodes share the replication key WORK/repl.key;
#                            PAIR_AUTH=none configures insecure-no-auth instead.
#                            PAIR_VOL2=NAME adds a second volume NAME (same mode and size,
#                            backing WORK/NODE-NAME.img, replication port offset 1).
#                            PAIR_TRANSPORT=tls replicates over TLS with certificates made per run
#                            into WORK/tls by tests/tls-certs.sh (CA ca, nodes alpha and beta, a
#                            mallory of the same CA and an impostor-alpha of another);
#                            PAIR_TRANSPORT=tls-psk with the pre-shared key WORK/tls/psk.
#                            PAIR_TRANSPORT=rdma over Soft-RoCE (rdma_rxe, so in tests/guest):
#                            see _pair_one_ns_setup. PAIR_TRANSPORT=rdma,tcp: RDMA with TCP as
#                            the fallback; in tests/guest with PAIR_ONE_NS=1 (rdma_rxe loaded),
#                            and PAIR_RDMA_LATER=1 leaves the rxe device out (rdma_dev_add adds
#                            it later; the pair's cleanup deletes it).
# node_start NAME / node_stop NAME / node_kill9 NAME / node_alive NAME
# hk NAME ARGS...            hakctl against NAME's control socket
# repl NAME FIELD            a field of NAME's replication status (jq path below .replication)
# repl_v NAME I FIELD        the same for NAME's volume I (0, 1)
# wait_repl NAME FIELD VALUE TIMEOUT_S
# wait_synced TIMEOUT_S      both Connected + UpToDate and nothing out of sync (every volume)
# node_uri NAME [VOL]        the NBD URI of NAME's export of VOL (default db)
# path_down N / path_up N    take a path (1 or 2) down or up, on alpha's side
# link_throttle RATE|off     limit alpha's side of the replication link (tc tbf), so a resync
#                            from alpha takes seconds
# wait_target_share PCT WHAT wait until beta, SyncTarget, applied PCT % of its resync
# backing NAME [VOL]         NAME's backing file of VOL (default db)

PAIR_SID=$(printf '%06x' $(((($$ << 15) + RANDOM) & 0xffffff)))
NS_alpha=hak-a-$PAIR_SID
NS_beta=hak-b-$PAIR_SID
declare -A NODE_PIDS=()
PAIR_MODE=sync

_pair_config() {
	local n=$1
	cat >"$WORK/$n.conf" <<EOF
global {
    control-socket $WORK/$n.ctl
    log-level ${PAIR_LOG_LEVEL:-info}
    io-engine $HAK_IO_ENGINE
    ${PAIR_GLOBAL:-}
}
node alpha {
    address 192.0.2.1:7789
}
node beta {
    address 192.0.2.2:7789
}
volume db {
    backing $WORK/$n.img
    nbd-socket $WORK/$n.nbd
    meta-disk $WORK/$n.meta
    mode $PAIR_MODE
    ping-interval 200ms
    ping-timeout ${PAIR_PING_TIMEOUT:-1s}
    connect-interval 200ms
    $(_pair_auth)
    ${PAIR_EXTRA:-}
$(_pair_tls "$n")
}
$(_pair_vol2 "$n")
EOF
}

# _pair_auth: the volume's peer authentication line (PAIR_AUTH=none: insecure-no-auth).
_pair_auth() {
	if [[ ${PAIR_AUTH:-key} == none ]]; then
		echo "insecure-no-auth yes"
	else
		echo "auth-key-file $WORK/repl.key"
	fi
}

# _pair_tls NODE: the volume's transport lines for PAIR_TRANSPORT (none for tcp).
_pair_tls() {
	case ${PAIR_TRANSPORT:-tcp} in
	tcp) ;;
	tls)
		printf '    transport tls\n    tls-ca-file %s\n' "$WORK/tls/ca.crt"
		printf '    tls-cert-file %s\n    tls-key-file %s\n' "$WORK/tls/$1.crt" "$WORK/tls/$1.key"
		;;
	tls-psk) printf '    transport tls\n    tls-psk-file %s\n' "$WORK/tls/psk" ;;
	rdma) printf '    transport rdma\n' ;;
	rdma,tcp) printf '    transport rdma,tcp\n' ;;
	*) fail "PAIR_TRANSPORT is '$PAIR_TRANSPORT'; use tcp, tls, tls-psk, rdma or rdma,tcp" ;;
	esac
}

# _pair_vol2 NODE: the section of the second volume, if PAIR_VOL2 names one.
_pair_vol2() {
	[[ -n ${PAIR_VOL2:-} ]] || return 0
	cat <<EOV
volume $PAIR_VOL2 {
    backing $WORK/$1-$PAIR_VOL2.img
    nbd-socket $WORK/$1-$PAIR_VOL2.nbd
    meta-disk $WORK/$1-$PAIR_VOL2.meta
    mode $PAIR_MODE
    replication-port-offset 1
    ping-interval ${CLUSTER_PING_INTERVAL:-200ms}
    ping-timeout ${CLUSTER_PING_TIMEOUT:-1s}
    connect-interval 200ms
    $(_pair_auth)
    ${PAIR_EXTRA:-}
}
EOV
}

pair_setup() {
	PAIR_MODE=${1:-sync}
	local size=${2:-256M} n v
	require_cmd ip jq
	(umask 077 && head -c 32 /dev/urandom | base64 >"$WORK/repl.key")
	if [[ ${PAIR_TRANSPORT:-tcp} == tls* && ! -d $WORK/tls ]]; then
		require_cmd openssl
		mkdir -p "$WORK/tls"
		"$REPO/tests/tls-certs.sh" "$WORK/tls" alpha beta mallory ||
			fail "making the TLS certificates in $WORK/tls failed"
	fi
	if [[ ${PAIR_TRANSPORT:-tcp} == rdma || -n ${PAIR_ONE_NS:-} ]]; then
		_pair_one_ns_setup
	else
		_pair_netns_setup
	fi
	for n in alpha beta; do
		_pair_config "$n"
		for v in db ${PAIR_VOL2:-}; do
			truncate -s "$size" "$(backing "$n" "$v")"
			"$HAKCTL" --config "$WORK/$n.conf" --node "$n" create-md "$v" \
				${PAIR_BLANK:+--blank} >>"$WORK/create-md.log" 2>&1 ||
				fail "create-md of $v on $n failed: $(cat "$WORK/create-md.log")"
		done
	done
	if [[ ${PAIR_NO_START:-0} != 1 ]]; then
		node_start alpha
		node_start beta
	fi
	log "pair up: namespaces $NS_alpha $NS_beta, mode $PAIR_MODE, size $size"
}

# Linux 6.1's rxe sends and receives only in the initial network namespace, and rdma_cm takes the
# device of the interface that holds an address, so a connection between two rxe devices, or
# out of a namespace, never comes up (measured in the guest: rping times out). Both nodes run in
# the initial namespace (the guest's own) instead, their two addresses on one veth with one rxe
# device, and every packet loops through that device inside rxe: queue pairs, completions and
# the connection manager as with two machines, without a wire. NS_alpha/NS_beta name nothing.
# PAIR_ONE_NS=1 gives a TCP pair the same layout (its packets then loop through lo), for
# comparing the two transports.
_pair_one_ns_setup() {
	if [[ ${PAIR_TRANSPORT:-tcp} == rdma* ]]; then
		modprobe rdma_rxe || fail "modprobe rdma_rxe failed: this kernel has no Soft-RoCE"
		require_cmd rdma
	fi
	ip link add "ha1-$PAIR_SID" type veth peer name "hb1-$PAIR_SID"
	defer "ip link del ha1-$PAIR_SID 2>/dev/null || true"
	ip addr add 192.0.2.1/25 dev "ha1-$PAIR_SID"
	ip addr add 192.0.2.2/25 dev "ha1-$PAIR_SID"
	ip link set "ha1-$PAIR_SID" up
	ip link set "hb1-$PAIR_SID" up
	if [[ ${PAIR_TRANSPORT:-tcp} == rdma* ]]; then
		[[ -n ${PAIR_RDMA_LATER:-} ]] || rdma_dev_add
		defer "rdma link delete rxe-$PAIR_SID 2>/dev/null || true"
	fi
	PAIR_NO_NETNS=1 # for node_start
}

# rdma_rc_qps: how many RC queue pairs exist (each RDMA stream is one).
rdma_rc_qps() {
	rdma resource show qp 2>/dev/null | grep -c 'type RC' || true
}

# rdma_dev_add: the pair's Soft-RoCE device (PAIR_TRANSPORT=rdma).
rdma_dev_add() {
	rdma link add "rxe-$PAIR_SID" type rxe netdev "ha1-$PAIR_SID" ||
		fail "adding the rxe device rxe-$PAIR_SID on ha1-$PAIR_SID failed"
}

_pair_netns_setup() {
	ip netns add "$NS_alpha"
	defer "ip netns del $NS_alpha 2>/dev/null || true"
	ip netns add "$NS_beta"
	defer "ip netns del $NS_beta 2>/dev/null || true"
	for p in 1 2; do
		ip link add "ha$p-$PAIR_SID" type veth peer name "hb$p-$PAIR_SID"
		ip link set "ha$p-$PAIR_SID" netns "$NS_alpha"
		ip link set "hb$p-$PAIR_SID" netns "$NS_beta"
	done
	ip -n "$NS_alpha" addr add 192.0.2.1/25 dev "ha1-$PAIR_SID"
	ip -n "$NS_beta" addr add 192.0.2.2/25 dev "hb1-$PAIR_SID"
	ip -n "$NS_alpha" addr add 192.0.2.129/25 dev "ha2-$PAIR_SID"
	ip -n "$NS_beta" addr add 192.0.2.130/25 dev "hb2-$PAIR_SID"
	for n in alpha beta; do
		local ns=NS_$n
		ip -n "${!ns}" link set lo up
		ip -n "${!ns}" link set "h${n:0:1}1-$PAIR_SID" up
		ip -n "${!ns}" link set "h${n:0:1}2-$PAIR_SID" up
	done
}

node_start() {
	local n=$1 ns=NS_$1 pid i nsx=()
	[[ -n ${PAIR_NO_NETNS:-} ]] || nsx=(ip netns exec "${!ns}")
	"${nsx[@]}" "$HAKD" --config "$WORK/$n.conf" --node "$n" --foreground \
		</dev/null >>"$WORK/$n.log" 2>&1 &
	pid=$!
	track_pid "$pid"
	NODE_PIDS[$n]=$pid
	for ((i = 0; i < 100; i++)); do
		[[ -S $WORK/$n.ctl ]] && hk "$n" version >/dev/null 2>&1 && return 0
		pid_alive "$pid" || break
		sleep 0.1
	done
	tail -n 30 "$WORK/$n.log" >&2 || true
	fail "hakd on $n did not come up"
}

node_alive() {
	pid_alive "${NODE_PIDS[$1]}"
}

node_kill9() {
	local pid=${NODE_PIDS[$1]}
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	rm -f "$WORK/$1.ctl"
	log "killed hakd on $1 (pid $pid) with SIGKILL"
}

node_stop() {
	local n=$1 pid=${NODE_PIDS[$1]} rc=0 i
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 200; i++)); do
		pid_alive "$pid" || break
		sleep 0.1
	done
	pid_alive "$pid" && fail "hakd on $n still runs 20 s after SIGTERM"
	wait "$pid" || rc=$?
	((rc == 0)) || fail "hakd on $n exited with $rc after SIGTERM"
	sanitizer_check "$WORK/$n.log" || fail "sanitizer report in $WORK/$n.log"
}

hk() {
	local n=$1
	shift
	timeout 20 "$HAKCTL" --control "$WORK/$n.ctl" "$@"
}

repl() {
	hk "$1" status --json | jq -r ".volumes[0].replication.$2"
}

repl_v() {
	hk "$1" status --json | jq -r ".volumes[$2].replication.$3"
}

wait_repl() {
	local n=$1 field=$2 want=$3 tmo=${4:-20}
	wait_for "[[ \$(repl $n $field 2>/dev/null) == '$want' ]]" "$tmo" ||
		fail "$n: replication.$field is '$(repl "$n" "$field" 2>/dev/null)', want '$want' after ${tmo}s"
}

wait_synced() {
	local tmo=${1:-60} n
	for n in alpha beta; do
		wait_repl "$n" link Connected "$tmo"
		wait_repl "$n" disk UpToDate "$tmo"
		wait_repl "$n" out_of_sync_bytes 0 "$tmo"
	done
	[[ -n ${PAIR_VOL2:-} ]] || return 0
	for n in alpha beta; do
		wait_for "[[ \$(repl_v $n 1 link) == Connected && \$(repl_v $n 1 disk) == UpToDate && \$(repl_v $n 1 out_of_sync_bytes) == 0 ]]" "$tmo" ||
			fail "$n: volume $PAIR_VOL2 is not in sync after ${tmo}s: $(hk "$n" status --json | jq -c '.volumes[1].replication')"
	done
}

node_uri() {
	if [[ ${2:-db} == db ]]; then
		echo "nbd+unix:///db?socket=$WORK/$1.nbd"
	else
		echo "nbd+unix:///$2?socket=$WORK/$1-$2.nbd"
	fi
}

backing() {
	if [[ ${2:-db} == db ]]; then
		echo "$WORK/$1.img"
	else
		echo "$WORK/$1-$2.img"
	fi
}

path_down() {
	ip -n "$NS_alpha" link set "ha$1-$PAIR_SID" down
}

path_up() {
	ip -n "$NS_alpha" link set "ha$1-$PAIR_SID" up
}

link_throttle() {
	if [[ $1 == off ]]; then
		tc -n "$NS_alpha" qdisc del dev "ha1-$PAIR_SID" root 2>/dev/null || true
		return 0
	fi
	ip -n "$NS_alpha" link set "ha1-$PAIR_SID" txqueuelen 1000
	tc -n "$NS_alpha" qdisc replace dev "ha1-$PAIR_SID" root tbf rate "$1" burst 64kb latency 50ms
	defer "tc -n $NS_alpha qdisc del dev ha1-$PAIR_SID root 2>/dev/null || true"
}

# wait_target_share PCT WHAT: beta must reach PCT % of a resync as SyncTarget within 30 s, and
# the resync must not end before (WHAT names the step in the failure). Sets RS_DONE, RS_TOTAL.
wait_target_share() {
	local pct=$1 what=$2 st d=0 t=0 i seen=0
	for ((i = 0; i < 300; i++)); do
		st=$(hk beta status --json | jq -c '.volumes[0].replication')
		if [[ $(jq -r .link <<<"$st") == SyncTarget ]]; then
			seen=1
			d=$(jq -r '.resync.done_bytes // 0' <<<"$st")
			t=$(jq -r '.resync.total_bytes // 0' <<<"$st")
			((t > 0 && d * 100 >= t * pct)) && break
		elif ((seen)); then
			fail "$what: the resync ended before beta applied $pct% of it (beta: $st): throttle it more"
		fi
		sleep 0.1
	done
	((i < 300)) || fail "$what: beta did not get $pct% into a resync within 30 s: $st"
	RS_DONE=$d
	RS_TOTAL=$t
}

# pair_report_logs: make lib.sh's cleanup treat both nodes' logs like hakd_start's: their last
# lines are printed when the test fails, and they are checked for sanitizer reports (also after
# node_kill9, which node_stop's check never sees).
pair_report_logs() {
	HAKD_LOGS['alpha']=$WORK/alpha.log
	HAKD_LOGS['beta']=$WORK/beta.log
}
