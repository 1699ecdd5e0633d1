#!/usr/bin/env bash
# Where the replication benchmark's CPU time goes: runs one configuration of bench/replication.sh
# (4K random write QD32, one round) and, once fio is under way, records perf on both CPUs and
# counts the primary's system calls. CPU 0 carries fio, the primary and its receive processing;
# CPU 1 the secondary. Prints the busiest (cpu, thread) pairs and syscalls per second; the perf
# data stays in $OUT for `perf report -i $OUT/perf.data`.
#
#   bench/profile.sh sync        (or standalone, async, memsync; needs perf)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODE=${1:-sync}
OUT=${OUT:-/var/tmp/hak-profile.$$}
SECONDS_REC=${SECONDS_REC:-5}
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
ONLY=qd32 MODES=$MODE RESYNC=0 RUNS=1 RUNTIME=$((SECONDS_REC + 6)) \
	"$REPO/bench/replication.sh" >"$OUT/bench.log" 2>&1 &
bench=$!
trap 'kill "$bench" 2>/dev/null || true' EXIT
# The bench prints its load line when setup (build, prefill) is over; fio starts right after.
for ((i = 0; i < 3000; i++)); do
	grep -q 'load average before' "$OUT/bench.log" && break
	kill -0 "$bench" 2>/dev/null || break
	sleep 0.2
done
grep -q 'load average before' "$OUT/bench.log" || {
	cat "$OUT/bench.log" >&2
	echo "profile.sh: the benchmark did not get going." >&2
	exit 1
}
sleep 4
# The primary is the hakd serving alpha.img of this bench's scratch directory (named in its log).
dir=$(sed -n 's/.* files on \([^,]*\),.*/\1/p' "$OUT/bench.log")
if [[ $MODE == standalone ]]; then
	pid=$(pgrep -n -f -- "--export $dir/alpha.img" || true)
else
	pid=$(pgrep -n -f -- "--config $dir/alpha.conf" || true)
fi
ev=
for s in sendmsg write read pwritev2 futex epoll_wait io_uring_enter; do
	ev+="syscalls:sys_enter_$s,"
done
if [[ -n $dir && -n $pid ]]; then
	perf stat -e "${ev%,}" -p "$pid" -o "$OUT/syscalls.txt" -- sleep 1 >/dev/null 2>&1 || true
fi
perf record -a -g -F 1999 -o "$OUT/perf.data" -- sleep "$SECONDS_REC" >/dev/null 2>&1
wait "$bench" || true
trap - EXIT
grep -E 'IOPS' "$OUT/bench.log" || true
if [[ -s $OUT/syscalls.txt ]]; then
	awk '$1 ~ /^[0-9,]+$/ {print "syscalls/s of the primary:", $1, $2}' "$OUT/syscalls.txt"
else
	echo "profile.sh: the primary's hakd was not found in $dir; no syscall counts." >&2
fi
perf report -i "$OUT/perf.data" --no-children --sort cpu,comm -q -g none 2>/dev/null | head -15
echo "profile.sh: perf data in $OUT/perf.data"
