#!/usr/bin/env bash
# Replication benchmark: what replication costs. Two machines are emulated on this one by two
# network namespaces joined by a veth pair (192.0.2.1 <-> 192.0.2.2). fio and the primary hakd
# (alpha), or the standalone hakd, run on CPU 0; the secondary hakd (beta) runs on CPU 1. Backing
# files are 1 GiB sparse files on /var/tmp, prefilled once with random data so that writes hit
# allocated blocks and a resync has real data to copy.
#
#   bench/replication.sh    (RUNS=3 RUNTIME=10 HAK_BUILD=build/rel by default)
#   ONLY=qd32 MODES="standalone sync" RESYNC=0 bench/replication.sh   (a subset, for quick looks)
#   VOLUME_EXTRA="max-epoch-size 20000" bench/replication.sh   (one more line in both volumes)
#   GLOBAL_EXTRA="sched-policy normal" bench/replication.sh   (one more line in both globals)
#   FIO_EXTRA="--fsync=2048" bench/replication.sh   (more fio arguments for every run; with
#                                                     --fsync the anchor, too, makes its data durable)
#   BUSY_PEER=1 bench/replication.sh   (a busy loop pinned to the secondary's CPU for the whole
#                                       run: a standby is rarely idle)
#   PEER_DIR=/dev/shm bench/replication.sh   (beta's backing file there: see below)
#   PEER_DIR=/dev/shm PEER_FLUSH_US=800 bench/replication.sh   (and every fdatasync of beta's
#                                         sleeps 800 us first: a disk of its own; see below)
#   TRANSPORT=tls bench/replication.sh   (the pair replicates over TLS 1.3 with certificates made
#                                         for the run; tls-psk: with a pre-shared key; default
#                                         tcp). Compare with a TRANSPORT=tcp run: the standalone
#                                         anchor and the plain TCP copies do not change.
#                                         kTLS: add VOLUME_EXTRA="tls-kernel yes" (and the
#                                         kernel's tls module).
#
# Workloads: 4 KiB random writes at QD32 and QD1, 1 MiB sequential writes at QD8, and commits:
# 4 KiB random writes each followed by a FLUSH (fio --fsync=1) from 1 and from 16 jobs at QD1.
# Configurations, in a different order each round: standalone (hakd --export, no peer: the anchor),
# a replicated pair in async, memsync and sync mode (blank metadata, so no initial sync; alpha
# promoted; fio against alpha's NBD socket), and qemu: QEMU's write-blocking mirror as
# bench/pgbench.sh runs it (qemu-storage-daemon on CPU 0 exporting alpha.img and mirroring it to
# qemu-nbd on beta.img on CPU 1; bench/lib.sh says what its FLUSH does and does not promise).
# Each number is the median of RUNS runs of RUNTIME seconds. Output:
#   RESULT <workload> mode=<mode> iops=<x> standalone=<y> ratio=<x/y>
#   RESULT flush_latency_us mode=<mode> flush=<x> standalone=<y> added=<x-y>
#                                        (fsync4k_j1: the mean latency of the FLUSH after each
#                                         4 KiB write, fio's "sync" latency: a commit's flush)
#   RESULT qd1_latency_us standalone=<a> sync=<b> added=<b-a>   (fio's mean total latency,
#                                                                submission + completion: how the
#                                                                two split moves with scheduling)
#   RESULT qd1_floor_us tcp_rtt=<r> sync_added=<b-a> beyond_floor=<b-a-r>
#                                        (r: median round trip of one 4 KiB frame and a 24-byte
#                                         ack over the same veth, same CPUs, the receiver writing
#                                         it into beta.img; tests/tools/hak-rtt, blocking sockets:
#                                         the floor under what sync adds at QD1)
#   RESULT commit_path workload=<fsync4k_jN> mode=<mode> run=<k> total_us=<t> local_us=<l>
#          peer_us=<p> peer_last_pct=<q> bar_writes_us=<w> bar_queue_us=<u> bar_fsync_us=<f>
#          bar_total_us=<b> barriers_per_fsync=<n>
#                                        (a replicated FLUSH, step by step, from hakd's own
#                                         histograms over the run: on alpha, the mean time from
#                                         a FLUSH's arrival until its local fdatasync finished, its
#                                         barrier was acknowledged, and the client was answered,
#                                         and how often the peer finished last; on beta, per
#                                         barrier, the wait for the writes before it, for a flush
#                                         to start, the fdatasync, and arrival to ack)
#   RESULT cpu_us_per_write mode=sync primary=<x> secondary=<y> (utime+stime per write, QD32 4K)
#   RESULT resync mbps=<x> tcp_mbps=<y> ratio=<x/y>             (MiB/s: full resync of SIZE from
#                                                                promote to beta UpToDate, versus
#                                                                a plain TCP copy of SIZE)
#   RESULT resync_durable mbps=<x> tcp_durable_mbps=<z> ratio=<x/z>
#                                                               (the same resync versus a TCP copy
#                                                                whose receiver also writes the
#                                                                data to beta.img with O_DIRECT and
#                                                                flushes as it goes, as a resync
#                                                                target must: the disk's share)
#   RESULT resync_cpu_s_per_gib source=<x> target=<y>           (utime+stime of each hakd over
#                                                                that resync, per GiB)
# Not part of `make check`: the numbers are for reading, never a pass/fail. HAK_KEEP_WORK=1 keeps
# the scratch directory (hakd logs, fio output) for a look afterwards.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
RUNS=${RUNS:-3}
RUNTIME=${RUNTIME:-10}
SIZE=${SIZE:-1G}
HAK_BUILD=${HAK_BUILD:-build/rel}
IO_ENGINE=${HAK_IO_ENGINE:-auto}
HAKD=$REPO/$HAK_BUILD/hakd
HAKCTL=$REPO/$HAK_BUILD/hakctl
RTT=$REPO/$HAK_BUILD/tests/tools/hak-rtt
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
CLK_TCK=$(getconf CLK_TCK)

