#!/usr/bin/env bash
# Resync rate benchmark (issue 4, item 6). Same two emulated machines as bench/replication.sh
# (namespaces joined by a veth pair, alpha on CPU 0, beta on CPU 1, 1 GiB backing files prefilled
# with random data).
#
#   bench/resync_rate.sh    (RUNS=3 RUNTIME=8 HAK_BUILD=build/rel by default)
#
# (a) an idle volume: a full resync of SIZE (fresh metadata, alpha promoted with --force, nothing
#     else running) against a plain TCP copy of SIZE over the same veth:
#       RESULT resync_idle mbps=<x> tcp_mbps=<y> ratio=<x/y>
# (b) fio 4K random writes at QD1 against alpha's NBD socket: mean write latency on an idle
#     connected pair, then while a full resync of SIZE runs (fio starts right after the --force
#     promotion; the run counts only if the resync is still running when fio ends):
#       RESULT resync_latency idle_us=<x> during_us=<y> ratio=<y/x>
#     plus the resync's progress during that run.
# Each number is the median of RUNS runs. Not part of `make check`. VOLUME_EXTRA adds a volume line
# (e.g. VOLUME_EXTRA="resync-rate-min 50M").
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
RUNS=${RUNS:-3}
RUNTIME=${RUNTIME:-8}
SIZE=${SIZE:-1G}
HAK_BUILD=${HAK_BUILD:-build/rel}
IO_ENGINE=${HAK_IO_ENGINE:-auto}
HAKD=$REPO/$HAK_BUILD/hakd
HAKCTL=$REPO/$HAK_BUILD/hakctl
# shellcheck source=bench/lib.sh
. "$REPO/bench/lib.sh"
PYTHON=${PYTHON:-python3}
CPU_PRIMARY=0
CPU_SECONDARY=1

if ((EUID != 0)); then
	echo "bench: network namespaces need root" >&2
	exit 1
fi
for c in fio jq ip taskset "$PYTHON"; do
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

SID=$(printf '%06x' $(((($$ << 15) + RANDOM) & 0xffffff)))
NS_alpha=hakrr-a-$SID
NS_beta=hakrr-b-$SID
DIR=/var/tmp/hak-bench-rsrate.$SID
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

# ---- the two "machines" ----------------------------------------------------------------------
bench_net rr

# Prefill with random data (not one repeated buffer): the resync sends all-zero blocks as holes,
# which would make it look faster than it is.
for n in alpha beta; do
	truncate -s "$SIZE" "$DIR/$n.img"
	fio --name=prefill --filename="$DIR/$n.img" --rw=write --bs=1M --size="$SIZE" \
		--ioengine=psync --refill_buffers --end_fsync=1 --output=/dev/null
done

cat >"$DIR/tcpcopy.py" <<'EOF'
# tcpcopy.py recv PORT | send FILE HOST PORT: a plain TCP copy of FILE, 1 MiB at a time; the
# sender prints MiB/s from connect until the receiver has read everything and closed.
import os, socket, sys, time
CHUNK = 1 << 20
if sys.argv[1] == "recv":
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", int(sys.argv[2])))
    ls.listen(1)
    c, _ = ls.accept()
    buf = bytearray(CHUNK)
    while c.recv_into(buf):
        pass
    c.close()
else:
    fd = os.open(sys.argv[2], os.O_RDONLY)
    deadline = time.time() + 10
    while True:
        try:
            s = socket.create_connection((sys.argv[3], int(sys.argv[4])))
            break
        except ConnectionRefusedError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)
    t0 = time.time()
    total = 0
    while True:
        b = os.read(fd, CHUNK)
        if not b:
            break
        s.sendall(b)
        total += len(b)
    s.shutdown(socket.SHUT_WR)
    s.recv(1)
    print("%.1f" % (total / 1048576 / (time.time() - t0)))
EOF

