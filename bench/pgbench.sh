#!/usr/bin/env bash
# PostgreSQL benchmark: what replication costs a database, against the same database on an
# unreplicated volume and on QEMU's write-blocking mirror. The volume is attached as `make demo`
# attaches it (nbdfuse on its NBD socket, a loop device on nbdfuse's file), with ext4 on it and
# PostgreSQL (Debian's) on that, fsync=on, synchronous_commit=on, shared_buffers=128MB. Two
# machines are emulated by two network namespaces joined by a veth pair (192.0.2.1 <-> 192.0.2.2,
# receive packet steering as in bench/replication.sh). The primary's whole stack (its hakd or
# qemu-storage-daemon, nbdfuse, PostgreSQL and pgbench) is pinned to CPU 0, the secondary's hakd
# (or qemu-nbd) to CPU 1. The loop device's I/O runs in the kernel's unbound "loopN" workqueue,
# which cannot be pinned per device: its workers may run on either CPU, in every configuration
# alike (the standalone's cpu1_us shows how much lands on CPU 1 without any peer).
#
#   bench/pgbench.sh    (CLIENTS="16 32 48 64 80" T=30 ROUNDS=3 SCALE=10 SIZE=4G HAK_BUILD=build/rel)
#   CLIENTS=16 T=10 ROUNDS=1 bench/pgbench.sh     (a quick look)
#   CONFIGS="standalone sync" bench/pgbench.sh    (a subset)
#   BUSY_PEER=1 bench/pgbench.sh   (a busy loop pinned to CPU 1 for the whole run: the secondary
#                                   shares its CPU with a CPU hog)
#   PEER_DIR=/dev/shm PEER_FLUSH_US=800 bench/pgbench.sh   (beta's file, hakd's or qemu-nbd's,
#                                   on tmpfs, and each fdatasync of beta's hakd 800 us longer: a
#                                   disk of its own; bench/lib.sh, peer_disk_init, says why)
#   TRANSPORT=tls bench/pgbench.sh (the hakd pairs replicate over TLS 1.3, certificates made for
#                                   the run; tls-psk: a pre-shared key; compare with a tcp run)
#   SMOKE=1 bench/pgbench.sh       (CLIENTS=16 T=3 ROUNDS=1 SCALE=1 SIZE=1G, every configuration:
#                                   tests/integration/t_bench_pgbench.sh runs it)
#
# Configurations, in a rotating order each round: standalone (hakd --export of alpha's file: the
# anchor), async, memsync and sync (a hakd pair, blank metadata on identical zero-filled sparse
# files so there is no initial sync, alpha promoted), and qemu: qemu-storage-daemon on alpha
# exports alpha's file over NBD on a UNIX socket (nbdfuse attaches it as it attaches hakd's) with
# a blockdev-mirror job (sync full, copy-mode write-blocking) to an nbd node connected over TCP to
# qemu-nbd serving beta's file in beta's namespace; measured once the job is ready.
# Per configuration and round, everything is made anew once (fresh sparse files, daemons, mkfs,
# initdb, `pgbench -i -s SCALE`, timed: the init number), then the same database serves one
# `pgbench -n -M prepared -c N -j 4 -T T` per client count, in CLIENTS's order, each after a
# CHECKPOINT (and, for a hakd pair, once alpha has nothing in flight or out of sync). Each number
# is the median of ROUNDS rounds. Output:
#   RESULT pgbench clients=<N> config=<c> tps=<x> ratio=<x/standalone's x at N> cpu0_us=<a> cpu1_us=<b>
#            (a, b: busy time of CPU 0 and CPU 1 over the pgbench run, from /proc/stat, per
#             transaction, in us; with BUSY_PEER=1 the busy loop's own CPU time is left out of b)
#   RESULT pgbench_init config=<c> seconds=<s> ratio=<standalone's s / s>   (higher is better)
# and a Markdown table and an SVG chart of TPS against clients (one line per configuration) in
# OUT_DIR (default bench/out, git-ignored): pgbench.md and pgbench.svg, pgbench-busy.* with
# BUSY_PEER=1. Not part of `make check` (the smoke run is): the numbers are for reading, never a
# pass/fail. HAK_KEEP_WORK=1 keeps the scratch directory (logs) for a look afterwards.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
# shellcheck source=bench/lib.sh
. "$REPO/bench/lib.sh"
if [[ -n ${SMOKE:-} && ${SMOKE:-0} != 0 ]]; then
	CLIENTS=${CLIENTS:-16}
	T=${T:-3}
	ROUNDS=${ROUNDS:-1}
	SCALE=${SCALE:-1}
	SIZE=${SIZE:-1G}