SID=$(printf '%06x' $(((($$ << 15) + RANDOM) & 0xffffff)))
NS_alpha=hakrb-a-$SID
NS_beta=hakrb-b-$SID
DIR=/var/tmp/hak-bench-repl.$SID
mkdir -p "$DIR"
declare -A PIDS=() # name -> pid of a process this script started

cleanup() {
	local rc=$?
	set +e
	trap - EXIT
	bench_teardown
	peer_disk_cleanup
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- the two "machines" ----------------------------------------------------------------------
bench_net rb rps
tls_setup

# PEER_DIR and PEER_FLUSH_US: beta's disk (bench/lib.sh, peer_disk_init).
peer_disk_init
# Prefill with random data (not one repeated buffer): the resync sends all-zero blocks as holes,
# which would make it look faster than it is.
for n in alpha beta; do
	truncate -s "$SIZE" "$DIR/$n.img"
	fio --name=prefill --filename="$DIR/$n.img" --rw=write --bs=1M --size="$SIZE" \
		--ioengine=psync --refill_buffers --end_fsync=1 --output=/dev/null
done

# net_packets: packets alpha's veth sent and received so far ("tx rx").
net_packets() {
	ip netns exec "$NS_alpha" cat "/sys/class/net/rba-$SID/statistics/tx_packets" \
		"/sys/class/net/rba-$SID/statistics/rx_packets" | paste -sd' '
}

# proc_cpu_ticks PID: utime + stime (fields 14 and 15; the command name may contain spaces).
proc_cpu_ticks() {
	local s
	s=$(cat "/proc/$1/stat")
	s=${s##*) }
	awk '{print $12 + $13}' <<<"$s"
}

# run_fio CONFIG NAME ARGS: writes $DIR/fio.json, prints "iops mean_latency_us".
run_fio() {
	local sock=$DIR/alpha.nbd out=$DIR/fio.json
	[[ $1 == standalone ]] && sock=$DIR/standalone.nbd
	[[ $1 == qemu ]] && sock=$DIR/qemu.nbd
	# shellcheck disable=SC2086
	taskset -c "$CPU_PRIMARY" fio --name=bench --ioengine=nbd \
		--uri="nbd+unix:///db?socket=$sock" $3 ${FIO_EXTRA:-} --size="$SIZE" --time_based \
		--runtime="$RUNTIME" --ramp_time=1 --group_reporting --randrepeat=0 \
		--output-format=json --output="$out" >/dev/null 2>"$DIR/fio.err" || {
		cat "$DIR/fio.err" >&2
		die "fio $2 failed against $1"
	}
	jq -r '.jobs[0] | "\(.read.iops + .write.iops | floor)" +
		" \((.write.lat_ns.mean / 100 | floor) / 10)" +
		" \(((.sync.lat_ns.mean // 0) / 100 | floor) / 10)"' "$out"
}

# name | fio arguments
WORKLOADS=(
	"randwrite4k_qd32|--rw=randwrite --bs=4k --iodepth=32"
	"randwrite4k_qd1|--rw=randwrite --bs=4k --iodepth=1"
	"seqwrite1m_qd8|--rw=write --bs=1M --iodepth=8"
	"fsync4k_j1|--rw=randwrite --bs=4k --iodepth=1 --fsync=1"
	"fsync4k_j16|--rw=randwrite --bs=4k --iodepth=1 --fsync=1 --numjobs=16"
)
for i in "${!WORKLOADS[@]}"; do
	[[ ${WORKLOADS[$i]%%|*} =~ ${ONLY:-.} ]] || unset "WORKLOADS[$i]"
done
WORKLOADS=("${WORKLOADS[@]}")
read -r -a CONFIGS <<<"${MODES:-standalone async memsync sync qemu}"
RESYNC=${RESYNC:-1}
declare -A IOPS=() LAT=() FLUSH=() # "config workload" -> space-separated per-run values
CPU_P=() CPU_S=() RS_MBPS=() TCP_MBPS=() TCPD_MBPS=() RS_CPU_P=() RS_CPU_S=() RTT_US=()

# drop_cache FILE...: write back and evict FILEs' page cache. A sequential prefill leaves large
# folios, and on kernels with ext4 large folios (6.16+) every 4 KiB buffered write into one walks
# all its buffer heads (~14 us per write for a 2 MiB folio here): a cost of the page cache's
# history, not of hakd, which would differ between configurations run one after another.
drop_cache() {
	"$PYTHON" -c 'import os, sys
for f in sys.argv[1:]:
    fd = os.open(f, os.O_RDWR)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)' "$@"
}

# fill_cache FILE...: evict FILEs' page cache, then rewrite each one sequentially in 4 KiB
# buffered writes and write it back, so that every configuration starts with every page cached,
# clean, in a 4 KiB folio. Starting from an empty cache, each first write to a page allocates it,
# which costs 1.5-4 us more on this VM than writing a cached page (fio, 4 KiB sequential: 160-256k
# IOPS against 409k), and far more when both CPUs allocate at once: with two daemons doing it, the
# copy into the page cache took ~8 us per 4 KiB write on each side, against 0.7 us for the
# standalone daemon alone. That is a cost of the emulation, not of replication.
fill_cache() {
	local f
	drop_cache "$@"
	for f in "$@"; do
		fio --name=fill --filename="$f" --rw=write --bs=4k --ioengine=psync --invalidate=0 \
			--refill_buffers --end_fsync=1 --output=/dev/null || die "filling $f's page cache failed"
	done
}

# warm_cache: the resync and the TCP copy both read alpha.img; whichever ran first used to read
# it from disk and the other from the page cache. Both now start with it cached and beta.img
# evicted, so the ratio compares the two ways of moving bytes, not the disk's mood. alpha.img is
# evicted first so that it is cached as a sequential read caches it (large folios), not in the
# 4 KiB folios fill_cache leaves: with those, the resync ran ~10% slower.
warm_cache() {
	drop_cache "$DIR/alpha.img" "$DIR/beta.img"
	cat "$DIR/alpha.img" >/dev/null
}

# commit_snap: alpha's FLUSH latencies and beta's barrier latencies now, one JSON line.
commit_snap() {
	jq -c -n --argjson a "$(hk alpha status --json)" --argjson b "$(hk beta status --json)" \
		'{flush: $a.volumes[0].latency.flush, bar: $b.volumes[0].replication.barrier_latency}'
}

# commit_path BEFORE AFTER: the mean of every step between two commit_snap samples, as key=value.
commit_path() {
	jq -r -n --argjson x "$1" --argjson y "$2" '
		def n(p): ($y | p.count) - ($x | p.count);
		def m(p): n(p) as $c | if $c > 0 then
			((($y | p.sum_us) - ($x | p.sum_us)) / $c * 10 | round / 10) else 0 end;
		(n(.flush.total)) as $f | (n(.bar.fsync)) as $s |
		"total_us=\(m(.flush.total)) local_us=\(m(.flush.local)) peer_us=\(m(.flush.peer))" +
		" peer_last_pct=\(if $f > 0 then (($y.flush.peer_last - $x.flush.peer_last) * 100 / $f | round) else 0 end)" +
		" bar_writes_us=\(m(.bar.writes)) bar_queue_us=\(m(.bar.queue))" +
		" bar_fsync_us=\(m(.bar.fsync)) bar_total_us=\(m(.bar.total))" +
		" barriers_per_fsync=\(if $s > 0 then (n(.bar.total) / $s * 100 | round / 100) else 0 end)"'
}

# cpu_busy BEFORE AFTER WHAT: how busy CPU 0 (fio and the primary) and CPU 1 (the secondary) were
# between two samples of their /proc/stat lines; a CPU near 100 % is the limit, not the I/O path.
cpu_busy() {
	awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN {
		split(a, x, " "); split(b, y, " ")
		for (c = 0; c < 2; c++) {
			o = c * 11; t = 0
			for (i = 2; i <= 11; i++) t += y[o + i] - x[o + i]
			if (t <= 0) continue
			idle = (y[o + 5] - x[o + 5]) + (y[o + 6] - x[o + 6])
			printf "bench: %s: cpu%d busy %.0f%% (user %.0f%%, system %.0f%%, softirq %.0f%%)\n",
				n, c, 100 * (t - idle) / t, 100 * (y[o + 2] - x[o + 2]) / t,
				100 * (y[o + 4] - x[o + 4]) / t, 100 * (y[o + 8] - x[o + 8]) / t
		}
	}' >&2
}

# flush_snap NODE PRIMARY_PID SECONDARY_PID: NODE's FLUSH requests and fdatasyncs, and both
# hakds' CPU ticks (the secondary's 0 when there is none).
flush_snap() {
	local s
	s=$(hk "$1" status --json | jq -r '.volumes[0] | "\(.requests.flush) \(.fdatasyncs // 0)"')
	echo "$s $(proc_cpu_ticks "$2") $( ((${3:-0})) && proc_cpu_ticks "$3" || echo 0)"
}

# flush_report WHAT BEFORE AFTER: CPU per commit on each node and, where the status counts them
# (.fdatasyncs), how many FLUSHes one of the primary's fdatasyncs answered: counts, which hold on
# a noisy machine where the IOPS do not.
flush_report() {
	awk -v w="$1" -v a="$2" -v b="$3" -v t="$CLK_TCK" 'BEGIN {
		split(a, x, " "); split(b, y, " ")
		n = y[1] - x[1]; f = y[2] - x[2]
		if (n <= 0) exit
		printf "bench: %s: %d commits, CPU per commit %.1f us primary, %.1f us secondary\n",
			w, n, (y[3] - x[3]) * 1e6 / t / n, (y[4] - x[4]) * 1e6 / t / n
		if (f > 0) printf "bench: %s: %.2f commits per primary fdatasync\n", w, n / f
	}' >&2
}

