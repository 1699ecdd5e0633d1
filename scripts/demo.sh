#!/bin/bash
# make demo: an active/standby pair on this machine and a failover you can watch.
# Four network namespaces: alpha and beta (the servers), witness (a third host that grants the
# failover vote) and client (the service network: a bridge joining everyone, and the database
# clients). alpha and beta run hakd for a 256 MiB volume "db" in sync mode, with heartbeats on
# two paths (the replication link and the service network) and a service group "pg": the volume
# attached as a block device (nbdfuse + loop), ext4 on it, PostgreSQL on that, and the virtual IP
# 192.0.2.100 the clients use. pgbench and a client that writes down every commit PostgreSQL
# confirmed run against the VIP. Then alpha dies (hakd, PostgreSQL and nbdfuse killed with
# SIGKILL, as in a power cut); beta's cluster manager detects it, gets the witness's vote,
# promotes, starts the group and moves the VIP by itself; the demo prints the drill report
# (detection, promotion, database ready, VIP answering: the RTO; lost commits: the RPO) and both
# nodes' status. alpha comes back as secondary and resyncs; at the end both nodes are put in
# standby, the services stop cleanly and the two copies have the same sha256. Run as root after
# `make`; HAK_BUILD=DIR picks other binaries (default build/rel), HAK_KEEP_WORK=1 keeps the work
# directory of a failed run.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=$(realpath "${HAK_BUILD:-build/rel}")
HAKD=$BUILD/hakd
HAKCTL=$BUILD/hakctl
SID=$(printf '%04x' $((($$ * 7919 + RANDOM) & 0xffff)))
WORK=""
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
PGPORT=5433
VIP=192.0.2.100
declare -A NS=([alpha]=hak-demo-a-$SID [beta]=hak-demo-b-$SID [witness]=hak-demo-w-$SID
	[client]=hak-demo-c-$SID)
declare -A HAKD_PID=() NS_MADE=() LAN_IP=([alpha]=192.0.2.65 [beta]=192.0.2.66
	[witness]=192.0.2.67 [client]=192.0.2.70)
WITNESS_PID="" CLIENT_PID="" BENCH_PID=""

step() { printf '\n\033[1m%s\033[0m\n' "$*"; }
say() { printf '  %s\n' "$*"; }
die() {
	echo "demo: $*" >&2
	exit 1
}
now_us() { echo "${EPOCHREALTIME/./}"; }
secs_since() { awk -v a="$1" -v b="${2:-$(now_us)}" 'BEGIN {printf "%.2f", (b - a) / 1e6}'; }

# wait_until SECS CMD...: run CMD every 20 ms until it succeeds; false after SECS.
wait_until() {
	local end=$(($(now_us) + $1 * 1000000))
	shift
	until "$@" >/dev/null 2>&1; do
		(($(now_us) < end)) || return 1
		sleep 0.02
	done
}

hk() { timeout 10 "$HAKCTL" --control "$WORK/$1.ctl" "${@:2}"; }
js() { hk "$1" status --json | jq -r "$2"; }
repl() { js "$1" ".volumes[0].replication.$2"; }
is_repl() { [[ $(repl "$1" "$2") == "$3" ]]; }
gstate() { js "$1" '.groups[0].state'; }
is_group() { [[ $(gstate "$1") == "$2" ]]; }
# status NODE: the volume, replication, cluster and group lines of hakctl status.
status() {
	echo "  [$1]"
	hk "$1" status | grep -E '^volume|replication:|out of sync:|resync|^cluster|^group|SPLIT' |
		sed 's/^ */    /'
}
log_lines() { grep -E "$2" "$WORK/$1.log" | sed -E 's/^[^ ]* hakd [a-z]*: /    '"$1"': /' || true; }
pid_alive() { [[ -n $1 ]] && kill -0 "$1" 2>/dev/null && ! grep -q '^State:.*Z' "/proc/$1/status"; }
in_ns() { ip netns exec "${NS[$1]}" "${@:2}"; }
# csql SQL: from the client namespace, through the VIP, as any application would.
csql() {
	PGCONNECT_TIMEOUT=2 in_ns client psql -h "$VIP" -p "$PGPORT" -U postgres -d postgres -Atq \
		-v ON_ERROR_STOP=1 -c "$1"
}
# vip_on NODE: the VIP is on NODE's service interface and that interface is up.
vip_on() {
	ip -n "${NS[$1]}" -o addr show dev svc0 2>/dev/null | grep -q " $VIP/" &&
		ip -n "${NS[$1]}" -o link show dev svc0 2>/dev/null | grep -q 'state UP'
}
vip_where() {
	local n w=""
	for n in alpha beta; do vip_on "$n" && w+="$n "; done
	echo "${w:-nowhere}"
}

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

