#!/bin/bash
# make demo: a replicated pair on this machine and a failover you can watch.
# Two network namespaces play the servers alpha and beta (192.0.2.1 and .2 on a veth link); each
# runs hakd for a 256 MiB volume "db" in sync mode. A small "database" (200 files) goes on ext4 on
# alpha, alpha's hakd is killed, beta is promoted by hand (the cluster manager will do that, and
# move the service and its IP, later), the files are verified there, and alpha comes back and
# resyncs. Run as root after `make`; HAK_BUILD=DIR picks other binaries (default build/rel).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=$(realpath "${HAK_BUILD:-build/rel}")
HAKD=$BUILD/hakd
HAKCTL=$BUILD/hakctl
SID=$(printf '%04x' $((($$ * 7919 + RANDOM) & 0xffff)))
WORK=""
NFILES=200
declare -A NS=([alpha]=hak-demo-a-$SID [beta]=hak-demo-b-$SID)
declare -A HAKD_PID=() FUSE_PID=() LOOP=() NS_MADE=()

step() { printf '\n\033[1m%s\033[0m\n' "$*"; }
say() { printf '  %s\n' "$*"; }
die() {
	echo "demo: $*" >&2
	exit 1
}
now_us() { echo "${EPOCHREALTIME/./}"; }
secs_since() { awk -v a="$1" -v b="$(now_us)" 'BEGIN {printf "%.2f", (b - a) / 1e6}'; }

# wait_until SECS CMD...: run CMD every 50 ms until it succeeds; false after SECS.
wait_until() {
	local end=$(($(now_us) + $1 * 1000000))
	shift
	until "$@" >/dev/null 2>&1; do
		(($(now_us) < end)) || return 1
		sleep 0.05
	done
}

