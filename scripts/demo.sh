#!/bin/bash
# make demo: a replicated pair on this machine and a failover you can watch.
# Two network namespaces play the servers alpha and beta (192.0.2.1 and .2 on a veth link); each
# runs hakd for a 256 MiB volume "db" in sync mode and a service group "pg": the volume attached
# as a block device (nbdfuse + loop), ext4 mounted on it, PostgreSQL on that. A client inserts
# numbered rows and records every commit PostgreSQL confirmed; alpha dies (hakd, PostgreSQL and
# the attach killed with SIGKILL, as in a power cut), beta is promoted and starts the group by
# hand (the cluster manager will do both, and move a VIP, by itself), every confirmed row is
# checked there, and alpha comes back and resyncs. Run as root after `make`; HAK_BUILD=DIR picks
# other binaries (default build/rel).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=$(realpath "${HAK_BUILD:-build/rel}")
HAKD=$BUILD/hakd
HAKCTL=$BUILD/hakctl
SID=$(printf '%04x' $((($$ * 7919 + RANDOM) & 0xffff)))
WORK=""
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
PGPORT=5433
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
	[[ -n ${CLIENT_PID:-} ]] && stop_pid "$CLIENT_PID" TERM 5
	for n in alpha beta; do
		if [[ -n ${HAKD_PID[$n]:-} ]] && [[ $(gstate "$n" 2>/dev/null) != stopped ]]; then
			hk "$n" group stop pg >/dev/null 2>&1
			wait_until 60 is_group "$n" stopped
		fi
	done
	for n in alpha beta; do detach "$n"; done
	for n in alpha beta; do
		[[ -n ${HAKD_PID[$n]:-} ]] && stop_pid "${HAKD_PID[$n]}" TERM 10
	done
	for n in alpha beta; do [[ -n $WORK ]] && kill_node_services "$n"; done
	for n in alpha beta; do
		[[ -n ${NS_MADE[$n]:-} ]] && ip netns del "${NS[$n]}"
	done
	[[ -n $WORK && -z ${HAK_KEEP_WORK:-} ]] && rm -rf "$WORK"
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
group pg {
    volume db
    monitor-interval 1s
    resource disk {
        type attach
        directory $WORK/fuse-$1
        link $WORK/$1.dev
    }
    resource fs {
        type mount
        device $WORK/$1.dev
        directory $WORK/mnt-$1
        fstype ext4
    }
    resource postgres {
        type exec
        start "[ -d $WORK/mnt-$1/data ] || { install -d -o postgres $WORK/mnt-$1/data && runuser -u postgres -- $PGBIN/initdb -A trust -D $WORK/mnt-$1/data >/dev/null; } && runuser -u postgres -- $PGBIN/pg_ctl -D $WORK/mnt-$1/data -w -t 60 -o '-p $PGPORT -k $WORK/pgsock -c listen_addresses=' -l $WORK/mnt-$1/data/server.log start"
        stop "runuser -u postgres -- $PGBIN/pg_ctl -D $WORK/mnt-$1/data -w -t 60 stop -m fast || ! runuser -u postgres -- $PGBIN/pg_ctl -D $WORK/mnt-$1/data status"
        monitor "pg_isready -q -h $WORK/pgsock -p $PGPORT"
        timeout 90s
    }
}
EOF
}