# pg_pid NODE: the postmaster of NODE's data directory, from its pid file. The mount lives in
# the mount namespace `ip netns exec` gave hakd, so the file is read through hakd's /proc root.
pg_pid() {
	[[ -n ${HAKD_PID[$1]:-} ]] || return 0
	head -n 1 "/proc/${HAKD_PID[$1]}/root$WORK/mnt-$1/data/postmaster.pid" 2>/dev/null || true
}
# kill_node NODE: a power cut: NODE's hakd, PostgreSQL and nbdfuse die with SIGKILL and its
# network goes silent (its links down: a dead server answers no ARP for the VIP either).
kill_node() {
	local p
	ip -n "${NS[$1]}" link set svc0 down
	ip -n "${NS[$1]}" link set hrep down
	p=$(pg_pid "$1")
	[[ -z $p ]] || kill -KILL "$p" 2>/dev/null || true
	[[ ! -s $WORK/fuse-$1.pid ]] || kill -KILL "$(cat "$WORK/fuse-$1.pid")" 2>/dev/null || true
	if [[ -n ${HAKD_PID[$1]:-} ]]; then
		kill -KILL "${HAKD_PID[$1]}" 2>/dev/null || true
		wait "${HAKD_PID[$1]}" 2>/dev/null || true
		HAKD_PID[$1]=""
	fi
}