# run_config CONFIG: one run of every workload against CONFIG.
run_config() {
	local cfg=$1 w name args res t0p t0s w0 ap=0 bs=0 nw tx0 rx0 tx1 rx1 r_iops r_lat r_flush cp0='' c0 t
	local node=alpha fs0=
	fill_cache "$DIR/alpha.img" "$DIR/beta.img"
	if [[ $cfg == standalone ]]; then
		standalone_start
		ap=${PIDS[standalone]}
		node=standalone
	elif [[ $cfg == qemu ]]; then
		qemu_start
	else
		pair_start "$cfg" 1
		t=${TRANSPORT:-tcp}
		[[ $(repl alpha transport) == "${t%-psk}" ]] ||
			die "alpha replicates over $(repl alpha transport), not ${t%-psk}"
		hk alpha primary db >/dev/null || die "promoting alpha failed"
		ap=${PIDS[alpha]}
		bs=${PIDS[beta]}
	fi
	for w in "${WORKLOADS[@]}"; do
		name=${w%%|*}
		args=${w#*|}
		[[ $cfg == @(standalone|qemu) ]] || pair_quiesce
		if [[ $cfg == sync && $name == randwrite4k_qd32 ]]; then
			t0p=$(proc_cpu_ticks "$ap")
			t0s=$(proc_cpu_ticks "$bs")
			w0=$(hk alpha status --json | jq '.volumes[0].requests.write')
		fi
		[[ $cfg == standalone ]] || read -r tx0 rx0 < <(net_packets)
		[[ $cfg == @(standalone|qemu) || $name != fsync4k_* ]] || cp0=$(commit_snap)
		[[ $cfg == qemu || $name != fsync4k_* ]] || fs0=$(flush_snap "$node" "$ap" "$bs")
		c0=$(grep -E '^cpu[01] ' /proc/stat | paste -sd' ')
		res=$(run_fio "$cfg" "$name" "$args")
		cpu_busy "$c0" "$(grep -E '^cpu[01] ' /proc/stat | paste -sd' ')" "$name $cfg"
		read -r r_iops r_lat r_flush <<<"$res"
		IOPS["$cfg $name"]+="$r_iops "
		LAT["$cfg $name"]+="$r_lat "
		FLUSH["$cfg $name"]+="$r_flush "
		if [[ $cfg == sync && $name == randwrite4k_qd32 ]]; then
			nw=$(($(hk alpha status --json | jq '.volumes[0].requests.write') - w0))
			CPU_P+=("$(awk -v a="$t0p" -v b="$(proc_cpu_ticks "$ap")" -v n="$nw" -v t="$CLK_TCK" \
				'BEGIN {printf "%.2f", (b - a) * 1e6 / t / n}')")
			CPU_S+=("$(awk -v a="$t0s" -v b="$(proc_cpu_ticks "$bs")" -v n="$nw" -v t="$CLK_TCK" \
				'BEGIN {printf "%.2f", (b - a) * 1e6 / t / n}')")
		fi
		echo "bench: $name $cfg: $r_iops IOPS, mean latency $r_lat us, flush $r_flush us" >&2
		if [[ -n $fs0 ]]; then
			flush_report "$name $cfg" "$fs0" "$(flush_snap "$node" "$ap" "$bs")"
			fs0=
		fi
		if [[ -n $cp0 ]]; then
			echo "RESULT commit_path workload=$name mode=$cfg run=$((r + 1)) $(commit_path "$cp0" "$(commit_snap)")"
			cp0=
		fi
		if [[ $cfg != standalone ]]; then
			# Packets per write on the replication link: each one costs the primary's CPU.
			read -r tx1 rx1 < <(net_packets)
			echo "bench: $name $cfg: alpha sent $((tx1 - tx0)) and received $((rx1 - rx0))" \
				"packets (fio ramp included)" >&2
		fi
	done
	if [[ $cfg == standalone ]]; then
		stop_proc standalone
		((STOP_RC == 0)) || echo "bench: standalone hakd exited with status $STOP_RC" >&2
	elif [[ $cfg == qemu ]]; then
		qemu_stop
	else
		pair_stop
	fi
}

# run_resync: full resync of SIZE (fresh, non-blank metadata on both; alpha promoted with
# --force). MiB/s from the promotion to beta UpToDate, as full_resync_seconds (lib.sh) times it;
# appended to RS_MBPS. The CPU seconds each hakd spent per GiB go to RS_CPU_P and RS_CPU_S: a
# steadier measure of what a change costs than the rate on this shared machine.
run_resync() {
	local rsb t0p t0s
	warm_cache
	pair_start sync ""
	t0p=$(proc_cpu_ticks "${PIDS[alpha]}")
	t0s=$(proc_cpu_ticks "${PIDS[beta]}")
	full_resync_seconds
	RS_CPU_P+=("$(awk -v a="$t0p" -v b="$(proc_cpu_ticks "${PIDS[alpha]}")" -v s="$SIZE_BYTES" \
		-v t="$CLK_TCK" 'BEGIN {printf "%.2f", (b - a) / t / (s / 1073741824)}')")
	RS_CPU_S+=("$(awk -v a="$t0s" -v b="$(proc_cpu_ticks "${PIDS[beta]}")" -v s="$SIZE_BYTES" \
		-v t="$CLK_TCK" 'BEGIN {printf "%.2f", (b - a) / t / (s / 1073741824)}')")
	rsb=$(repl alpha bytes_resynced)
	((rsb >= SIZE_BYTES)) ||
		echo "bench: alpha reports $rsb bytes resynced, not the whole $SIZE_BYTES" >&2
	pair_stop
	RS_MBPS+=("$(awk -v t="$RS_SECONDS" -v s="$SIZE_BYTES" 'BEGIN {printf "%.1f", s / 1048576 / t}')")
}

cat >"$DIR/tcpcopy.py" <<'EOF'
# tcpcopy.py recv PORT [FILE] | send FILE HOST PORT: a plain TCP copy of FILE, 1 MiB at a time;
# the sender prints MiB/s from connect until the receiver has read everything and closed. With
# FILE the receiver also makes what it gets durable there, as a resync target must: O_DIRECT
# writes from four threads (up to 16 MiB received ahead) while another flushes what they wrote,
# and every byte is covered by a flush before it confirms.
import mmap, os, queue, socket, sys, threading, time
CHUNK = 1 << 20

def durable(c, path):
    fd = os.open(path, os.O_WRONLY | os.O_DIRECT)
    full, free = queue.Queue(), queue.Queue()
    for _ in range(16):
        free.put(mmap.mmap(-1, CHUNK))  # page-aligned, as O_DIRECT wants
    # Group commit, as hakd's target does: one flush at a time, each covering every write
    # finished before it started, and none while nothing new was written.
    cv, state = threading.Condition(), {"written": 0, "done": False}
    def writer():
        for b, n, off in iter(full.get, None):
            os.pwritev(fd, [memoryview(b)[:n]], off)
            free.put(b)
            with cv:
                state["written"] += n
                cv.notify()
    def flusher():
        flushed = 0
        while True:
            with cv:
                while state["written"] == flushed and not state["done"]:
                    cv.wait()
                if state["written"] == flushed:
                    return
                target = state["written"]
            os.fdatasync(fd)
            flushed = target
    def fatal(fn):
        # A failed write or flush ends the process, so the sender sees no confirmation instead
        # of blocking on a receiver that stopped reading.
        def run():
            try:
                fn()
            except OSError as e:
                print("tcpcopy: %s" % e, file=sys.stderr, flush=True)
                os._exit(1)
        return run
    writers = [threading.Thread(target=fatal(writer)) for _ in range(4)]
    tf = threading.Thread(target=fatal(flusher))
    for t in writers + [tf]:
        t.start()
    off = 0
    while True:
        b, n = free.get(), 0
        while n < CHUNK:
            k = c.recv_into(memoryview(b)[n:])
            if not k:
                break
            n += k
        if n:
            full.put((b, n, off))
            off += n
        if n < CHUNK:
            break
    for _ in writers:
        full.put(None)
    for t in writers:
        t.join()
    with cv:
        state["done"] = True
        cv.notify()
    tf.join()  # it returns once a flush covered every write

if sys.argv[1] == "recv":
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("0.0.0.0", int(sys.argv[2])))
    ls.listen(1)
    c, _ = ls.accept()
    if len(sys.argv) > 3:
        durable(c, sys.argv[3])
    else:
        buf = bytearray(CHUNK)
        while c.recv_into(buf):
            pass
    c.sendall(b"K")  # all received (and durable, with FILE)
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
    if s.recv(1) != b"K":
        sys.exit("tcpcopy: the receiver closed without confirming the copy")
    print("%.1f" % (total / 1048576 / (time.time() - t0)))
