#!/usr/bin/env bash
# The measurements behind the RDMA transport's data path (daemon/transport/README.md): SEND
# against RDMA WRITE, and registering a payload (zero-copy) against copying it into the
# registered pool. Runs inside the Debian kernel guest (QEMU TCG, Soft-RoCE), from the host:
#
#   tests/guest/guest.sh --timeout 900 -- bash bench/rdma_design.sh
#
# The layout is the RDMA pair's (PAIR_ONE_NS in tests/integration/pair.sh): one veth with both
# addresses, one rxe device, every packet looping inside rxe. perftest's queue pairs use the
# RoCEv2 GID of 192.0.2.1 (its out-of-band exchange goes over TCP; through rdma_cm, -R, each run
# spent about 40 s in connection setup and teardown here, measured). RUNS (default 3) of each:
#   ib_send_lat (with -e and polling) / ib_write_lat at 64, 4096, 65536 bytes, 300 iterations
#   (t_typical, perftest's median, in us)
#   ib_send_bw (with -e and polling) / ib_write_bw at 4096, 65536, 1048576 bytes, 1000/100/10
#   iterations (BW average, MB/s); a run over PERF_TMO seconds (default 30) counts as "timeout"
#   bench/rdma_regcost.c (built here with cc and pkg-config): ibv_reg_mr + ibv_dereg_mr of a
#   4 KiB, 64 KiB, 1 MiB buffer against memcpy of the same bytes.
# Output: RESULT lines per run, then a Markdown table of the medians.
#
#   bash bench/rdma_design.sh --regcost-only
#
# runs only rdma_regcost, where it is: on this machine (no RDMA module, so no device) it times
# memcpy alone, the real CPU's copy to set against the emulated guest's.
# Soft-RoCE in an emulated guest: ratios are what these numbers can say, not absolute speed.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
RUNS=${RUNS:-3}
SID=$(printf '%06x' $((RANDOM * 256 + RANDOM % 256)))
NET=hd-$SID
DEV=rxe-$SID
OUT=$(mktemp -d /tmp/rdma-design.XXXXXX)
PORT=19000
PERF_TMO=${PERF_TMO:-30}
SPID=

cleanup() {
	if [[ -n $SPID ]]; then kill "$SPID" 2>/dev/null || true; fi
	rdma link delete "$DEV" 2>/dev/null || true
	ip link del "$NET" 2>/dev/null || true
	rm -rf "$OUT"
}
trap cleanup EXIT

regcost_only=0
[[ ${1:-} == --regcost-only ]] && regcost_only=1
for c in cc pkg-config ss ibv_devinfo ib_send_lat ib_write_lat ib_send_bw ib_write_bw rdma ip; do
	((regcost_only)) && [[ $c != cc && $c != pkg-config ]] && continue
	command -v "$c" >/dev/null || { echo "rdma_design: $c is missing (scripts/deps.sh)" >&2; exit 2; }
done
# shellcheck disable=SC2046
cc -O2 -Wall -Wextra -Werror -o "$OUT/rdma_regcost" "$REPO/bench/rdma_regcost.c" \
	$(pkg-config --cflags --libs libibverbs) # split on purpose: several flags

if ((regcost_only)); then
	"$OUT/rdma_regcost" 1000 || (($? == 2)) # 2: no device, memcpy only
	exit 0
fi

modprobe rdma_rxe
ip link add "$NET" type veth peer name "${NET}b"
ip addr add 192.0.2.1/25 dev "$NET"
ip addr add 192.0.2.2/25 dev "$NET"
ip link set "$NET" up
ip link set "${NET}b" up
rdma link add "$DEV" type rxe netdev "$NET"
GID=$(ibv_devinfo -v -d "$DEV" | grep -F '::ffff:192.0.2.1, RoCE v2' |
	sed -n 's/.*GID\[ *\([0-9]*\)\].*/\1/p' | head -n 1)
[[ -n $GID ]] || { echo "rdma_design: $DEV has no RoCEv2 GID for 192.0.2.1" >&2; exit 1; }