# detach NODE: whatever of NODE's stack is left after a crash or a failed run, bounded: the
# database, the mount (lazily: the NBD server under it may be dead), the loop device, the FUSE
# file and nbdfuse.
detach() {
	local n=$1 mnt=$WORK/mnt-$1 fuse=$WORK/fuse-$1 f d p
	p=$(pg_pid "$n")
	[[ -z $p ]] || kill -KILL "$p" 2>/dev/null || true
	if mountpoint -q "$mnt" 2>/dev/null; then
		timeout 10 umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
	fi
	for f in /sys/block/loop*/loop/backing_file; do
		[[ $(cat "$f" 2>/dev/null) == "$fuse/disk" ]] || continue
		d=${f#/sys/block/}
		timeout 10 losetup -d "/dev/${d%%/*}" 2>/dev/null || true
	done
	if mountpoint -q "$fuse" 2>/dev/null; then
		timeout 10 fusermount3 -u "$fuse" 2>/dev/null || fusermount3 -u -z "$fuse" 2>/dev/null || true
	fi
	[[ ! -s $fuse.pid ]] || kill -KILL "$(cat "$fuse.pid")" 2>/dev/null || true
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
	for p in "$CLIENT_PID" "$BENCH_PID"; do [[ -z $p ]] || stop_pid "$p" TERM 5; done
	# standby on both nodes stops the services in order where hakd still runs
	for n in alpha beta; do [[ -z ${HAKD_PID[$n]:-} ]] || hk "$n" standby >/dev/null 2>&1; done
	for n in alpha beta; do
		[[ -z ${HAKD_PID[$n]:-} ]] || wait_until 60 eval "[[ \$(gstate $n) == stopped ]]"
	done
	# what is left (a failed run): killed while hakd's /proc root still shows its mounts
	for n in alpha beta; do [[ -z $WORK ]] || detach "$n"; done
	for n in alpha beta; do [[ -z ${HAKD_PID[$n]:-} ]] || stop_pid "${HAKD_PID[$n]}" TERM 10; done
	[[ -z $WITNESS_PID ]] || stop_pid "$WITNESS_PID" TERM 5
	for n in alpha beta witness client; do
		[[ -z ${NS_MADE[$n]:-} ]] || ip netns del "${NS[$n]}"
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
	local pg="runuser -u postgres -- $PGBIN/pg_ctl -D $WORK/mnt-$1/data -w -t 60"
	cat <<EOF
global {
    control-socket $WORK/$1.ctl
    log-level info
    state-dir $WORK/state-$1
}
# heartbeats on two paths: the replication link and the service network
node alpha {
    address 192.0.2.1:7789
    heartbeat-address 192.0.2.1:7790 ${LAN_IP[alpha]}:7790
}
node beta {
    address 192.0.2.2:7789
    heartbeat-address 192.0.2.2:7790 ${LAN_IP[beta]}:7790
}
# default heartbeat-interval 200ms and deadtime 1s
cluster {
    auth-key-file $WORK/cluster.key
    witness-address ${LAN_IP[witness]}:7791
    on-quorum-loss freeze
}
volume db {
    backing $WORK/$1.img
    nbd-socket $WORK/$1.nbd
    meta-disk $WORK/$1.meta
    mode sync
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
        start "$WORK/pg-init $1 && $pg -o '-p $PGPORT -k $WORK/pgsock-$1 -c listen_addresses=0.0.0.0' -l $WORK/mnt-$1/data/server.log start"
        stop "$pg stop -m fast || ! $pg status"
        monitor "pg_isready -q -h $WORK/pgsock-$1 -p $PGPORT"
        pidfile $WORK/mnt-$1/data/postmaster.pid
        timeout 90s
    }
    resource ip {
        type vip
        address $VIP/26
        interface svc0
    }
}
EOF
}

start_hakd() {
	# ip netns exec directly, not through in_ns: a function sent to the background runs in a
	# subshell, and $! would be that subshell instead of hakd
	ip netns exec "${NS[$1]}" "$HAKD" --config "$WORK/$1.conf" --node "$1" --foreground \
		</dev/null >>"$WORK/$1.log" 2>&1 3>&- 4>&- &
	HAKD_PID[$1]=$!
	wait_until 10 hk "$1" version || die "hakd on $1 did not come up; see its log above"
}

# veth NAME_A NS_A NAME_B NS_B: a veth pair with each end moved and renamed into a namespace.
veth() {
	ip link add "t1-$SID" type veth peer name "t2-$SID"
	ip link set "t1-$SID" netns "${NS[$2]}"
	ip link set "t2-$SID" netns "${NS[$4]}"
	ip -n "${NS[$2]}" link set "t1-$SID" name "$1" up
	ip -n "${NS[$4]}" link set "t2-$SID" name "$3" up
}

[[ $EUID -eq 0 ]] || die "run me as root (namespaces, loop devices and mounts need it)"
for c in "$HAKD" "$HAKCTL"; do [[ -x $c ]] || die "$c is missing; run make first"; done
[[ -x $PGBIN/pg_ctl ]] || die "PostgreSQL is missing; run scripts/deps.sh"
for c in ip jq nbdfuse fusermount3 losetup mkfs.ext4 fsck.ext4 sha256sum psql pgbench pg_isready \
	runuser; do
	command -v "$c" >/dev/null || die "$c is missing; run scripts/deps.sh"
