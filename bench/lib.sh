# Shared by the benchmarks (replication.sh, resync_rate.sh, pgbench.sh): sourced at the top; the
# functions use what the script defines before calling them: DIR, HAKCTL, PIDS (name -> pid of
# a process the script started), and for the pair functions at the end the names listed there.

# full_resync_seconds: promotes alpha with --force (fresh metadata on both, connected) and sets
# RS_SECONDS to the seconds from the promotion until beta reports the end of its resync, then checks beta is
# UpToDate. It waits on beta's event stream: polling `hakctl status | jq` every 100 ms took a
# quarter of both CPUs away from the resync it was timing (perf, during a 1.3 s resync).
full_resync_seconds() {
	local t0 t1 line ev_pid ended=0
	coproc EV { exec timeout 900 "$HAKCTL" --control "$DIR/beta.ctl" events; }
	ev_pid=$EV_PID
	# Outside the timed window: lets the stream subscribe before anything can happen on it.
	sleep 0.3
	t0=$(date +%s.%N)
	hk alpha primary db --force >/dev/null || die "promoting alpha with --force failed"
	while IFS= read -r -t 600 -u "${EV[0]}" line; do
		if [[ $line == resync-end\ * ]]; then
			ended=1
			break
		fi
	done
	t1=$(date +%s.%N)
	kill "$ev_pid" 2>/dev/null || true
	wait "$ev_pid" 2>/dev/null || true
	((ended)) || die "beta reported no resync-end within 600 s of the promotion"
	[[ $(repl beta disk) == UpToDate ]] ||
		die "beta's resync ended but its disk is $(repl beta disk), not UpToDate"
	RS_SECONDS=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')
}

# alive PID: true while PID runs; a zombie (our child not yet waited for) counts as dead.
alive() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	s=${s##*) }
	[[ ${s%% *} != [ZX] ]]
}

# stop_proc NAME: SIGTERM, SIGKILL after 20 s; sets STOP_RC to the exit status.
stop_proc() {
	local name=$1 pid=${PIDS[$1]:-} i
	STOP_RC=0
	[[ -n $pid ]] || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < 200; i++)); do
		alive "$pid" || break
		sleep 0.1
	done
	if alive "$pid"; then
		echo "bench: $name (pid $pid) still runs 20 s after SIGTERM; killing it" >&2
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || STOP_RC=$?
	unset "PIDS[$name]"
}

# wait_until CMD TIMEOUT_S: poll CMD every 0.1 s.
wait_until() {
	local end=$(($(date +%s%N) + $2 * 1000000000))
	until eval "$1" >/dev/null 2>&1; do
		(($(date +%s%N) < end)) || return 1
		sleep 0.1
	done
}

hk() {
	local n=$1
	shift
	timeout 20 "$HAKCTL" --control "$DIR/$n.ctl" "$@"
}

# quiet: alpha has nothing in flight or out of sync and is plainly Connected.
quiet() {
	hk alpha status --json | jq -e '.volumes[0].replication |
		.in_flight_writes == 0 and .out_of_sync_bytes == 0 and .link == "Connected"'
}

