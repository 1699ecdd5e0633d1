#!/usr/bin/env bash
# Memory benchmark: what hakd keeps resident while it serves a large sparse replicated volume.
# A pair in two network namespaces (as in bench/replication.sh) with SIZE (default 1 TiB) sparse
# backing files on /var/tmp, DATA_MIB (default 256) of random data written into alpha's in 1 MiB
# pieces spread evenly over the volume; fresh (not blank) metadata, so promoting alpha with
# --force starts a full resync of the whole volume; then a verify from alpha; then a few seconds
# of 4 KiB random writes through alpha's NBD export. After each step, each hakd's VmRSS and
# VmHWM (the peak) from /proc/PID/status. The goal (issue 24): RSS at most 64 MiB plus the
# bitmap, which is 32 KiB per GiB of volume at the default 4 KiB bitmap block.
#
#   bench/memory.sh           (SIZE=1T DATA_MIB=256 HAK_BUILD=build/rel)
#   SIZE=64G bench/memory.sh  (a quick look)
#
# Output:
#   RESULT memory step=<resync|verify|writes> node=<alpha|beta> rss_mib=<x> hwm_mib=<y>
#          bitmap_mib=<b> budget_mib=<64+b>
#   RESULT memory_times size=<SIZE> resync_s=<s> verify_s=<v>
# Not part of `make check`; HAK_KEEP_WORK=1 keeps the scratch directory (logs).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
SIZE=${SIZE:-1T}
DATA_MIB=${DATA_MIB:-256}
HAK_BUILD=${HAK_BUILD:-build/rel}
IO_ENGINE=${HAK_IO_ENGINE:-auto}
HAKD=$REPO/$HAK_BUILD/hakd
HAKCTL=$REPO/$HAK_BUILD/hakctl
# shellcheck source=bench/lib.sh
. "$REPO/bench/lib.sh"
CPU_PRIMARY=0
CPU_SECONDARY=1

if ((EUID != 0)); then
	echo "bench: network namespaces need root" >&2
	exit 1
fi
for c in fio jq ip taskset dd; do
	command -v "$c" >/dev/null || {
		echo "bench: $c is missing; run scripts/deps.sh" >&2
		exit 1
	}
done
if [[ ! -x $HAKD || ! -x $HAKCTL ]]; then
	echo "bench: building $HAK_BUILD" >&2
	make -s BUILD="$HAK_BUILD" bins >&2
fi
SIZE_BYTES=$(numfmt --from=iec "$SIZE")
BITMAP_MIB=$(awk -v s="$SIZE_BYTES" 'BEGIN {printf "%.1f", s / 4096 / 8 / 1048576}')
BUDGET_MIB=$(awk -v b="$BITMAP_MIB" 'BEGIN {printf "%.1f", 64 + b}')

SID=$(printf '%06x' $(((($$ << 15) + RANDOM) & 0xffffff)))
NS_alpha=hakmb-a-$SID
NS_beta=hakmb-b-$SID
DIR=/var/tmp/hak-bench-mem.$SID
mkdir -p "$DIR"
declare -A PIDS=() # name -> pid of a process this script started

cleanup() {
	local rc=$?
	set +e
	trap - EXIT
	bench_teardown
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bench_net mb

# Sparse files; alpha gets DATA_MIB pieces of 1 MiB of random data, evenly spread.
for n in alpha beta; do
	truncate -s "$SIZE" "$DIR/$n.img"
done
stride=$((SIZE_BYTES / 1048576 / DATA_MIB))
((stride >= 1)) || die "DATA_MIB=$DATA_MIB does not fit in SIZE=$SIZE"
head -c $((DATA_MIB * 1048576)) /dev/urandom >"$DIR/data"
for ((i = 0; i < DATA_MIB; i++)); do
	dd if="$DIR/data" of="$DIR/alpha.img" bs=1M count=1 skip="$i" seek=$((i * stride)) \
		conv=notrunc status=none || die "writing alpha's data failed"
done
rm -f "$DIR/data"
sync "$DIR/alpha.img"

# mem_report STEP: each hakd's resident and peak memory now.
mem_report() {
	local n rss hwm
	for n in alpha beta; do
		rss=$(awk '/^VmRSS:/ {printf "%.1f", $2 / 1024}' "/proc/${PIDS[$n]}/status")
		hwm=$(awk '/^VmHWM:/ {printf "%.1f", $2 / 1024}' "/proc/${PIDS[$n]}/status")
		echo "RESULT memory step=$1 node=$n rss_mib=$rss hwm_mib=$hwm bitmap_mib=$BITMAP_MIB" \
			"budget_mib=$BUDGET_MIB"
	done
}

pair_start sync ""
echo "bench: $SIZE sparse volume, $DATA_MIB MiB of data; full resync starts" >&2
full_resync_seconds
resync_s=$RS_SECONDS
echo "bench: full resync of $SIZE took $resync_s s" >&2
mem_report resync

t0=$(date +%s.%N)
hk alpha verify db >/dev/null || die "starting the verify failed"
wait_until "[[ \$(repl alpha verify.running) == false ]]" 1800 ||
	die "the verify did not finish in 30 minutes: $(repl alpha verify)"
verify_s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
diff=$(repl alpha verify.differing_blocks)
echo "bench: verify took $verify_s s, $diff differing blocks," \
	"$(repl alpha verify.hole_bytes) bytes compared as holes" >&2
[[ $diff == 0 ]] || die "the verify found $diff differing blocks after a full resync"
mem_report verify

taskset -c "$CPU_PRIMARY" fio --name=w --ioengine=nbd --uri="nbd+unix:///db?socket=$DIR/alpha.nbd" \
	--rw=randwrite --bs=4k --iodepth=32 --size="$SIZE" --runtime=10 --time_based \
	--output=/dev/null 2>"$DIR/fio.err" || {
	cat "$DIR/fio.err" >&2
	die "fio against alpha's export failed"
}
mem_report writes
echo "RESULT memory_times size=$SIZE resync_s=$resync_s verify_s=$verify_s"
