#!/usr/bin/env bash
# NBD benchmark: hakd (build/rel) against the anchor `nbdkit file`, both serving the same prefilled
# sparse 1 GiB file on /var/tmp over UNIX sockets, measured with fio's nbd engine. Servers alternate
# run by run; each number is the median of RUNS runs of RUNTIME seconds.
#
#   bench/nbd.sh            (RUNS=3 RUNTIME=10 SIZE=1G HAK_BUILD=build/rel by default)
#   ONLY=randwrite4k_qd1 bench/nbd.sh   (run only the workloads whose name matches the regex)
#
# Output, one line per workload, then the peak RSS of hakd:
#   RESULT <workload> hakd=<iops> nbdkit=<iops> ratio=<hakd/nbdkit>
#   RESULT hakd_peak_rss_kb=<N>
# Not part of `make check`: the numbers are for reading, never a pass/fail.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
RUNS=${RUNS:-3}
RUNTIME=${RUNTIME:-10}
SIZE=${SIZE:-1G}
HAK_BUILD=${HAK_BUILD:-build/rel}
IO_ENGINE=${HAK_IO_ENGINE:-auto}
HAKD=$REPO/$HAK_BUILD/hakd

for c in fio nbdkit jq; do
	command -v "$c" >/dev/null || {
		echo "bench: $c is missing; run scripts/deps.sh" >&2
		exit 1
	}
done
if [[ ! -x $HAKD ]]; then
	echo "bench: building $HAKD" >&2
	make -s BUILD="$HAK_BUILD" bins >&2
fi

DIR=/var/tmp/hak-bench.$$-$RANDOM
mkdir -p "$DIR"
PIDS=()
cleanup() {
	local p i
	set +e
	for p in "${PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null
		for ((i = 0; i < 100; i++)); do
			kill -0 "$p" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

IMG=$DIR/vol.img
truncate -s "$SIZE" "$IMG"
# Prefill so that reads hit data, not holes (a hole read costs the server almost nothing).
fio --name=prefill --filename="$IMG" --rw=write --bs=1M --size="$SIZE" --ioengine=psync \
	--end_fsync=1 --output=/dev/null

"$HAKD" --export "$IMG" --socket "$DIR/hakd.sock" --control "$DIR/hakd.ctl" --foreground \
	--io-engine "$IO_ENGINE" >"$DIR/hakd.log" 2>&1 &
HAKD_PID=$!
PIDS+=("$HAKD_PID")
nbdkit -f -U "$DIR/nbdkit.sock" --exit-with-parent file "$IMG" >"$DIR/nbdkit.log" 2>&1 &
PIDS+=("$!")
for ((i = 0; i < 100; i++)); do
	[[ -S $DIR/hakd.sock && -S $DIR/nbdkit.sock ]] && break
	sleep 0.1
done
if [[ ! -S $DIR/hakd.sock || ! -S $DIR/nbdkit.sock ]]; then
	cat "$DIR/hakd.log" "$DIR/nbdkit.log" >&2
	echo "bench: a server did not start" >&2
	exit 1
fi
declare -A URI=([hakd]="nbd+unix:///?socket=$DIR/hakd.sock" [nbdkit]="nbd+unix:///?socket=$DIR/nbdkit.sock")

# name | fio arguments
WORKLOADS=(
	"randread4k_qd32|--rw=randread --bs=4k --iodepth=32 --numjobs=1"
	"randwrite4k_qd32|--rw=randwrite --bs=4k --iodepth=32 --numjobs=1"
	"randwrite4k_qd1|--rw=randwrite --bs=4k --iodepth=1 --numjobs=1"
	"seqwrite1m_qd8|--rw=write --bs=1M --iodepth=8 --numjobs=1"
	"randwrite4k_qd32_4conn|--rw=randwrite --bs=4k --iodepth=32 --numjobs=4"
)

# run_fio SERVER ARGS: total IOPS (reads + writes, all jobs) of one run.
run_fio() {
	local server=$1 args=$2 out=$DIR/fio.json
	# shellcheck disable=SC2086
	fio --name=bench --ioengine=nbd --uri="${URI[$server]}" $args --size="$SIZE" \
		--time_based --runtime="$RUNTIME" --ramp_time=1 --group_reporting --randrepeat=0 \
		--output-format=json --output="$out" >/dev/null 2>"$DIR/fio.err" || {
		cat "$DIR/fio.err" >&2
		echo "bench: fio failed against $server" >&2
		return 1
	}
	jq '[.jobs[] | .read.iops + .write.iops] | add | floor' "$out"
}

median() {
	printf '%s\n' "$@" | sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2)}'
}

echo "bench: $RUNS runs of ${RUNTIME}s per server and workload, file $SIZE on $DIR, hakd engine $IO_ENGINE" >&2
for w in "${WORKLOADS[@]}"; do
	name=${w%%|*}
	args=${w#*|}
	[[ $name =~ ${ONLY:-.} ]] || continue
	h=()
	n=()
	for ((r = 1; r <= RUNS; r++)); do
		# Alternate which server goes first so neither always gets the warmer cache.
		if ((r % 2)); then
			hv=$(run_fio hakd "$args")
			nv=$(run_fio nbdkit "$args")
		else
			nv=$(run_fio nbdkit "$args")
			hv=$(run_fio hakd "$args")
		fi
		h+=("$hv")
		n+=("$nv")
		echo "bench: $name run $r: hakd ${h[-1]} nbdkit ${n[-1]} IOPS" >&2
	done
	hm=$(median "${h[@]}")
	nm=$(median "${n[@]}")
	ratio=$(awk -v a="$hm" -v b="$nm" 'BEGIN {printf "%.2f", (b > 0) ? a / b : 0}')
	echo "RESULT $name hakd=$hm nbdkit=$nm ratio=$ratio"
done
kill -0 "$HAKD_PID" 2>/dev/null || {
	cat "$DIR/hakd.log" >&2
	echo "bench: hakd died" >&2
	exit 1
}
echo "RESULT hakd_peak_rss_kb=$(awk '$1 == "VmHWM:" {print $2}' "/proc/$HAKD_PID/status")"