done
ulimit -c 0 # no core file from nbdfuse's abort in the current directory
WORK=$(mktemp -d /var/tmp/hak-demo.XXXXXX)
chmod 755 "$WORK"
head -c 32 /dev/urandom | base64 >"$WORK/cluster.key"
chmod 600 "$WORK/cluster.key"
# The database is created on the first start, on whichever node that is; clients on the
# service network may connect without a password (a demo, not a deployment).
cat >"$WORK/pg-init" <<EOF
#!/bin/sh
d=$WORK/mnt-\$1/data
install -d -o postgres $WORK/pgsock-\$1
# A postmaster.pid left by the crashed node names a process that is gone, or a zombie here
# (all nodes share this machine's pids): PostgreSQL would refuse to start. Like Pacemaker's
# pgsql agent, remove a pid file whose process does not run.
if [ -f \$d/postmaster.pid ]; then
	st=\$(awk '{print \$3}' /proc/\$(head -n 1 \$d/postmaster.pid)/stat 2>/dev/null)
	case "\$st" in ""|Z|X) rm -f \$d/postmaster.pid ;; esac
fi
[ -d \$d ] && exit 0
install -d -o postgres \$d
runuser -u postgres -- $PGBIN/initdb -A trust -D \$d >/dev/null || exit 1
echo "host all all 192.0.2.0/24 trust" >>\$d/pg_hba.conf
# durable before anyone relies on it: a crash loses what was never synced, on any disk
sync \$d/pg_hba.conf
EOF
chmod 755 "$WORK/pg-init"

step "1. Four hosts in network namespaces: alpha, beta, a witness and a client"
for n in alpha beta witness client; do
	ip netns add "${NS[$n]}"
	NS_MADE[$n]=1
	ip -n "${NS[$n]}" link set lo up
done
veth hrep alpha hrep beta
ip -n "${NS[alpha]}" addr add 192.0.2.1/28 dev hrep
ip -n "${NS[beta]}" addr add 192.0.2.2/28 dev hrep
ip -n "${NS[client]}" link add br0 type bridge
ip -n "${NS[client]}" link set br0 up
for n in alpha beta witness; do
	veth svc0 "$n" "p-$n" client
	ip -n "${NS[client]}" link set "p-$n" master br0
	ip -n "${NS[$n]}" addr add "${LAN_IP[$n]}/26" dev svc0
done
ip -n "${NS[client]}" addr add "${LAN_IP[client]}/26" dev br0
say "replication link: alpha 192.0.2.1 <-> beta 192.0.2.2"
say "service network 192.0.2.64/26 (a bridge): alpha ${LAN_IP[alpha]}, beta ${LAN_IP[beta]}," \
	"witness ${LAN_IP[witness]}, client ${LAN_IP[client]}; the database's VIP will be $VIP"
for n in alpha beta; do
	config "$n" >"$WORK/$n.conf"
	mkdir -p "$WORK/state-$n"
	truncate -s 256M "$WORK/$n.img"
	"$HAKCTL" --config "$WORK/$n.conf" --node "$n" create-md db >>"$WORK/create-md.log"
done
# The data starts on alpha: an empty ext4 for the database; beta gets it by the initial sync.
mkfs.ext4 -q -F "$WORK/alpha.img"
ip netns exec "${NS[witness]}" "$HAKD" --witness --config "$WORK/alpha.conf" --foreground </dev/null \
	>>"$WORK/witness.log" 2>&1 3>&- 4>&- &
WITNESS_PID=$!
for n in alpha beta; do start_hakd "$n"; done
say "hakd on alpha and beta, the witness (hakd --witness) on ${LAN_IP[witness]}:7791"
say "configs, metadata (hakctl create-md db) and logs in $WORK"
wait_until 10 is_repl alpha link Connected || die "alpha did not connect to beta within 10 s"
wait_until 10 eval "[[ \$(js beta .cluster.peer.alive) == true ]]" ||
	die "beta does not hear alpha's heartbeats"
status alpha
status beta