gstate() { hk "$1" status --json | jq -r '.groups[0].state'; }
is_group() { [[ $(gstate "$1") == "$2" ]]; }
sql() { runuser -u postgres -- psql -h "$WORK/pgsock" -p $PGPORT -d postgres -Atq -v ON_ERROR_STOP=1 -c "$1"; }
# kill_node_services NODE: what dies with a server besides hakd: its PostgreSQL and nbdfuse.
kill_node_services() {
	local p
	p=$(pgrep -f "postgres -D $WORK/mnt-$1/data" || true)
	[[ -z $p ]] || kill -KILL $p 2>/dev/null || true
	[[ ! -s $WORK/fuse-$1.pid ]] || kill -KILL "$(cat "$WORK/fuse-$1.pid")" 2>/dev/null || true
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
[[ -x $PGBIN/pg_ctl ]] || die "PostgreSQL is missing; run scripts/deps.sh"
for c in ip jq nbdfuse fusermount3 losetup mkfs.ext4 fsck.ext4 sha256sum psql pg_isready runuser; do
	command -v "$c" >/dev/null || die "$c is missing; run scripts/deps.sh"
done
ulimit -c 0 # no core file from nbdfuse's abort in the current directory
WORK=$(mktemp -d /var/tmp/hak-demo.XXXXXX)
chmod 755 "$WORK"
install -d -o postgres "$WORK/pgsock"

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
	"$HAKCTL" --config "$WORK/$n.conf" --node "$n" create-md db >>"$WORK/create-md.log"
done
# The data starts on alpha: an empty ext4 for the database; beta gets it by the initial sync.
mkfs.ext4 -q -F "$WORK/alpha.img"
for n in alpha beta; do start_hakd "$n"; done
say "configs, metadata (hakctl create-md db) and logs in $WORK"
say "volume db: 256 MiB, mode sync (a write is acknowledged once both disks have it)"
wait_until 10 is_repl alpha link Connected || die "alpha did not connect to beta within 10 s"
status alpha
status beta

step "2. Alpha becomes primary, syncs beta, and runs PostgreSQL on the volume"
T_SYNC=$(now_us)
hk alpha primary db --force >/dev/null
say "alpha promoted with --force: neither copy is UpToDate yet, alpha's (with the new ext4) wins"
wait_until 5 is_repl beta peer_role primary || die "beta does not see alpha as primary after 5 s"
wait_until 120 is_repl beta disk UpToDate || die "the initial sync to beta did not finish in 120 s"
say "initial sync done in $(secs_since "$T_SYNC") s (only allocated data travels; holes go as flags)"
hk alpha group start pg >/dev/null
wait_until 120 is_group alpha started || die "the service group did not start on alpha: $(hk alpha status | tail -n 5)"
say "service group pg started on alpha: attach (nbdfuse + loop) -> mount ext4 -> PostgreSQL"
hk alpha status | sed -n '/^group/,$p' | sed 's/^/    /'
sql "CREATE TABLE ledger (id int PRIMARY KEY, at timestamptz DEFAULT now())"
# The client: one row per transaction; an id goes to the file only after COMMIT returned.
(
	i=0
	while ((i < 100000)); do
		i=$((i + 1))
		sql "INSERT INTO ledger (id) VALUES ($i)" >/dev/null 2>&1 || { sleep 0.05; continue; }
		echo "$i" >>"$WORK/acked"
	done
) </dev/null >/dev/null 2>&1 3>&- 4>&- &
CLIENT_PID=$!
wait_until 30 test -s "$WORK/acked" || die "the client could not commit any row on alpha"
sleep 3
say "a client is inserting numbered rows: $(wc -l <"$WORK/acked") commits confirmed so far"
status alpha
status beta

step "3. The failure: alpha dies (hakd, PostgreSQL and nbdfuse killed with SIGKILL)"
T_KILL=$(now_us)
kill -KILL "${HAKD_PID[alpha]}"
kill_node_services alpha
wait "${HAKD_PID[alpha]}" 2>/dev/null || true
HAKD_PID[alpha]=""
wait_until 5 eval '! is_repl beta link Connected' || die "beta still sees alpha 5 s after the kill"
T_NOTICED=$(now_us)
say "beta noticed $(secs_since "$T_KILL") s after the kill:"
log_lines beta 'Lost the connection'
say "(the kernel closed the dead hakd's sockets; a server that goes silent instead, like one"
say "losing power, is declared gone by the ping timeout: ping-interval 200ms, ping-timeout 1s)"
ACKED_AT_CRASH=$(wc -l <"$WORK/acked")
say "$ACKED_AT_CRASH commits had been confirmed to the client when alpha died"
status beta

step "4. The failover: beta is promoted and starts PostgreSQL on its copy"
T_PROMOTE=$(now_us)
hk beta primary db >/dev/null
hk beta group start pg >/dev/null
wait_until 120 is_group beta started || die "the service group did not start on beta: $(hk beta status | tail -n 5)"
T_READY=$(now_us)
say "beta promoted and its group started (ext4 journal and PostgreSQL WAL replayed) in $(secs_since "$T_PROMOTE") s"
stop_pid "$CLIENT_PID" TERM 5 || true
CLIENT_PID=""
sql "SELECT id FROM ledger ORDER BY id" >"$WORK/present"
acked=$(wc -l <"$WORK/acked")
lost=$(sort -n "$WORK/acked" | comm -23 - <(sort -n "$WORK/present") | wc -l)
say "rows in the database on beta: $(wc -l <"$WORK/present"); commits the client saw confirmed:" \
	"$acked (a row can be committed while its confirmation is still on the way: never the reverse)"
((lost == 0)) || die "$lost confirmed commits are missing on beta"
read -r T_FO < <(awk -v k="$T_KILL" -v n="$T_NOTICED" -v p="$T_PROMOTE" -v r="$T_READY" \
	'BEGIN {printf "%.2f\n", ((n - k) + (r - p)) / 1e6}')
say "RPO: 0 confirmed commits lost.  RTO: the database answered on beta $T_FO s after the crash"
say "(detection + promotion + group start; the demo's own pauses in between not counted)"
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
log_lines alpha 'Starting a|Resync finished' | tail -n 2
log_lines beta 'Resync finished' | tail -n 1
re='([0-9]+) bytes sent \(([0-9]+) as holes\)'
if [[ $(grep 'Resync finished as source' "$WORK/beta.log" | tail -n 1) =~ $re ]]; then
	say "$(((BASH_REMATCH[1] - BASH_REMATCH[2]) >> 20)) MiB copied as data," \
		"$((BASH_REMATCH[2] >> 20)) MiB of unallocated space sent as hole flags"
fi
status alpha
status beta

step "6. PostgreSQL and both daemons stop cleanly; the two copies are identical"
hk beta group stop pg >/dev/null
wait_until 120 is_group beta stopped || die "the service group did not stop on beta"
say "group pg stopped on beta: PostgreSQL shut down, ext4 unmounted, volume detached"
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
echo "Demo finished: every confirmed commit survived the crash of its server, and the pair is whole again."