# run_tcp: the same amount of data over the same veth, pinned the same way; appended to TCP_MBPS.
run_tcp() {
	local v
	ip netns exec "$NS_beta" taskset -c "$CPU_SECONDARY" "$PYTHON" "$DIR/tcpcopy.py" recv 9999 \
		</dev/null >>"$DIR/tcp.log" 2>&1 &
	PIDS[tcprecv]=$!
	v=$(ip netns exec "$NS_alpha" taskset -c "$CPU_PRIMARY" "$PYTHON" "$DIR/tcpcopy.py" send \
		"$DIR/alpha.img" 192.0.2.2 9999 2>>"$DIR/tcp.log") || die "the TCP copy failed"
	stop_proc tcprecv
	TCP_MBPS+=("$v")
}


# fio_qd1: 4K random writes, QD1, RUNTIME seconds against alpha; prints the mean latency in us.
fio_qd1() {
	taskset -c "$CPU_PRIMARY" fio --name=lat --ioengine=nbd \
		--uri="nbd+unix:///db?socket=$DIR/alpha.nbd" --rw=randwrite --bs=4k --iodepth=1 \
		--size="$SIZE" --time_based --runtime="$RUNTIME" --ramp_time=1 --randrepeat=0 \
		--output-format=json --output="$DIR/fio.json" >/dev/null 2>"$DIR/fio.err" || {
		cat "$DIR/fio.err" >&2
		die "fio failed"
	}
	jq -r '.jobs[0].write.lat_ns.mean / 1000 | . * 10 | floor / 10' "$DIR/fio.json"
}

RS_MBPS=() TCP_MBPS=() LAT_IDLE=() LAT_RS=()

run_resync_idle() {
	pair_start sync ""
	full_resync_seconds
	pair_stop
	RS_MBPS+=("$(awk -v t="$RS_SECONDS" -v s="$SIZE_BYTES" 'BEGIN {printf "%.1f", s / 1048576 / t}')")
}

run_latency() {
	local v left
	pair_start sync 1
	hk alpha primary db >/dev/null || die "promoting alpha failed"
	LAT_IDLE+=("$(fio_qd1)")
	pair_stop
	pair_start sync ""
	hk alpha primary db --force >/dev/null || die "promoting alpha with --force failed"
	v=$(fio_qd1)
	left=$(repl alpha resync.left_bytes)
	if [[ $left == null || $left == 0 ]]; then
		echo "bench: the resync ended before fio did; this 'during' run is not counted" >&2
	else
		LAT_RS+=("$v")
		echo "bench: during the resync: ${v} us; $((SIZE_BYTES - left)) of $SIZE_BYTES bytes" \
			"resynced while fio ran" >&2
	fi
	wait_until "[[ \$(repl beta disk) == UpToDate ]]" 600 || die "beta is not UpToDate after 600 s"
	pair_stop
}

echo "bench: $RUNS rounds, $SIZE files on $DIR, hakd engine $IO_ENGINE" >&2
echo "bench: load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for ((r = 0; r < RUNS; r++)); do
	run_tcp
	run_resync_idle
	run_latency
	echo "bench: round $((r + 1)): resync ${RS_MBPS[-1]} MiB/s, TCP ${TCP_MBPS[-1]} MiB/s;" \
		"QD1 latency idle ${LAT_IDLE[-1]} us; load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done
x=$(median %.1f "${RS_MBPS[@]}")
y=$(median %.1f "${TCP_MBPS[@]}")
echo "RESULT resync_idle mbps=$x tcp_mbps=$y ratio=$(awk -v a="$x" -v b="$y" 'BEGIN {printf "%.2f", (b > 0) ? a / b : 0}')"
a=$(median %.1f "${LAT_IDLE[@]}")
if ((${#LAT_RS[@]})); then
	b=$(median %.1f "${LAT_RS[@]}")
	echo "RESULT resync_latency idle_us=$a during_us=$b ratio=$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", (a > 0) ? b / a : 0}')"
else
	echo "RESULT resync_latency idle_us=$a during_us=NA ratio=NA (every resync ended before fio)"
fi