step "2. Alpha becomes primary; its cluster manager starts PostgreSQL and the VIP"
T_SYNC=$(now_us)
hk alpha primary db --force >/dev/null
say "alpha promoted with --force: neither copy is UpToDate yet, alpha's (with the new ext4) wins"
wait_until 120 is_repl beta disk UpToDate || die "the initial sync to beta did not finish in 120 s"
say "initial sync done in $(secs_since "$T_SYNC") s (only allocated data travels; holes go as flags)"
wait_until 120 is_group alpha started ||
	die "the service group did not start on alpha: $(hk alpha status | tail -n 8)"
say "the cluster manager started group pg on alpha: attach -> mount -> PostgreSQL -> VIP"
wait_until 10 csql "SELECT 1" || die "PostgreSQL does not answer on the VIP $VIP"
say "the VIP $VIP is on: $(vip_where)"
csql "CREATE TABLE ledger (id int PRIMARY KEY, at timestamptz DEFAULT now())"
in_ns client pgbench -i -q -s 2 -h "$VIP" -p "$PGPORT" -U postgres postgres >/dev/null 2>&1 ||
	die "pgbench -i failed"
# The load: pgbench with 4 clients, and a client with one row per transaction whose id goes to
# the file only after COMMIT returned. Both talk to the VIP from the client namespace, retry
# through the failover (bounded) and stop when told.
(
	for ((r = 0; r < 50; r++)); do
		[[ -f $WORK/stop ]] && break
		in_ns client pgbench -n -c 4 -T 600 -P 1 -h "$VIP" -p "$PGPORT" -U postgres postgres \
			>>"$WORK/pgbench.log" 2>&1 || sleep 0.5
	done
) </dev/null >/dev/null 2>&1 3>&- 4>&- &
BENCH_PID=$!
(
	i=0
	while ((i < 100000)) && [[ ! -f $WORK/stop ]]; do
		i=$((i + 1))
		csql "INSERT INTO ledger (id) VALUES ($i)" >/dev/null 2>&1 || { sleep 0.05; continue; }
		echo "$i" >>"$WORK/acked"
	done
) </dev/null >/dev/null 2>&1 3>&- 4>&- &
CLIENT_PID=$!
wait_until 30 test -s "$WORK/acked" || die "the client could not commit any row through the VIP"
sleep 4
say "pgbench (4 clients) and the ledger client run against $VIP from the client namespace:" \
	"$(wc -l <"$WORK/acked") ledger commits confirmed so far"
status alpha
status beta

