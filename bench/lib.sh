# Shared by the benchmarks (replication.sh, resync_rate.sh, pgbench.sh): sourced at the top; the
# functions use what the script defines before calling them: DIR, HAKCTL, PIDS (name -> pid of
# a process the script started), repl and die.

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