# median FORMAT VALUES...
median() {
	local fmt=$1
	shift
	printf '%s\n' "$@" | sort -g | awk -v f="$fmt" '{v[NR] = $1}
		END {printf f "\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}

# die MESSAGE: say it, with the last lines of every log in DIR, and exit 1 (the EXIT trap
# cleans up).
die() {
	local f
	echo "bench: $*" >&2
	for f in "$DIR"/*.log; do
		[[ -s $f ]] || continue
		echo "--- last lines of $f:" >&2
		tail -n 20 "$f" >&2
	done
	exit 1
}

# bench_teardown: what every benchmark's EXIT trap ends with: stop the processes it started
# (PIDS), delete its namespaces (NS_alpha, NS_beta), remove DIR unless HAK_KEEP_WORK is set.
bench_teardown() {
	local name
	for name in "${!PIDS[@]}"; do
		stop_proc "$name"
	done
	if [[ -n ${NS_alpha:-} ]]; then
		ip netns del "$NS_alpha" 2>/dev/null
	fi
	if [[ -n ${NS_beta:-} ]]; then
		ip netns del "$NS_beta" 2>/dev/null
	fi
	if [[ -n ${HAK_KEEP_WORK:-} ]]; then
		echo "bench: keeping $DIR" >&2
	else
		rm -rf "$DIR"
	fi
}

# bench_net PREFIX [rps]: the two "machines", namespaces NS_alpha (192.0.2.1) and NS_beta
# (192.0.2.2) joined by a veth pair named PREFIXa-SID / PREFIXb-SID. With rps, each side
# receives on its own node's CPU (CPU_PRIMARY, CPU_SECONDARY): a veth hands each packet to the
# receiver's stack on the SENDING CPU, so without it the secondary's whole TCP receive path
# would be billed to the primary's CPU, where two real machines each receive on their own.
bench_net() {
	local a=$1a-$SID b=$1b-$SID ns
	ip netns add "$NS_alpha"
	ip netns add "$NS_beta"
	ip link add "$a" type veth peer name "$b"
	ip link set "$a" netns "$NS_alpha"
	ip link set "$b" netns "$NS_beta"
	ip -n "$NS_alpha" addr add 192.0.2.1/24 dev "$a"
	ip -n "$NS_beta" addr add 192.0.2.2/24 dev "$b"
	for ns in "$NS_alpha" "$NS_beta"; do
		ip -n "$ns" link set lo up
	done
	ip -n "$NS_alpha" link set "$a" up
	ip -n "$NS_beta" link set "$b" up
	if [[ ${2:-} == rps ]]; then
		ip netns exec "$NS_alpha" sh -c \
			"echo $((1 << CPU_PRIMARY)) >/sys/class/net/$a/queues/rx-0/rps_cpus"
		ip netns exec "$NS_beta" sh -c \
			"echo $((1 << CPU_SECONDARY)) >/sys/class/net/$b/queues/rx-0/rps_cpus"
	fi
}

# ---- the secondary's disk --------------------------------------------------------------------
# peer_disk_init: beta's backing file DIR/beta.img elsewhere. This machine has one disk, so both
# nodes' files share it and each node's flushes queue behind the other's, which two real servers
# never see. PEER_DIR puts beta's file there (DIR/beta.img becomes a symlink to it; truncate it,
# never remove it): PEER_DIR=/dev/shm (tmpfs, where fdatasync costs nothing) shows what is left
# with the secondary's disk out of the way. PEER_FLUSH_US (needs PEER_DIR) gives that file the
# flush latency of a disk of its own: bench/flushdelay.c, preloaded into beta's hakd (io-engine
# pool, whose workers call fdatasync through the C library), sleeps that long before each one
# (a standalone run's flush latency is this machine's disk's, as a guide). Uses DIR and SID.
peer_disk_init() {
	if [[ -n ${PEER_DIR:-} ]]; then
		mkdir -p "$PEER_DIR/hak-bench.$SID"
		: >"$PEER_DIR/hak-bench.$SID/beta.img"
		ln -sf "$PEER_DIR/hak-bench.$SID/beta.img" "$DIR/beta.img"
	fi
	[[ -n ${PEER_FLUSH_US:-} ]] || return 0
	[[ -n ${PEER_DIR:-} ]] || die "PEER_FLUSH_US needs PEER_DIR (beta's file off this disk)"
	cc -O2 -Wall -Wextra -Werror -shared -fPIC -o "$DIR/flushdelay.so" \
		"$REPO/bench/flushdelay.c" -ldl || die "building bench/flushdelay.c failed"
	export FLUSHDELAY_US=$PEER_FLUSH_US
	PEER_PRELOAD=$DIR/flushdelay.so
	PEER_IO_ENGINE=pool
}

peer_disk_cleanup() {
	[[ -z ${PEER_DIR:-} || -z ${SID:-} ]] || rm -rf "$PEER_DIR/hak-bench.$SID"
}

# ---- a hakd pair (or one standalone hakd) ------------------------------------------------------
# These use DIR, HAKD, HAKCTL, IO_ENGINE, CPU_PRIMARY, CPU_SECONDARY, NS_alpha, NS_beta and PIDS;
# PEER_IO_ENGINE and PEER_PRELOAD (a library for LD_PRELOAD), when set, apply to beta alone.

# write_config NODE MODE: NODE's config, volume db on DIR/NODE.img; GLOBAL_EXTRA and VOLUME_EXTRA
# add a line to the global section and to the volume (e.g. "sched-policy normal"); TRANSPORT
# (tcp, tls or tls-psk; see tls_setup) picks the replication link.
write_config() {
	cat >"$DIR/$1.conf" <<EOF
global {
    control-socket $DIR/$1.ctl
    log-level info
    io-engine $(if [[ $1 == beta ]]; then echo "${PEER_IO_ENGINE:-$IO_ENGINE}"; else echo "$IO_ENGINE"; fi)
    ${GLOBAL_EXTRA:-}
}
node alpha {
    address 192.0.2.1:7789
}
node beta {
    address 192.0.2.2:7789
}
volume db {
    backing $DIR/$1.img
    nbd-socket $DIR/$1.nbd
    meta-disk $DIR/$1.meta
    mode $2
    connect-interval 200ms
    auth-key-file $DIR/repl.key
    ${VOLUME_EXTRA:-}
$(transport_lines "$1")
}
EOF
}

# tls_setup: for TRANSPORT=tls or tls-psk, certificates and a pre-shared key for the pair in
# DIR/tls (tests/tls-certs.sh); nothing for tcp.
tls_setup() {
	case ${TRANSPORT:-tcp} in
	tcp) return 0 ;;
	tls | tls-psk) ;;
	*) die "TRANSPORT is '$TRANSPORT'; use tcp, tls or tls-psk" ;;
	esac
	mkdir -p "$DIR/tls"
	"$REPO/tests/tls-certs.sh" "$DIR/tls" alpha beta || die "making TLS certificates in $DIR/tls failed"
}

# transport_lines NODE: the volume's lines for TRANSPORT.
transport_lines() {
	case ${TRANSPORT:-tcp} in
	tls)
		printf '    transport tls\n    tls-ca-file %s\n' "$DIR/tls/ca.crt"
		printf '    tls-cert-file %s\n    tls-key-file %s\n' "$DIR/tls/$1.crt" "$DIR/tls/$1.key"
		;;
	tls-psk) printf '    transport tls\n    tls-psk-file %s\n' "$DIR/tls/psk" ;;
	esac
}

# repl NODE FIELD: a field of NODE's replication status.
repl() {
	hk "$1" status --json 2>/dev/null | jq -r ".volumes[0].replication.$2"
}

# start_node NODE CPU: hakd in NODE's namespace, pinned to CPU (ip netns exec, env and taskset
# all exec, so $! is hakd itself).
start_node() {
	local n=$1 ns=NS_$1 pre=
	[[ $n == beta ]] && pre=${PEER_PRELOAD:-}
	ip netns exec "${!ns}" env ${pre:+LD_PRELOAD=$pre} taskset -c "$2" "$HAKD" \
		--config "$DIR/$n.conf" --node "$n" --foreground </dev/null >>"$DIR/$n.log" 2>&1 &
	PIDS[$n]=$!
	wait_until "hk $n version" 20 || die "hakd on $n did not come up"
}

# pair_start MODE BLANK: fresh metadata (blank when BLANK=1, so no initial sync), both nodes up
# and connected; nobody promoted.
pair_start() {
	local mode=$1 blank=$2 n
	(umask 077 && head -c 32 /dev/urandom | base64 >"$DIR/repl.key")
	for n in alpha beta; do
		write_config "$n" "$mode"
		rm -f "$DIR/$n.meta"
		"$HAKCTL" --config "$DIR/$n.conf" --node "$n" create-md db ${blank:+--blank} \
			>>"$DIR/create-md.log" 2>&1 || die "create-md on $n failed"
	done
	start_node alpha "$CPU_PRIMARY"
	start_node beta "$CPU_SECONDARY"
	for n in alpha beta; do
		wait_until "[[ \$(repl $n link) == Connected ]]" 20 ||
			die "$n is not Connected after 20 s (link $(repl "$n" link))"
	done
}

pair_stop() {
	local n
	for n in alpha beta; do
		stop_proc "$n"
		((STOP_RC == 0)) || echo "bench: hakd on $n exited with status $STOP_RC" >&2
	done
}

# pair_quiesce: wait for quiet, so one workload's backlog (async) does not slow the next one down.
pair_quiesce() {
	wait_until quiet 60 ||
		echo "bench: alpha still has writes in flight or out of sync after 60 s:" \
			"$(hk alpha status --json | jq -c '.volumes[0].replication')" >&2
}

# standalone_start: hakd --export of DIR/alpha.img on CPU_PRIMARY, the anchor.
standalone_start() {
	taskset -c "$CPU_PRIMARY" "$HAKD" --export "$DIR/alpha.img" --name db \
		--socket "$DIR/standalone.nbd" --control "$DIR/standalone.ctl" --foreground \
		--io-engine "$IO_ENGINE" </dev/null >>"$DIR/standalone.log" 2>&1 &
	PIDS[standalone]=$!
	wait_until "[[ -S $DIR/standalone.nbd ]] && hk standalone version" 20 ||
		die "standalone hakd did not come up"
}

# ---- QEMU's write-blocking mirror, the anchor for replication --------------------------------
# These use DIR, NS_alpha, NS_beta, CPU_PRIMARY, CPU_SECONDARY and PIDS; QNBD_PORT (default 10809)
# is qemu-nbd's port on 192.0.2.2. Note what the anchor promises: the mirror's filter forwards
# writes to the target before completing them (copy-mode write-blocking), but a FLUSH flushes only
# the source (QEMU's bdrv_mirror_top_flush), so the target (qemu-nbd, writeback cache) has every
# acknowledged write in its page cache, not on its disk: memsync's promise, not sync's.
qmp() {
	timeout 40 /usr/bin/python3 "$REPO/bench/qmp.py" "$DIR/qsd.qmp" "$@" 2>>"$DIR/qmp.log"
}

# mirror_state: the mirror job's status ("ready" once source and target are in sync), or
# "gone" when the job no longer exists (it failed).
mirror_state() {
	qmp query-block-jobs | jq -r '(map(select(.device == "m0")) | .[0].status) // "gone"'
}

# qemu_start: qemu-nbd with beta's file in beta's namespace (CPU 1); qemu-storage-daemon in
# alpha's (CPU 0) exporting alpha's file on DIR/qemu.nbd, mirroring it to qemu-nbd; returns once
# the mirror job is ready.
qemu_start() {
	local st i
	ip netns exec "$NS_beta" taskset -c "$CPU_SECONDARY" qemu-nbd -f raw -x db -b 192.0.2.2 \
		-p "${QNBD_PORT:-10809}" -t --cache=writeback --aio=threads --discard=unmap "$DIR/beta.img" \
		</dev/null >>"$DIR/qemu-nbd.log" 2>&1 &
	PIDS[qemu-nbd]=$!
	wait_until "[[ -n \$(ip netns exec $NS_beta ss -Hltn 'sport = :${QNBD_PORT:-10809}') ]]" 20 ||
		die "qemu-nbd does not listen on 192.0.2.2:${QNBD_PORT:-10809}"
	ip netns exec "$NS_alpha" taskset -c "$CPU_PRIMARY" qemu-storage-daemon \
		--blockdev "driver=file,node-name=src,filename=$DIR/alpha.img,aio=threads,cache.direct=off" \
		--nbd-server "addr.type=unix,addr.path=$DIR/qemu.nbd" \
		--export type=nbd,id=exp0,node-name=src,name=db,writable=on \
		--chardev "socket,id=qmp0,path=$DIR/qsd.qmp,server=on,wait=off" \
		--monitor chardev=qmp0 </dev/null >>"$DIR/qsd.log" 2>&1 &
	PIDS[qsd]=$!
	wait_until "[[ -S $DIR/qemu.nbd && -S $DIR/qsd.qmp ]]" 20 ||
		die "qemu-storage-daemon did not come up"
	qmp blockdev-add "{\"driver\": \"nbd\", \"node-name\": \"tgt\", \"export\": \"db\",
		\"server\": {\"type\": \"inet\", \"host\": \"192.0.2.2\", \"port\": \"${QNBD_PORT:-10809}\"}}" \
		>/dev/null || die "blockdev-add of the nbd target failed"
	qmp blockdev-mirror '{"job-id": "m0", "device": "src", "target": "tgt", "sync": "full",
		"copy-mode": "write-blocking"}' >/dev/null || die "blockdev-mirror failed"
	for ((i = 0; i < 3000; i++)); do
		st=$(mirror_state) || die "query-block-jobs failed"
		[[ $st == ready ]] && break
		[[ $st == @(running|created) ]] || die "the mirror job is $st, not running"
		sleep 0.1
	done
	[[ $st == ready ]] || die "the mirror job is not ready after 300 s"
}

qemu_stop() {
	# The job is still ready (not cancelled while the database ran: a write-blocking mirror
	# that failed would have left it concluded or gone).
	[[ $(mirror_state) == ready ]] || echo "bench: the mirror job ended early: $(mirror_state)" >&2
	stop_proc qsd
	stop_proc qemu-nbd
}