EOF

# run_rtt: the QD1 floor (see the header); appended to RTT_US.
run_rtt() {
	local v
	ip netns exec "$NS_beta" taskset -c "$CPU_SECONDARY" "$RTT" serve 9998 "$DIR/beta.img" \
		</dev/null >>"$DIR/rtt.log" 2>&1 &
	PIDS[rttserve]=$!
	v=$(ip netns exec "$NS_alpha" taskset -c "$CPU_PRIMARY" "$RTT" ping 192.0.2.2 9998 4096 \
		20000 2>>"$DIR/rtt.log") || die "the hak-rtt round trips failed (see $DIR/rtt.log)"
	stop_proc rttserve
	v=${v#*median=}
	RTT_US+=("${v%% *}")
}

# run_tcp [durable]: the same amount of data over the same veth, pinned the same way; appended
# to TCP_MBPS. With "durable", the receiver writes it into beta.img and flushes as it goes (see
# tcpcopy.py); appended to TCPD_MBPS: what moving the bytes AND making them durable on the
# target costs on this machine, the ceiling a resync cannot beat.
run_tcp() {
	local v file=()
	[[ ${1:-} == durable ]] && file=("$DIR/beta.img")
	warm_cache
	ip netns exec "$NS_beta" taskset -c "$CPU_SECONDARY" "$PYTHON" "$DIR/tcpcopy.py" recv 9999 \
		"${file[@]}" </dev/null >>"$DIR/tcp.log" 2>&1 &
	PIDS[tcprecv]=$!
	v=$(ip netns exec "$NS_alpha" taskset -c "$CPU_PRIMARY" "$PYTHON" "$DIR/tcpcopy.py" send \
		"$DIR/alpha.img" 192.0.2.2 9999 2>>"$DIR/tcp.log") || die "the TCP copy failed"
	stop_proc tcprecv
	if ((${#file[@]})); then
		TCPD_MBPS+=("$v")
	else
		TCP_MBPS+=("$v")
	fi
}

if [[ -n ${BUSY_PEER:-} && ${BUSY_PEER:-} != 0 ]]; then
	# The standby's CPU is busy with something else (a backup, a verify, a neighbour): a plain
	# CPU hog of normal priority, pinned there for the whole run.
	taskset -c "$CPU_SECONDARY" sh -c 'while :; do :; done' </dev/null >/dev/null 2>&1 &
	PIDS[busy]=$!
	echo "bench: BUSY_PEER: a busy loop (pid ${PIDS[busy]}) holds CPU $CPU_SECONDARY" >&2
fi
echo "bench: $RUNS rounds of ${RUNTIME}s per configuration and workload, $SIZE files on $DIR," \
	"hakd engine $IO_ENGINE, transport ${TRANSPORT:-tcp}, namespaces $NS_alpha $NS_beta" >&2
# Both CPUs are in use: anything else running skews the numbers, so say how busy the machine was.
echo "bench: load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for ((r = 0; r < RUNS; r++)); do
	# Rotate the order so that no configuration always runs first or last in a round.
	for ((i = 0; i < ${#CONFIGS[@]}; i++)); do
		run_config "${CONFIGS[$(((i + r) % ${#CONFIGS[@]}))]}"
	done
	[[ " ${WORKLOADS[*]%%|*} " == *" randwrite4k_qd1 "* ]] && run_rtt
	((RESYNC)) || continue
	# The three transfers in a rotating order too: the machine's phase moves all of them.
	for ((i = 0; i < 3; i++)); do
		case $(((i + r) % 3)) in
		0) run_resync ;;
		1) run_tcp ;;
		2) run_tcp durable ;;
		esac
	done
	echo "bench: round $((r + 1)): resync ${RS_MBPS[-1]} MiB/s (CPU s/GiB: source" \
		"${RS_CPU_P[-1]}, target ${RS_CPU_S[-1]}), TCP copy ${TCP_MBPS[-1]} MiB/s, durable" \
		"TCP copy ${TCPD_MBPS[-1]} MiB/s; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done

echo "bench: load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
# An overflowing async buffer turns replication into bitmap tracking plus resync: worth knowing
# when reading the async numbers.
n=$(grep -c 'async send buffer is full' "$DIR/alpha.log" || true)
((n == 0)) || echo "bench: the async send buffer overflowed $n times (see alpha.log)" >&2
for w in "${WORKLOADS[@]}"; do
	name=${w%%|*}
	# Without a standalone run (MODES="sync", say) there is nothing to compare against.
	[[ -n ${IOPS["standalone $name"]:-} ]] || continue
	# shellcheck disable=SC2086
	sa=$(median %d ${IOPS["standalone $name"]})
	for m in async memsync sync qemu; do
		[[ -n ${IOPS["$m $name"]:-} ]] || continue
		# shellcheck disable=SC2086
		v=$(median %d ${IOPS["$m $name"]})
		echo "RESULT $name mode=$m iops=$v standalone=$sa" \
			"ratio=$(awk -v a="$v" -v b="$sa" 'BEGIN {printf "%.2f", (b > 0) ? a / b : 0}')"
	done
done
if [[ -n ${FLUSH["standalone fsync4k_j1"]:-} ]]; then
	# shellcheck disable=SC2086
	a=$(median %.1f ${FLUSH["standalone fsync4k_j1"]})
	for m in async memsync sync qemu; do
		[[ -n ${FLUSH["$m fsync4k_j1"]:-} ]] || continue
		# shellcheck disable=SC2086
		b=$(median %.1f ${FLUSH["$m fsync4k_j1"]})
		echo "RESULT flush_latency_us mode=$m flush=$b standalone=$a" \
			"added=$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.1f", b - a}')"
	done
fi
if [[ -n ${LAT["standalone randwrite4k_qd1"]:-} && -n ${LAT["sync randwrite4k_qd1"]:-} ]]; then
	# shellcheck disable=SC2086
	a=$(median %.1f ${LAT["standalone randwrite4k_qd1"]})
	# shellcheck disable=SC2086
	b=$(median %.1f ${LAT["sync randwrite4k_qd1"]})
	d=$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.1f", b - a}')
	echo "RESULT qd1_latency_us standalone=$a sync=$b added=$d"
	c=$(median %.1f "${RTT_US[@]}")
	echo "RESULT qd1_floor_us tcp_rtt=$c sync_added=$d" \
		"beyond_floor=$(awk -v d="$d" -v c="$c" 'BEGIN {printf "%.1f", d - c}')"
fi
if ((${#CPU_P[@]})); then
	echo "RESULT cpu_us_per_write mode=sync primary=$(median %.2f "${CPU_P[@]}")" \
		"secondary=$(median %.2f "${CPU_S[@]}")"
fi
((RESYNC)) || exit 0
x=$(median %.1f "${RS_MBPS[@]}")
y=$(median %.1f "${TCP_MBPS[@]}")
echo "RESULT resync mbps=$x tcp_mbps=$y ratio=$(awk -v a="$x" -v b="$y" 'BEGIN {printf "%.2f", (b > 0) ? a / b : 0}')"
z=$(median %.1f "${TCPD_MBPS[@]}")
echo "RESULT resync_durable mbps=$x tcp_durable_mbps=$z ratio=$(awk -v a="$x" -v b="$z" 'BEGIN {printf "%.2f", (b > 0) ? a / b : 0}')"
echo "RESULT resync_cpu_s_per_gib source=$(median %.2f "${RS_CPU_P[@]}") target=$(median %.2f "${RS_CPU_S[@]}")"
