# shellcheck shell=bash disable=SC2034
# (SC2034: the globals set here are for the tests that source this file.)
# Shared helpers for hak integration tests. Every t_*.sh sources this file first.
#
# What a test gets:
#   RUN_ID, WORK        unique suffix and scratch directory (/var/tmp/hak-test.$RUN_ID)
#   REPO, HAK_BUILD     repository root and build flavour (default build/asan)
#   HAKD, HAKCTL, TOOLS binaries under test
#   HAK_IO_ENGINE       engine passed to hakd (auto|uring|pool), from the environment
#   defer CMD...        push a cleanup command; the stack runs in reverse order on EXIT/INT/TERM
#   hakd_start/hakd_stop, nbd_uri, assert_eq, assert_contains, fail, wait_for, rss_kb, ...
#
# HAK_TEST_SERVER=nbdkit serves exports with nbdkit instead of hakd. That exists only to check the
# tests themselves against the reference server; hakd-specific tests fail or skip in that mode.

set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
HAK_BUILD=${HAK_BUILD:-build/asan}
case $HAK_BUILD in
/*) ;;
*) HAK_BUILD=$REPO/$HAK_BUILD ;;
esac
HAKD=$HAK_BUILD/hakd
HAKCTL=$HAK_BUILD/hakctl
TOOLS=$HAK_BUILD/tests/tools
HAK_IO_ENGINE=${HAK_IO_ENGINE:-auto}
HAK_TEST_SERVER=${HAK_TEST_SERVER:-hakd}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

RUN_ID=$$-$RANDOM$RANDOM
WORK=/var/tmp/hak-test.$RUN_ID
TEST_NAME=$(basename "$0" .sh)
mkdir -p "$WORK"

# Cleanup stack: entries are shell snippets run in reverse order of registration.
_CLEANUP=()
# pids this test started, so cleanup never touches anything else.
_OWN_PIDS=()
# hakd instances: name -> pid / socket / control socket / log.
declare -A HAKD_PIDS=() HAKD_SOCKS=() HAKD_CTLS=() HAKD_LOGS=()
HAKD_LAST=

log() {
	printf '[%s %s] %s\n' "$(date +%H:%M:%S.%N | cut -c1-12)" "$TEST_NAME" "$*"
}

fail() {
	log "FAIL: $*"
	exit 1
}

defer() {
	_CLEANUP+=("$*")
}

# pid_alive PID: true while PID runs; a zombie counts as dead (kill -0 succeeds on zombies).
pid_alive() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	s=${s##*) }
	s=${s%% *}
	[[ -n $s && $s != Z && $s != X ]]
}

# pid_parent PID: the parent pid (fields after the command name, which may contain spaces).
pid_parent() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	s=${s##*) }
	s=${s#* }
	echo "${s%% *}"
}

# kill_own PID [TIMEOUT_S]: SIGTERM, then SIGKILL after TIMEOUT_S; only for pids this shell
# started (checked through the parent pid so a recycled pid is never hit).
kill_own() {
	local pid=$1 t=${2:-5} i ppid
	pid_alive "$pid" || return 0
	ppid=$(pid_parent "$pid") || return 0
	[[ $ppid == "$$" ]] || return 0
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < t * 10; i++)); do
		pid_alive "$pid" || break
		sleep 0.1
	done
	if pid_alive "$pid"; then
		kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || true
}

# track_pid PID: make cleanup stop PID.
track_pid() {
	_OWN_PIDS+=("$1")
	defer kill_own "$1"
}

# Sanitizer reports are failures even when the process exited 0.
sanitizer_check() {
	local f=$1
	[[ -f $f ]] || return 0
	if grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|WARNING: ThreadSanitizer' "$f"; then
		log "sanitizer report in $f:"
		grep -E -A30 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$f" | head -60
		return 1
	fi
}

_cleanup() {
	local rc=$? i name
	set +e
	trap - EXIT INT TERM
	if ((rc != 0)); then
		for name in "${!HAKD_LOGS[@]}"; do
			log "last lines of ${HAKD_LOGS[$name]}:"
			tail -n 25 "${HAKD_LOGS[$name]}" 2>/dev/null
		done
	fi
	for ((i = ${#_CLEANUP[@]} - 1; i >= 0; i--)); do
		eval "${_CLEANUP[$i]}" >/dev/null 2>&1
	done
	for name in "${!HAKD_LOGS[@]}"; do
		sanitizer_check "${HAKD_LOGS[$name]}" || rc=1
	done
	if ((rc != 0)) && [[ -n ${HAK_KEEP_WORK:-} ]]; then
		log "keeping $WORK"
	else
		rm -rf "$WORK"
	fi
	exit "$rc"
}
trap _cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# wait_for CMD TIMEOUT_S: evaluate CMD every 0.1 s until it succeeds; false after TIMEOUT_S.
wait_for() {
	local cmd=$1 t=${2:-10} i end
	end=$(($(date +%s%N) + t * 1000000000))
	for ((i = 0; i < t * 10; i++)); do
		if eval "$cmd" >/dev/null 2>&1; then
			return 0
		fi
		(($(date +%s%N) < end)) || return 1
		sleep 0.1
	done
	return 1
}

assert_eq() {
	local got=$1 want=$2 what=${3:-value}
	[[ $got == "$want" ]] || fail "$what: expected '$want', got '$got'"
}

assert_contains() {
	local hay=$1 needle=$2 what=${3:-output}
	[[ $hay == *"$needle"* ]] || fail "$what does not contain '$needle': ${hay:0:2000}"
}

assert_not_contains() {
	local hay=$1 needle=$2 what=${3:-output}
	[[ $hay != *"$needle"* ]] || fail "$what contains '$needle': ${hay:0:2000}"
}

# field_before TEXT WORD: the number in front of WORD in TEXT (a hak-ledger summary line:
# "ledger: 812 writes acknowledged, 0 failed").
field_before() {
	local re="([0-9]+) $2"
	[[ $1 =~ $re ]] || fail "no '$2' count in: $1"
	echo "${BASH_REMATCH[1]}"
}

# assert_le A B WHAT: integer A <= B.
assert_le() {
	(($1 <= $2)) || fail "$3: $1 is above the limit $2"
}

nbd_uri() {
	printf 'nbd+unix:///%s?socket=%s' "${2:-}" "$1"
}

# rss_kb PID [FIELD]: VmRSS (or another /proc status field such as VmHWM) in KiB.
rss_kb() {
	awk -v f="${2:-VmRSS}:" '$1 == f {print $2}' "/proc/$1/status"
}

# require_cmd CMD...: a missing tool is a broken install (scripts/deps.sh installs them), not a skip.
require_cmd() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 || fail "required command $c is missing; run scripts/deps.sh"
	done
}

# hakd_start NAME PATH [extra hakd args]: serve PATH on $WORK/NAME.sock (control socket
# $WORK/NAME.ctl, log $WORK/NAME.log). Sets HAKD_PID, HAKD_SOCK, HAKD_CTL, HAKD_LOG, HAKD_URI.
hakd_start() {
	local name=$1 path=$2
	shift 2
	local sock=$WORK/$name.sock ctl=$WORK/$name.ctl logf=$WORK/$name.log pid
	if [[ $HAK_TEST_SERVER == nbdkit ]]; then
		_nbdkit_start "$name" "$path" "$sock" "$logf" "$@"
		pid=$_NBDKIT_PID
	else
		[[ -x $HAKD ]] || fail "$HAKD is not built (make BUILD=${HAK_BUILD#"$REPO"/} SAN=1 bins)"
		"$HAKD" --export "$path" --socket "$sock" --control "$ctl" --foreground \
			--io-engine "$HAK_IO_ENGINE" "$@" </dev/null >"$logf" 2>&1 &
		pid=$!
	fi
	track_pid "$pid"
	HAKD_PIDS[$name]=$pid
	HAKD_SOCKS[$name]=$sock
	HAKD_CTLS[$name]=$ctl
	HAKD_LOGS[$name]=$logf
	HAKD_LAST=$name
	local i
	for ((i = 0; i < 100; i++)); do
		[[ -S $sock ]] && break
		pid_alive "$pid" || break
		sleep 0.1
	done
	if [[ ! -S $sock ]]; then
		tail -n 30 "$logf" >&2 || true
		fail "server $name did not create $sock within 10 s"
	fi
	# The engine variants of the data tests are only worth running if hakd really uses the engine.
	if [[ $HAK_TEST_SERVER == hakd && $HAK_IO_ENGINE != auto ]]; then
		wait_for "grep -qi 'engine $HAK_IO_ENGINE' '$logf'" 5 ||
			fail "hakd's log does not say it uses I/O engine $HAK_IO_ENGINE: $(head -c 2000 "$logf")"
	fi
	HAKD_PID=$pid
	HAKD_SOCK=$sock
	HAKD_CTL=$ctl
	HAKD_LOG=$logf
	HAKD_URI=$(nbd_uri "$sock")
	log "started $HAK_TEST_SERVER $name (pid $pid, engine $HAK_IO_ENGINE) on $sock for $path"
}

_nbdkit_start() {
	local name=$1 path=$2 sock=$3 logf=$4 ro=() ename
	shift 4
	ename=$(basename "$path")
	while (($#)); do
		case $1 in
		--read-only) ro=(-r) ;;
		--name)
			ename=$2
			shift
			;;
		esac
		shift
	done
	nbdkit -f -U "$sock" --exit-with-parent -e "$ename" "${ro[@]}" \
		--filter=exportname --filter=blocksize-policy file "$path" \
		blocksize-minimum=512 blocksize-preferred=4096 blocksize-maximum=33554432 \
		blocksize-error-policy=error exportdesc=fixed:"hak volume $ename" \
		default-export="$ename" exportname="$ename" exportname-list=explicit \
		</dev/null >"$logf" 2>&1 &
	_NBDKIT_PID=$!
}

# hakd_stop [NAME] [MAX_S]: SIGTERM, wait (bounded), require exit status 0 and a clean log.
# Sets HAKD_STOP_SECS to the time the exit took.
hakd_stop() {
	local name=${1:-$HAKD_LAST} max=${2:-15} pid rc i t0
	pid=${HAKD_PIDS[$name]:-}
	[[ -n $pid ]] || fail "hakd_stop: no server named $name"
	t0=$(date +%s.%N)
	kill -TERM "$pid" 2>/dev/null || true
	for ((i = 0; i < max * 10; i++)); do
		pid_alive "$pid" || break
		sleep 0.1
	done
	if pid_alive "$pid"; then
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		fail "server $name (pid $pid) was still running $max s after SIGTERM"
	fi
	rc=0
	wait "$pid" || rc=$?
	HAKD_STOP_SECS=$(elapsed_since "$t0")
	unset "HAKD_PIDS[$name]"
	if [[ $HAK_TEST_SERVER == nbdkit ]]; then
		return 0
	fi
	((rc == 0)) || fail "server $name exited with status $rc after SIGTERM (want 0)"
	sanitizer_check "${HAKD_LOGS[$name]}" || fail "sanitizer report in ${HAKD_LOGS[$name]}"
	log "stopped $name in ${HAKD_STOP_SECS}s, exit 0"
}

# hakd_alive [NAME]: fail unless the server is still running.
hakd_alive() {
	local name=${1:-$HAKD_LAST}
	pid_alive "${HAKD_PIDS[$name]}" || fail "server $name (pid ${HAKD_PIDS[$name]}) died"
}

# hakctl_status [NAME] [args...]: run hakctl status against the instance's control socket.
hakctl_status() {
	local name=${1:-$HAKD_LAST}
	shift || true
	timeout 10 "$HAKCTL" --control "${HAKD_CTLS[$name]}" status "$@"
}

# require_hakd: for tests that need hakd-only features (control socket).
require_hakd() {
	if [[ $HAK_TEST_SERVER != hakd ]]; then
		log "SKIP: needs hakd, HAK_TEST_SERVER=$HAK_TEST_SERVER"
		exit 77
	fi
	[[ -x $HAKCTL ]] || fail "$HAKCTL is not built"
}

# sparse_file PATH SIZE: a fresh sparse backing file.
sparse_file() {
	rm -f "$1"
	truncate -s "$2" "$1"
}

# pattern_file PATH SIZE BYTE: a file filled with one byte value (BYTE as 0xNN).
pattern_file() {
	local hex=${3#0x}
	head -c "$2" /dev/zero | tr '\0' "\\$(printf '%03o' "0x$hex")" >"$1"
}

# fuse_attach URI DIR: expose the export as the file DIR/disk through nbdfuse. Sets FUSE_FILE.
fuse_attach() {
	local uri=$1 dir=$2 pid
	mkdir -p "$dir"
	nbdfuse "$dir/disk" "$uri" </dev/null >"$WORK/nbdfuse.$(basename "$dir").log" 2>&1 &
	pid=$!
	track_pid "$pid"
	defer "fusermount3 -u '$dir' || fusermount3 -uz '$dir'"
	wait_for "mountpoint -q '$dir' && [[ -f '$dir/disk' ]]" 10 ||
		fail "nbdfuse did not mount $dir within 10 s"
	FUSE_FILE=$dir/disk
}

# loop_attach FILE: losetup FILE; sets LOOP_DEV.
loop_attach() {
	LOOP_DEV=$(losetup -f --show "$1") || fail "losetup of $1 failed"
	defer "losetup -d '$LOOP_DEV'"
}

# mount_dev DEV DIR: mount and register the unmount.
mount_dev() {
	mkdir -p "$2"
	mount "$1" "$2" || fail "mount $1 on $2 failed"
	defer "! mountpoint -q '$2' || umount '$2' || umount -l '$2'"
}

# elapsed_since T0: seconds (float) since a $(date +%s.%N) stamp.
elapsed_since() {
	awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f\n", b - a}'
}