fi
CLIENTS=${CLIENTS:-16 32 48 64 80}
T=${T:-30}
ROUNDS=${ROUNDS:-3}
SCALE=${SCALE:-10}
SIZE=${SIZE:-4G}
BUSY_PEER=${BUSY_PEER:-0}
OUT_DIR=${OUT_DIR:-$REPO/bench/out}
HAK_BUILD=${HAK_BUILD:-build/rel}
case $HAK_BUILD in
/*) ;;
*) HAK_BUILD=$REPO/$HAK_BUILD ;;
esac
IO_ENGINE=${HAK_IO_ENGINE:-auto}
HAKD=$HAK_BUILD/hakd
HAKCTL=$HAK_BUILD/hakctl
PYTHON=/usr/bin/python3
# shellcheck disable=SC2012 # the newest installed major version
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
CPU_PRIMARY=0
CPU_SECONDARY=1
QNBD_PORT=10809
read -r -a CONFIGS <<<"${CONFIGS:-standalone async memsync sync qemu}"
read -r -a NCLIENTS <<<"$CLIENTS"

if ((EUID != 0)); then
	echo "bench: network namespaces, loop devices and mounts need root" >&2
	exit 1
fi
for c in jq ip ss taskset runuser nbdfuse fusermount3 losetup mkfs.ext4 mountpoint pgbench psql \
	qemu-storage-daemon qemu-nbd gnuplot "$PYTHON"; do
	command -v "$c" >/dev/null || {
		echo "bench: $c is missing; run scripts/deps.sh" >&2
		exit 1
	}
done
[[ -x $PGBIN/pg_ctl && -x $PGBIN/initdb ]] || {
	echo "bench: the PostgreSQL server is missing; run scripts/deps.sh" >&2
	exit 1
}
if [[ ! -x $HAKD || ! -x $HAKCTL ]]; then
	echo "bench: building $HAK_BUILD" >&2
	make -s BUILD="${HAK_BUILD#"$REPO"/}" bins >&2
fi
CLK_TCK=$(getconf CLK_TCK)
ulimit -c 0 # no core file from nbdfuse in the current directory

SID=$(printf '%06x' $(((($$ << 15) + RANDOM) & 0xffffff)))
NS_alpha=hakpg-a-$SID
NS_beta=hakpg-b-$SID
DIR=/var/tmp/hak-bench-pg.$SID
PGPORT=$((20000 + RANDOM % 20000))
mkdir -p "$DIR" "$DIR/fuse" "$DIR/mnt"
chmod 755 "$DIR" # PostgreSQL (user postgres) writes its log and socket here
declare -A PIDS=() # name -> pid of a process this script started
LOOPDEV=""
PG_PID=""

# pg_stop: PostgreSQL down (fast shutdown; its postmaster killed if that does not work).
pg_stop() {
	[[ -n $PG_PID ]] || return 0
	timeout 90 runuser -u postgres -- "$PGBIN/pg_ctl" -D "$DIR/mnt/data" -w -t 60 stop -m fast \
		>>"$DIR/pg_ctl.log" 2>&1 || true
	if alive "$PG_PID"; then
		echo "bench: PostgreSQL (pid $PG_PID) did not stop; killing it" >&2
		kill -KILL "$PG_PID" 2>/dev/null || true
		wait_until "! alive $PG_PID" 10 || true
	fi
	PG_PID=""
}

# detach: the filesystem unmounted, the loop device detached, the FUSE file unmounted and
# nbdfuse gone; bounded, and harmless for whatever part was never set up.
detach() {
	local i
	if mountpoint -q "$DIR/mnt"; then
		timeout 60 umount "$DIR/mnt" || umount -l "$DIR/mnt" || true
	fi
	if [[ -n $LOOPDEV ]]; then
		timeout 30 losetup -d "$LOOPDEV" || echo "bench: losetup -d $LOOPDEV failed" >&2
		LOOPDEV=""
	fi
	# The loop device lets go of the FUSE file a moment after losetup -d returns.
	for ((i = 0; i < 50; i++)); do
		mountpoint -q "$DIR/fuse" || break
		fusermount3 -u "$DIR/fuse" 2>/dev/null && break
		sleep 0.1
	done
	mountpoint -q "$DIR/fuse" && { fusermount3 -u -z "$DIR/fuse" 2>/dev/null || true; }
	stop_proc nbdfuse
}

cleanup() {
	local rc=$?
	set +e
	trap - EXIT
	pg_stop
	detach
	bench_teardown
	peer_disk_cleanup
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- the two "machines" ----------------------------------------------------------------------
bench_net pg rps
tls_setup
peer_disk_init

# ---- the stack above the volume --------------------------------------------------------------
# attach SOCKET: nbdfuse on the volume's NBD socket (as the group's attach resource does), a loop
# device on its file; sets LOOPDEV.
attach() {
	rm -f "$DIR/nbdfuse.pid"
	taskset -c "$CPU_PRIMARY" nbdfuse -P "$DIR/nbdfuse.pid" "$DIR/fuse/disk" \
		"nbd+unix:///db?socket=$1" </dev/null >>"$DIR/nbdfuse.log" 2>&1 &
	PIDS[nbdfuse]=$!
	wait_until "[[ -s $DIR/nbdfuse.pid ]]" 20 || die "nbdfuse did not serve $1 within 20 s"
	LOOPDEV=$(losetup -f --show "$DIR/fuse/disk") || die "losetup on nbdfuse's file failed"
}

# pg_start: a fresh database cluster on the mounted volume, started pinned to CPU 0.
pg_start() {
	install -d -o postgres "$DIR/mnt/data" "$DIR/pgsock"
	install -m 644 -o postgres /dev/null "$DIR/pg.log"
	timeout 300 runuser -u postgres -- "$PGBIN/initdb" -A trust -U postgres -D "$DIR/mnt/data" \
		>>"$DIR/initdb.log" 2>&1 || die "initdb failed"
	cat >>"$DIR/mnt/data/postgresql.conf" <<EOF
port = $PGPORT
listen_addresses = ''
unix_socket_directories = '$DIR/pgsock'
fsync = on
synchronous_commit = on
shared_buffers = 128MB
max_connections = 100
max_wal_size = 1GB
EOF
	taskset -c "$CPU_PRIMARY" timeout 120 runuser -u postgres -- "$PGBIN/pg_ctl" \
		-D "$DIR/mnt/data" -w -t 60 -l "$DIR/pg.log" start >>"$DIR/pg_ctl.log" 2>&1 ||
		die "PostgreSQL did not start"
	PG_PID=$(head -n 1 "$DIR/mnt/data/postmaster.pid")
}

psql_c() {
	timeout 300 psql -h "$DIR/pgsock" -p "$PGPORT" -U postgres -d postgres -Atq -v ON_ERROR_STOP=1 \
		-c "$1"
}

# cpu_busy: busy ticks (everything but idle and iowait) of CPU 0 and CPU 1: "c0 c1".
cpu_busy() {
	awk '$1 == "cpu0" || $1 == "cpu1" {b[$1] = $2 + $3 + $4 + $7 + $8 + $9}
		END {print b["cpu0"], b["cpu1"]}' /proc/stat
}

# proc_cpu_ticks PID: utime + stime (0 without PID).
proc_cpu_ticks() {
	local s
	[[ -n $1 ]] || {
		echo 0
		return
	}
	s=$(cat "/proc/$1/stat")
	s=${s##*) }
	awk '{print $12 + $13}' <<<"$s"
}

declare -A TPS=() CPU0=() CPU1=() INIT=() # "config clients" or config -> per-round values

# run_pgbench CONFIG N: one timed run with N clients; appends to TPS, CPU0 and CPU1.
run_pgbench() {
	local cfg=$1 n=$2 c0 c1 b0 c0b c1b b1 tps tx us0 us1
	[[ $cfg == @(async|memsync|sync) ]] && pair_quiesce
	psql_c CHECKPOINT || die "CHECKPOINT failed"
	read -r c0 c1 < <(cpu_busy)
	b0=$(proc_cpu_ticks "${PIDS[busy]:-}")
	timeout $((T * 3 + 120)) taskset -c "$CPU_PRIMARY" pgbench -n -M prepared -c "$n" -j 4 \
		-T "$T" -h "$DIR/pgsock" -p "$PGPORT" -U postgres postgres \
		>"$DIR/pgbench.out" 2>>"$DIR/pgbench.log" || {
		cat "$DIR/pgbench.out" >>"$DIR/pgbench.log"
		die "pgbench -c $n failed against $cfg"
	}
	read -r c0b c1b < <(cpu_busy)
	b1=$(proc_cpu_ticks "${PIDS[busy]:-}")
	tps=$(awk '/^tps = / {printf "%.1f", $3; exit}' "$DIR/pgbench.out")
	tx=$(awk -F': *' '/^number of transactions actually processed/ {print $2 + 0; exit}' \
		"$DIR/pgbench.out")
	if [[ -z $tps || -z $tx ]] || ((tx == 0)); then
		cat "$DIR/pgbench.out" >>"$DIR/pgbench.log"
		die "pgbench -c $n against $cfg processed no transaction"
	fi
	us0=$(awk -v a="$c0" -v b="$c0b" -v n="$tx" -v t="$CLK_TCK" 'BEGIN {printf "%.1f", (b - a) * 1e6 / t / n}')
	us1=$(awk -v a="$c1" -v b="$c1b" -v x="$((b1 - b0))" -v n="$tx" -v t="$CLK_TCK" \
		'BEGIN {v = b - a - x; if (v < 0) v = 0; printf "%.1f", v * 1e6 / t / n}')
	TPS["$cfg $n"]+="$tps "
	CPU0["$cfg $n"]+="$us0 "
	CPU1["$cfg $n"]+="$us1 "
	echo "bench: $cfg -c $n: $tps TPS, $tx transactions, CPU us per transaction: CPU 0 $us0," \
		"CPU 1 $us1" >&2
}

# run_config CONFIG: one round of CONFIG: set up, init timed, a run per client count, torn down.
run_config() {
	local cfg=$1 sock n t0 t1 secs
	for n in alpha beta; do # a fresh sparse file (through PEER_DIR's symlink for beta)
		truncate -s 0 "$DIR/$n.img"
		truncate -s "$SIZE" "$DIR/$n.img"
	done
	case $cfg in
	standalone)
		standalone_start
		sock=$DIR/standalone.nbd
		;;
	async | memsync | sync)
		pair_start "$cfg" 1
		hk alpha primary db >/dev/null || die "promoting alpha failed"
		sock=$DIR/alpha.nbd
		;;
	qemu)
		qemu_start
		sock=$DIR/qemu.nbd
		;;
	*) die "unknown configuration $cfg" ;;
	esac
	attach "$sock"
	# Everything initialised now (no lazy init writing behind the benchmark's back); no discard
	# of a device that is all holes anyway.
	timeout 600 mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0,nodiscard "$LOOPDEV" \
		>>"$DIR/mkfs.log" 2>&1 || die "mkfs.ext4 on $LOOPDEV ($cfg) failed"
	mount -t ext4 "$LOOPDEV" "$DIR/mnt" || die "mounting $LOOPDEV ($cfg) failed"
	pg_start
	t0=$EPOCHREALTIME
	timeout 1800 taskset -c "$CPU_PRIMARY" pgbench -i -q -s "$SCALE" -h "$DIR/pgsock" -p "$PGPORT" \
		-U postgres postgres >>"$DIR/pgbench-init.log" 2>&1 || die "pgbench -i failed against $cfg"
	t1=$EPOCHREALTIME
	secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.2f", b - a}')
	INIT[$cfg]+="$secs "
	echo "bench: $cfg: pgbench -i -s $SCALE took $secs s" >&2
	for n in "${NCLIENTS[@]}"; do
		run_pgbench "$cfg" "$n"
	done
	pg_stop
	detach
	case $cfg in
	standalone) stop_proc standalone ;;
	qemu) qemu_stop ;;
	*)
		for n in alpha beta; do
			stop_proc "$n"
			((STOP_RC == 0)) || echo "bench: hakd on $n exited with status $STOP_RC" >&2
		done
		;;
	esac
}

ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", (b > 0) ? a / b : 0}'
}

if ((BUSY_PEER)); then
	taskset -c "$CPU_SECONDARY" sh -c 'while :; do :; done' </dev/null >/dev/null 2>&1 &
	PIDS[busy]=$!
fi
echo "bench: $ROUNDS rounds of ${CONFIGS[*]}; clients $CLIENTS, ${T}s each, scale $SCALE," \
	"$SIZE files on $DIR, hakd $HAKD (engine $IO_ENGINE), busy peer $BUSY_PEER," \
	"namespaces $NS_alpha $NS_beta" >&2
echo "bench: load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for ((r = 0; r < ROUNDS; r++)); do
	for ((i = 0; i < ${#CONFIGS[@]}; i++)); do
		run_config "${CONFIGS[$(((i + r) % ${#CONFIGS[@]}))]}"
	done
	echo "bench: round $((r + 1)) done; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done
stop_proc busy
echo "bench: load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
if [[ -f $DIR/alpha.log ]]; then
	n=$(grep -c 'async send buffer is full' "$DIR/alpha.log" || true)
	((n == 0)) || echo "bench: the async send buffer overflowed $n times (see alpha.log)" >&2
fi

# ---- results ---------------------------------------------------------------------------------
mkdir -p "$OUT_DIR"
name=pgbench
((BUSY_PEER)) && name=pgbench-busy
MD=$OUT_DIR/$name.md
DAT=$DIR/$name.dat
{
	echo "# pgbench on hak: TPS (ratio to standalone) and CPU us per transaction (CPU 0 / CPU 1)"
	echo
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), scale $SCALE, ${T}s per run, median of" \
		"$ROUNDS rounds, busy peer $BUSY_PEER, $(basename "$HAK_BUILD") hakd"
	echo
	printf '| clients |'
	printf ' %s |' "${CONFIGS[@]}"
	echo
	printf '| ---: |'
	printf ' ---: |%.0s' "${CONFIGS[@]}"
	echo
} >"$MD"
printf 'clients' >"$DAT"
printf ' %s' "${CONFIGS[@]}" >>"$DAT"
echo >>"$DAT"
for n in "${NCLIENTS[@]}"; do
	sa=""
	# shellcheck disable=SC2086
	[[ -n ${TPS["standalone $n"]:-} ]] && sa=$(median %.1f ${TPS["standalone $n"]})
	row="| $n |"
	printf '%s' "$n" >>"$DAT"
	for c in "${CONFIGS[@]}"; do
		# shellcheck disable=SC2086
		v=$(median %.1f ${TPS["$c $n"]})
		# shellcheck disable=SC2086
		a=$(median %.1f ${CPU0["$c $n"]})
		# shellcheck disable=SC2086
		b=$(median %.1f ${CPU1["$c $n"]})
		rt=$(ratio "$v" "${sa:-0}")
		echo "RESULT pgbench clients=$n config=$c tps=$v ratio=$rt cpu0_us=$a cpu1_us=$b"
		row+=" $v ($rt) $a / $b |"
		printf ' %s' "$v" >>"$DAT"
	done
	echo "$row" >>"$MD"
	echo >>"$DAT"
done
sa=""
# shellcheck disable=SC2086
[[ -n ${INIT[standalone]:-} ]] && sa=$(median %.2f ${INIT[standalone]})
row="| init (s) |"
for c in "${CONFIGS[@]}"; do
	# shellcheck disable=SC2086
	v=$(median %.2f ${INIT[$c]})
	rt=$(ratio "${sa:-0}" "$v")
	echo "RESULT pgbench_init config=$c seconds=$v ratio=$rt"
	row+=" $v ($rt) |"
done
{
	echo "$row"
	echo
	echo "init: \`pgbench -i -s $SCALE\` seconds (ratio: standalone's seconds / these: higher is better)."
} >>"$MD"
gnuplot <<EOF 2>>"$DIR/gnuplot.log" || die "gnuplot failed"
set terminal svg size 800,500 dynamic background rgb 'white'
set output '$OUT_DIR/$name.svg'
set title "pgbench -M prepared, scale $SCALE, ${T}s, median of $ROUNDS (busy peer: $BUSY_PEER)" noenhanced
set xlabel 'clients'
set ylabel 'TPS'
set yrange [0:*]
set key outside right top noenhanced
set grid
plot for [i=2:$((${#CONFIGS[@]} + 1))] '$DAT' using 1:i with linespoints title columnheader(i)
EOF
echo >&2
cat "$MD" >&2
echo "bench: wrote $MD and $OUT_DIR/$name.svg" >&2