# perf TOOL SIZE ITERS: one perftest run, server and client; prints the result's number (us
# t_typical for *_lat, MB/s average for *_bw).
perf() {
	local tool=${1%-ev} size=$2 iters=$3 i line ev=()
	PORT=$((PORT + 1))
	# TOOL-ev: both sides sleep on the completion channel, as hakd does. Only the SEND tests
	# have that mode (ib_write_lat polls the target buffer), so SEND runs both ways and the
	# polled SEND is the one to set against WRITE.
	[[ $1 == *-ev ]] && ev=(-e)
	"$tool" -F "${ev[@]}" -d "$DEV" -x "$GID" -p "$PORT" -s "$size" -n "$iters" >"$OUT/srv" 2>&1 &
	SPID=$!
	# The client gives up at once unless the server listens (its stdout is a buffered file,
	# so its own "Waiting for client" comes too late to wait for).
	for ((i = 0; i < 100; i++)); do
		[[ -n $(ss -Hltn "sport = :$PORT") ]] && break
		sleep 0.1
	done
	if ! timeout "$PERF_TMO" "$tool" -F "${ev[@]}" -d "$DEV" -x "$GID" -p "$PORT" -s "$size" \
		-n "$iters" 192.0.2.1 >"$OUT/cli" 2>&1; then
		# Reported, not fatal: a run that stalls (rxe retransmitting) is a result too.
		echo "rdma_design: $tool -s $size -n $iters failed or took over ${PERF_TMO}s: $(tail -n 3 "$OUT/cli" | tr '\n' ' ')" >&2
		kill "$SPID" 2>/dev/null || true
		wait "$SPID" 2>/dev/null || true
		SPID=
		echo timeout
		return 0
	fi
	wait "$SPID" || true
	SPID=
	# The result row starts with the size; column 5 of a latency row is t_typical, column 4
	# of a bandwidth row is BW average.
	line=$(awk -v s="$size" '$1 == s && NF >= 4 { print; exit }' "$OUT/cli")
	[[ -n $line ]] || { echo "rdma_design: no result row in:" >&2; cat "$OUT/cli" >&2; exit 1; }
	case $tool in
	*_lat) awk '{ print $5 }' <<<"$line" ;;
	*) awk '{ print $4 }' <<<"$line" ;;
	esac
}

median() {
	# A run that reported inf or 0.00 (perftest under a starved guest) is left out.
	tr ' ' '\n' | grep -E '^[0-9.]+$' | grep -vE '^0*\.?0*$' | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'
}

declare -A R=()
echo "guest kernel $(uname -r), $(nproc) CPUs, device $DEV on $NET, $RUNS runs each"
for ((run = 1; run <= RUNS; run++)); do
	while read -r _ _ sz rg cp; do
		R[reg.${sz#size=}]+="${rg#reg_dereg_ns=} "
		R[cpy.${sz#size=}]+="${cp#memcpy_ns=} "
		echo "RESULT run=$run test=regcost ${sz} ${rg} ${cp}"
	done < <("$OUT/rdma_regcost" 1000 | grep '^RESULT regcost')
	for size in ${LAT_SIZES:-64 4096 65536}; do
		for t in ib_send_lat-ev ib_send_lat ib_write_lat; do
			t0=$SECONDS
			v=$(perf "$t" "$size" "${LAT_ITERS:-300}")
			R[$t.$size]+="$v "
			echo "RESULT run=$run test=$t size=$size t_typical_us=$v ($((SECONDS - t0)) s)"
		done
	done
	for size in ${BW_SIZES:-4096 65536 1048576}; do
		iters=$((size >= 1048576 ? 10 : size >= 65536 ? 100 : 1000))
		for t in ib_send_bw-ev ib_send_bw ib_write_bw; do
			t0=$SECONDS
			v=$(perf "$t" "$size" "$iters")
			R[$t.$size]+="$v "
			echo "RESULT run=$run test=$t size=$size bw_avg_mb_s=$v ($((SECONDS - t0)) s)"
		done
	done
done

echo
echo "| size | send_lat -e us | send_lat us | write_lat us | send_bw -e MB/s | send_bw MB/s | write_bw MB/s | reg+dereg ns | memcpy ns |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for size in 64 4096 65536 1048576; do
	row="| $size"
	for k in ib_send_lat-ev ib_send_lat ib_write_lat ib_send_bw-ev ib_send_bw ib_write_bw reg cpy; do
		if [[ -n ${R[$k.$size]:-} ]]; then
			row+=" | $(median <<<"${R[$k.$size]}")"
		else
			row+=" | -"
		fi
	done
	echo "$row |"
done
echo "(medians of $RUNS runs, leaving out runs that reported inf or 0; one rxe device, QEMU TCG;"
echo " -e: sleeping on completion events, as hakd does; the others poll)"