hk() { timeout 10 "$HAKCTL" --control "$WORK/$1.ctl" "${@:2}"; }
repl() { hk "$1" status --json | jq -r ".volumes[0].replication.$2"; }
is_repl() { [[ $(repl "$1" "$2") == "$3" ]]; }
# status NODE: the volume and replication lines of hakctl status.
status() {
	echo "  [$1]"
	hk "$1" status | grep -E '^volume|replication:|out of sync:|resync|refusal|SPLIT' |
		sed 's/^ */    /'
}
log_lines() { grep -E "$2" "$WORK/$1.log" | sed -E 's/^[^ ]* hakd [a-z]*: /    '"$1"': /' || true; }
pid_alive() { [[ -n $1 ]] && kill -0 "$1" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$1/status"; }

# our_child PID: PID runs and this shell started it (a recycled pid is never signalled).
our_child() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	s=${s##*) }
	s=${s#* }
	[[ ${s%% *} == "$$" ]]
}

# stop_pid PID SIG SECS: signal one of our children and reap it (SIGKILL after SECS); returns
# its exit status, also when it had already ended.
stop_pid() {
	local pid=$1 rc=0
	if our_child "$pid"; then
		kill -"$2" "$pid" 2>/dev/null || true
		wait_until "$3" eval "! pid_alive $pid" || kill -KILL "$pid" 2>/dev/null || true
	fi
	wait "$pid" 2>/dev/null || rc=$?
	return "$rc"
}

# detach NODE: unmount, free the loop device and the FUSE file of NODE's client side, bounded.
# Lazy unmounts because the NBD server under the FUSE file may be dead (a plain umount could
# then block on I/O that never completes).
detach() {
	local n=$1 mnt=$WORK/mnt-$1 fuse=$WORK/fuse-$1
	if mountpoint -q "$mnt" 2>/dev/null; then
		timeout 10 umount "$mnt" 2>/dev/null || umount -l "$mnt"
	fi
	if [[ -n ${LOOP[$n]:-} ]]; then
		timeout 10 losetup -d "${LOOP[$n]}" 2>/dev/null || true
		LOOP[$n]=""
	fi
	if [[ -n ${FUSE_PID[$n]:-} ]]; then
		timeout 10 fusermount3 -u "$fuse" 2>/dev/null || fusermount3 -u -z "$fuse" 2>/dev/null || true
		stop_pid "${FUSE_PID[$n]}" TERM 5 || true
		FUSE_PID[$n]=""
	fi
}

cleanup() {
	local rc=$? n
	set +e
	trap - EXIT INT TERM
	exec 1>&3 2>&4
	((rc == 0)) || echo "demo: stopped (status $rc); cleaning up" >&2
	if ((rc != 0 && rc != 130 && rc != 143)) && [[ -n $WORK ]]; then
		for n in alpha beta; do
			[[ -f $WORK/$n.log ]] && { echo "last lines of $n's log:"; tail -n 8 "$WORK/$n.log"; } >&2
		done
	fi
	for n in alpha beta; do detach "$n"; done
	for n in alpha beta; do
		[[ -n ${HAKD_PID[$n]:-} ]] && stop_pid "${HAKD_PID[$n]}" TERM 10
	done
	for n in alpha beta; do
		[[ -n ${NS_MADE[$n]:-} ]] && ip netns del "${NS[$n]}"
	done
	[[ -n $WORK ]] && rm -rf "$WORK"
	exit "$rc"
}
# The terminal, for cleanup: the trap may run inside a command whose output goes to /dev/null.
exec 3>&1 4>&2
trap cleanup EXIT
trap 'echo "demo: line $LINENO: \"$BASH_COMMAND\" failed" >&2' ERR
trap 'exit 130' INT
trap 'exit 143' TERM

config() {
	cat <<EOF
global {
    control-socket $WORK/$1.ctl
    log-level info
}
node alpha {
    address 192.0.2.1:7789
}
node beta {
    address 192.0.2.2:7789
}
volume db {
    backing $WORK/$1.img
    nbd-socket $WORK/$1.nbd
    meta-disk $WORK/$1.meta
    mode sync
    ping-interval 200ms
    ping-timeout 1s
    connect-interval 200ms
}
EOF
}

start_hakd() {
	ip netns exec "${NS[$1]}" "$HAKD" --config "$WORK/$1.conf" --node "$1" --foreground \
		</dev/null >>"$WORK/$1.log" 2>&1 3>&- 4>&- &
	HAKD_PID[$1]=$!
	wait_until 10 hk "$1" version || die "hakd on $1 did not come up; see its log above"
}

# attach NODE: NODE's export as a block device (nbdfuse makes it a file, losetup a device).
attach() {
	local n=$1 fuse=$WORK/fuse-$1
	mkdir -p "$fuse" "$WORK/mnt-$n"
	nbdfuse "$fuse/disk" "nbd+unix:///db?socket=$WORK/$n.nbd" </dev/null \
		>>"$WORK/nbdfuse-$n.log" 2>&1 3>&- 4>&- &
	FUSE_PID[$n]=$!
	# nbdfuse aborts on an assertion when its server dies (step 3); keep bash from announcing it.
	disown "${FUSE_PID[$n]}"
	wait_until 10 test -f "$fuse/disk" || die "nbdfuse did not expose $n's export within 10 s"
	LOOP[$n]=$(losetup --show -f "$fuse/disk")
}

[[ $EUID -eq 0 ]] || die "run me as root (namespaces, loop devices and mounts need it)"
for c in "$HAKD" "$HAKCTL"; do [[ -x $c ]] || die "$c is missing; run make first"; done
for c in ip jq nbdfuse fusermount3 losetup mkfs.ext4 fsck.ext4 sha256sum; do
	command -v "$c" >/dev/null || die "$c is missing; run scripts/deps.sh"
done
ulimit -c 0 # no core file from nbdfuse's abort in the current directory
WORK=$(mktemp -d /var/tmp/hak-demo.XXXXXX)

step "1. Two servers, alpha and beta, in network namespaces on this machine"
for n in alpha beta; do
	ip netns add "${NS[$n]}"
	NS_MADE[$n]=1
	ip -n "${NS[$n]}" link set lo up
done
ip link add "hda-$SID" netns "${NS[alpha]}" type veth peer name "hdb-$SID" netns "${NS[beta]}"
ip -n "${NS[alpha]}" addr add 192.0.2.1/24 dev "hda-$SID"
ip -n "${NS[beta]}" addr add 192.0.2.2/24 dev "hdb-$SID"
ip -n "${NS[alpha]}" link set "hda-$SID" up
ip -n "${NS[beta]}" link set "hdb-$SID" up
say "namespaces ${NS[alpha]} (alpha, 192.0.2.1) and ${NS[beta]} (beta, 192.0.2.2), one veth link"
for n in alpha beta; do
	config "$n" >"$WORK/$n.conf"
	truncate -s 256M "$WORK/$n.img"
	# Blank metadata: both sides start identical (all zeros), so no initial sync is needed.
	"$HAKCTL" --config "$WORK/$n.conf" --node "$n" create-md db --blank >>"$WORK/create-md.log"
	start_hakd "$n"
done
say "configs, metadata (hakctl create-md db --blank) and logs in $WORK"
say "volume db: 256 MiB, mode sync (a write is acknowledged once both disks have it)"
wait_until 10 is_repl alpha link Connected || die "alpha did not connect to beta within 10 s"
wait_until 10 is_repl beta disk UpToDate || die "beta's disk is not UpToDate after 10 s"
status alpha
status beta

step "2. Alpha becomes primary and gets a filesystem with a small database"
hk alpha primary db >/dev/null
wait_until 5 is_repl beta peer_role primary || die "beta does not see alpha as primary after 5 s"
attach alpha
say "alpha's export is ${LOOP[alpha]} (nbdfuse + loop); only the primary serves NBD clients"
mkfs.ext4 -q -F "${LOOP[alpha]}"
mount "${LOOP[alpha]}" "$WORK/mnt-alpha"
for i in $(seq -w 1 $NFILES); do
	head -c $(((RANDOM % 128 + 1) * 1024)) /dev/urandom >"$WORK/mnt-alpha/row$i.dat"
done
(cd "$WORK/mnt-alpha" && sha256sum row*.dat) >"$WORK/sums"
sync
say "$NFILES files, $(du -sh "$WORK/mnt-alpha" | cut -f1) on ext4, sha256 sums recorded, synced"
status alpha
status beta

step "3. The failure: alpha's hakd is killed with SIGKILL"
T_KILL=$(now_us)
kill -KILL "${HAKD_PID[alpha]}"
wait "${HAKD_PID[alpha]}" 2>/dev/null || true
HAKD_PID[alpha]=""
wait_until 5 eval '! is_repl beta link Connected' || die "beta still sees alpha 5 s after the kill"
T_NOTICED=$(now_us)
say "beta noticed $(secs_since "$T_KILL") s after the kill:"
log_lines beta 'Lost the connection'
say "(the kernel closed the dead hakd's sockets; a server that goes silent instead, like one"
say "losing power, is declared gone by the ping timeout: ping-interval 200ms, ping-timeout 1s)"
detach alpha
say "alpha's client side died with it: its ext4 unmounted (lazily), loop and FUSE file detached"
status beta

step "4. The failover: beta is promoted and serves the volume"
T_PROMOTE=$(now_us)
hk beta primary db >/dev/null
attach beta
T_SERVE=$(now_us)
say "beta promoted (hakctl primary db) and its export attached as ${LOOP[beta]}" \
	"in $(secs_since "$T_PROMOTE") s"
# Mounting replays the ext4 journal that alpha never closed.
mount "${LOOP[beta]}" "$WORK/mnt-beta"
(cd "$WORK/mnt-beta" && sha256sum --quiet -c "$WORK/sums") || die "files differ on beta"
T_VERIFIED=$(now_us)
say "all $NFILES files verified on beta"
umount "$WORK/mnt-beta"
fsck.ext4 -fn "${LOOP[beta]}" 2>&1 | tail -n 1 | sed 's/^/  fsck.ext4 -fn: /'
mount "${LOOP[beta]}" "$WORK/mnt-beta"
# The demo's own pauses between noticing and promoting (tearing down alpha's side, printing
# status) are not part of a failover, so they are left out of the totals.
read -r T_FO T_VER < <(awk -v k="$T_KILL" -v n="$T_NOTICED" -v p="$T_PROMOTE" -v s="$T_SERVE" \
	-v v="$T_VERIFIED" 'BEGIN {f = (n - k) + (s - p); print f / 1e6, (f + v - s) / 1e6}' |
	xargs printf '%.2f %.2f\n')
say "failover: beta served the volume $T_FO s after the kill (detection + promotion + attach),"
say "with all files verified after $T_VER s (the demo's own pauses in between not counted)"
say "beta now counts what alpha misses (out of sync) for the resync when alpha returns"
status beta

step "5. Alpha comes back as secondary and resyncs from beta"
T_RS=$(now_us)
start_hakd alpha
say "alpha went down as primary, so it may hold writes beta never got: its activity log's"
say "extents go into its bitmap, and only they and beta's changes are resynced from beta"
say "(unallocated ranges travel as hole flags, not as zeros)"
last=""
while :; do
	(($(now_us) - T_RS < 60000000)) || die "alpha did not resync within 60 s"
	j=$(hk alpha status --json | jq -c '.volumes[0].replication') || j='{}'
	# crashed_primary clears when the resync that settles it completes.
	jq -e '.link == "Connected" and .disk == "UpToDate" and .out_of_sync_bytes == 0 and
		.crashed_primary == false and .resyncs_completed >= 1' <<<"$j" >/dev/null && break
	p=$(jq -r '.resync | if . then "\(.percent | floor)% of \(.total_bytes / 1048576 |
		floor) MiB" else empty end' <<<"$j")
	[[ -n $p && $p != "$last" ]] && say "resync: $p"
	last=$p
	sleep 0.05
done
say "the pair is in sync again $(secs_since "$T_RS") s after alpha's restart:"
log_lines alpha 'Starting a|Resync finished'
log_lines beta 'Resync finished'
re='([0-9]+) bytes sent \(([0-9]+) as holes\)'
if [[ $(grep 'Resync finished as source' "$WORK/beta.log" | tail -n 1) =~ $re ]]; then
	say "$(((BASH_REMATCH[1] - BASH_REMATCH[2]) >> 20)) MiB copied as data," \
		"$((BASH_REMATCH[2] >> 20)) MiB of unallocated space sent as hole flags"
fi
status alpha
status beta

step "6. Both daemons stop cleanly; the two copies are identical"
detach beta
for n in alpha beta; do
	stop_pid "${HAKD_PID[$n]}" TERM 20 || die "hakd on $n did not exit cleanly after SIGTERM"
	HAKD_PID[$n]=""
done
say "both hakd exited 0 after SIGTERM"
sa=$(sha256sum <"$WORK/alpha.img" | cut -d' ' -f1)
sb=$(sha256sum <"$WORK/beta.img" | cut -d' ' -f1)
say "sha256 alpha.img $sa"
say "sha256 beta.img  $sb"
[[ $sa == "$sb" ]] || die "the backing files differ"
say "identical"
echo
echo "Demo finished: every file survived the crash of its server, and the pair is whole again."
