#!/usr/bin/env bash
# Where the replication benchmark's CPU time goes: runs one configuration of bench/replication.sh
# (one workload, one round: 4K random write QD32 unless WORKLOAD names another of its workloads)
# and, once fio is under way, records perf on both CPUs and counts the primary's system calls.
# CPU 0 carries fio, the primary and its receive processing; CPU 1 the secondary. Prints the
# busiest (cpu, thread) pairs and, for one second, the primary's syscalls per second and per
# client write (a count, which holds on a noisy machine); the perf data stays in $OUT for
# `perf report -i $OUT/perf.data`.
#
#   bench/profile.sh sync        (or standalone, async, memsync; needs perf)
#   WORKLOAD=fsync4k_j16 bench/profile.sh sync     (commits: a write and a FLUSH each)
#   WORKLOAD=resync bench/profile.sh sync   (a full resync of SIZE, default 4G, from alpha to
#                                            beta: perf on both CPUs from the moment beta logs
#                                            the resync's start, for SECONDS_REC, default 1.5 s;
#                                            then the busiest symbols of each node, the resync's
#                                            MiB/s and its durable TCP copy's from the same run)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODE=${1:-sync}
OUT=${OUT:-/var/tmp/hak-profile.$$}
case $MODE in standalone | async | memsync | sync) ;; *)
	echo "profile.sh: unknown mode '$MODE' (standalone, async, memsync or sync)." >&2
	exit 2
	;;
esac
command -v perf >/dev/null || {
	echo "profile.sh: perf is not installed (apt-get install linux-perf)." >&2
	exit 1
}
mkdir -p "$OUT"

# wait_log FILE PATTERN TRIES STEP: until FILE has a line matching PATTERN, at most TRIES polls
# STEP seconds apart, and no longer than the bench runs; false when it never came.
wait_log() {
	local i
	for ((i = 0; i < $3; i++)); do
		grep -qs -- "$2" "$1" && return 0
		kill -0 "$bench" 2>/dev/null || break
		sleep "$4"
	done
	grep -qs -- "$2" "$1"
}

# profile_resync: record both CPUs once beta logs the start of its resync (the bench makes the
# pair anew and promotes alpha after its TCP copies), then what each node's CPU did.
profile_resync() {
	local i
	wait_log "${dir:-/nonexistent}/beta.log" 'Starting a' 6000 0.05 || {
		cat "$OUT/bench.log" >&2
		echo "profile.sh: the resync did not start in $dir." >&2
		exit 1
	}
	perf record -a -g -F 1999 -o "$OUT/perf.data" -- sleep "$SECONDS_REC" >/dev/null 2>&1
	wait "$bench" || true
	trap - EXIT
	grep -E 'round|RESULT' "$OUT/bench.log" || true
	# (|| true: head closing the pipe early is not a failure)
	perf report -i "$OUT/perf.data" --no-children --sort cpu,comm -q -g none 2>/dev/null |
		head -15 || true
	for i in 0 1; do
		echo "profile.sh: CPU $i ($([[ $i == 0 ]] && echo alpha, the source || echo beta, the target)), busiest symbols:"
		perf report -i "$OUT/perf.data" --no-children --cpu "$i" --sort comm,sym -q -g none \
			2>/dev/null | head -15 || true
	done
	echo "profile.sh: perf data in $OUT/perf.data"
}

WORKLOAD=${WORKLOAD:-randwrite4k_qd32}
if [[ $WORKLOAD == resync ]]; then
	[[ $MODE != standalone ]] || {
		echo "profile.sh: a resync needs a pair: async, memsync or sync." >&2
		exit 2
	}
	SECONDS_REC=${SECONDS_REC:-1.5}
	ONLY='^none$' MODES=$MODE RESYNC=1 RUNS=1 SIZE=${SIZE:-4G} \
		"$REPO/bench/replication.sh" >"$OUT/bench.log" 2>&1 &
else
	SECONDS_REC=${SECONDS_REC:-5}
	ONLY="^$WORKLOAD\$" MODES=$MODE RESYNC=0 RUNS=1 RUNTIME=$((SECONDS_REC + 6)) \
		"$REPO/bench/replication.sh" >"$OUT/bench.log" 2>&1 &
fi
bench=$!
trap 'kill "$bench" 2>/dev/null || true' EXIT
# The bench prints its load line when setup (build, prefill) is over; fio starts right after.
wait_log "$OUT/bench.log" 'load average before' 3000 0.2 || {
	cat "$OUT/bench.log" >&2
	echo "profile.sh: the benchmark did not get going." >&2
	exit 1
}
# The primary is the hakd serving alpha.img of this bench's scratch directory (named in its log);
# it starts after the prefill, which takes a while on a busy machine.
dir=$(sed -n 's/.* files on \([^,]*\),.*/\1/p' "$OUT/bench.log")
if [[ $WORKLOAD == resync ]]; then
	profile_resync
	exit 0
fi
pat="--config $dir/alpha.conf"
[[ $MODE != standalone ]] || pat="--export $dir/alpha.img"
pid=
for ((i = 0; i < 600 && ${#dir} > 0; i++)); do
	pid=$(pgrep -n -f -- "$pat" || true)
	[[ -z $pid ]] || break
	sleep 0.2
done
sleep 4
ev=
for s in sendmsg recvmsg recvfrom write read pwritev2 pwrite64 fdatasync futex epoll_wait \
	io_uring_enter; do
	ev+="syscalls:sys_enter_$s,"
done
ctl=$dir/alpha.ctl
[[ $MODE != standalone ]] || ctl=$dir/standalone.ctl
writes() {
	"$REPO/${HAK_BUILD:-build/rel}/hakctl" --control "$ctl" status --json 2>/dev/null |
		jq '.volumes[0].requests.write' 2>/dev/null || echo 0
}
nw=0
if [[ -n $dir && -n $pid ]]; then
	w0=$(writes)
	perf stat -e "${ev%,}" -p "$pid" -o "$OUT/syscalls.txt" -- sleep 1 >/dev/null 2>&1 || true
	nw=$(($(writes) - w0))
fi
perf record -a -g -F 1999 -o "$OUT/perf.data" -- sleep "$SECONDS_REC" >/dev/null 2>&1
wait "$bench" || true
trap - EXIT
grep -E 'IOPS' "$OUT/bench.log" || true
if [[ -s $OUT/syscalls.txt ]]; then
	echo "profile.sh: $nw client writes in the counted second"
	awk -v n="$nw" '$1 ~ /^[0-9,]+$/ {c = $1; gsub(",", "", c)
		printf "syscalls/s of the primary: %s %s (%.2f per write)\n", $1, $2, (n > 0 ? c / n : 0)}' \
		"$OUT/syscalls.txt"
else
	echo "profile.sh: the primary's hakd was not found in $dir; no syscall counts." >&2
fi
perf report -i "$OUT/perf.data" --no-children --sort cpu,comm -q -g none 2>/dev/null | head -15
echo "profile.sh: perf data in $OUT/perf.data"