step "3. The drill: alpha dies (hakd, PostgreSQL and nbdfuse killed with SIGKILL)"
T0=$(now_us)
kill_node alpha
ACKED_AT_CRASH=$(wc -l <"$WORK/acked")
# pgbench's last progress line before the crash: "progress: 4.0 s, 312.5 tps, lat ..."
TPS_BEFORE=$(grep -h '^progress:' "$WORK/pgbench.log" 2>/dev/null | tail -n 1 | awk '{print $4}' || true)
say "$ACKED_AT_CRASH ledger commits had been confirmed when alpha died; beta's cluster manager"
say "takes over by itself: no command is typed from here on"
T_DETECT="" T_PROMOTE="" T_READY="" T_VIP=""
for ((k = 0; k < 3000; k++)); do
	j=$(hk beta status --json 2>/dev/null) || j='{}'
	[[ -z $T_DETECT && $(jq -r '.cluster.peer.alive' <<<"$j") == false ]] && T_DETECT=$(now_us)
	[[ -z $T_PROMOTE && $(jq -r '.volumes[0].role' <<<"$j") == primary ]] && T_PROMOTE=$(now_us)
	[[ -z $T_READY && $(jq -r '.groups[0].resources[] | select(.name == "postgres") |
		.state' <<<"$j") == up ]] && T_READY=$(now_us)
	[[ -z $T_VIP && -n $T_PROMOTE ]] && csql "SELECT 1" >/dev/null 2>&1 && T_VIP=$(now_us)
	# the VIP comes after the database: answering on it proves the database was ready
	[[ -n $T_VIP && -z $T_READY ]] && T_READY=$T_VIP
	[[ -n $T_DETECT && -n $T_PROMOTE && -n $T_READY && -n $T_VIP ]] && break
	(($(now_us) - T0 < 90000000)) || die "beta did not take over within 90 s: $(hk beta status)
detect ${T_DETECT:-no} promote ${T_PROMOTE:-no} ready ${T_READY:-no} vip ${T_VIP:-no}; VIP on $(vip_where)
$(csql "SELECT 1" 2>&1); $(ip -n "${NS[client]}" neigh 2>&1)"
	sleep 0.02
done
touch "$WORK/stop"
for p in "$CLIENT_PID" "$BENCH_PID"; do stop_pid "$p" TERM 10 || true; done
CLIENT_PID="" BENCH_PID=""
csql "SELECT id FROM ledger ORDER BY id" >"$WORK/present"
acked=$(wc -l <"$WORK/acked")
lost=$(sort -n "$WORK/acked" | comm -23 - <(sort -n "$WORK/present") | wc -l)
# the same load on beta, through the same VIP, for 3 s
tps=$(in_ns client pgbench -n -c 4 -T 3 -h "$VIP" -p "$PGPORT" -U postgres postgres 2>/dev/null |
	awk '/^tps/ {print $3}' || true)
echo
echo "  drill report: crash of the primary (alpha), failover to beta"
printf '    %-34s %6s s\n' "peer declared dead (detection)" "$(secs_since "$T0" "$T_DETECT")" \
	"beta primary (vote + promotion)" "$(secs_since "$T0" "$T_PROMOTE")" \
	"database ready (group started)" "$(secs_since "$T0" "$T_READY")" \
	"database answering on the VIP" "$(secs_since "$T0" "$T_VIP")"
printf '    %-34s %6s s\n' "RTO" "$(secs_since "$T0" "$T_VIP")"
printf '    %-34s %6s\n' "RPO: confirmed commits lost" "$lost of $acked"
printf '    %-34s %6.0f\n' "pgbench on alpha before (tps)" "${TPS_BEFORE:-0}" \
	"pgbench on beta after (tps)" "${tps:-0}"
say "the VIP $VIP is now on: $(vip_where)"
log_lines beta 'Cluster manager: rule (failover|ask-vote|takeover|serve)' | head -n 4
((lost == 0)) || die "$lost confirmed commits are missing on beta"
status beta

step "4. Alpha comes back as secondary and resyncs from beta"
T_RS=$(now_us)
# the reboot: nothing of the crashed stack survives it, the links come back, and the VIP is
# not configured at boot (only the group adds it)
detach alpha
ip -n "${NS[alpha]}" addr del "$VIP/26" dev svc0 2>/dev/null || true
ip -n "${NS[alpha]}" link set svc0 up
ip -n "${NS[alpha]}" link set hrep up
start_hakd alpha
say "alpha went down as primary, so it may hold writes beta never got: its activity log's"
say "extents go into its bitmap, and only they and beta's changes are resynced from beta"
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
say "the pair is in sync again $(secs_since "$T_RS") s after alpha's restart; beta stays primary"
say "(switchback is manual: hakctl switchover --to alpha)"
log_lines beta 'Resync finished' | tail -n 1
status alpha
status beta

step "5. Standby on both nodes stops the services cleanly; the two copies are identical"
hk alpha standby >/dev/null
hk beta standby >/dev/null
wait_until 120 is_group beta stopped || die "the service group did not stop on beta"
wait_until 30 is_repl beta role secondary || die "beta did not demote"
say "group pg stopped on beta (VIP removed, PostgreSQL shut down, ext4 unmounted, volume" \
	"detached) and beta demoted; the VIP is on: $(vip_where)"
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
echo "Demo finished: the standby took over by itself with every confirmed commit, and the pair is whole again."
