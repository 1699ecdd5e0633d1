# shellcheck shell=bash disable=SC2034
# The PostgreSQL pair of `make demo` (scripts/demo.sh) and bench/failover.sh, sourced by both.
# Four network namespaces: alpha and beta (the servers), witness (a third host that grants the
# failover vote) and client (the service network: a bridge joining everyone, and the database
# clients). alpha and beta run hakd for a 256 MiB volume "db" in sync mode, with heartbeats on
# two paths (the replication link and the service network, default 200 ms / 1 s) and a service
# group "pg": the volume attached as a block device (nbdfuse + loop), ext4 on it, PostgreSQL on
# that, and the virtual IP 192.0.2.100 the clients use.
#
#   pair_init                 root and tool checks, work directory, traps (cleanup on any exit)
#   pair_net                  the namespaces, links and bridge
#   pair_start                configs, metadata, the witness and both hakd
#   pair_first_primary NODE   NODE promoted (initial full sync), its group started, tables made
#   load_start / load_stop    pgbench (4 clients) and the ledger client against the VIP
#   drill_crash VICTIM SURVIVOR   power cut of VICTIM; D_DETECT D_PROMOTE D_READY D_VIP (us
#                             after the cut) and D_LOST D_ACKED (the ledger's verdict)
#   node_reboot NODE          what a reboot leaves (nothing), links up, hakd started
#   wait_resynced NODE SECS   NODE connected, UpToDate, nothing out of sync, crash settled
# Set PAIR_TAG (message prefix) before sourcing; HAK_BUILD=DIR picks other binaries (default
# build/rel), HAK_KEEP_WORK=1 keeps the work directory.
PAIR_TAG=${PAIR_TAG:-hakpair}
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
	echo "$PAIR_TAG: $*" >&2
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
# ns_kill NODE: SIGKILL every process in NODE's network namespace (all of them are this
# script's: the namespace is its own), until none is left (5 s at most).
ns_kill() {
	local k pids
	for ((k = 0; k < 50; k++)); do
		pids=$(ip netns pids "${NS[$1]}" 2>/dev/null) || true
		[[ -n $pids ]] || return 0
		# shellcheck disable=SC2086
		kill -KILL $pids 2>/dev/null || true
		sleep 0.1
	done
}

# kill_node NODE: a power cut: every process of NODE (all run in its network namespace: hakd,
# PostgreSQL with all its children, nbdfuse, monitors) dies with SIGKILL at once, and its
# network goes silent (links down: a dead server answers no ARP for the VIP either). A
# PostgreSQL child left alive would keep the old mount, and the loop device under it, busy.
kill_node() {
	ip -n "${NS[$1]}" link set svc0 down
	ip -n "${NS[$1]}" link set hrep down
	# disowned, bash reaps it without printing a "Killed" job notice
	[[ -z ${HAKD_PID[$1]:-} ]] || disown "${HAKD_PID[$1]}" 2>/dev/null || true
	ns_kill "$1"
	HAKD_PID[$1]=""
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
	# The loop device, through the attach resource's link: from here its backing file's path
	# may read "/disk" (the FUSE mount lived in hakd's mount namespace, maybe gone by now).
	d=$(readlink "$WORK/$n.dev" 2>/dev/null || true)
	if [[ $d == /dev/loop* && -e /sys/block/${d#/dev/}/loop/backing_file ]]; then
		timeout 10 losetup -d "$d" 2>/dev/null || true
	fi
	rm -f "$WORK/$n.dev"
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
	((rc == 0)) || echo "$PAIR_TAG: stopped (status $rc); cleaning up" >&2
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
		[[ -z ${NS_MADE[$n]:-} ]] || ns_kill "$n"
	done
	for n in alpha beta; do [[ -z $WORK ]] || detach "$n"; done
	for n in alpha beta witness client; do
		[[ -z ${NS_MADE[$n]:-} ]] || ip netns del "${NS[$n]}"
	done
	[[ -n $WORK && -z ${HAK_KEEP_WORK:-} ]] && rm -rf "$WORK"
	exit "$rc"
}
pair_init() {
	# The terminal, for cleanup: the trap may run inside a command whose output goes to
	# /dev/null.
	exec 3>&1 4>&2
	trap cleanup EXIT
	trap 'echo "$PAIR_TAG: line $LINENO: \"$BASH_COMMAND\" failed" >&2' ERR
	trap 'exit 130' INT
	trap 'exit 143' TERM
	[[ $EUID -eq 0 ]] || die "run me as root (namespaces, loop devices and mounts need it)"
	for c in "$HAKD" "$HAKCTL"; do [[ -x $c ]] || die "$c is missing; run make first"; done
	[[ -x $PGBIN/pg_ctl ]] || die "PostgreSQL is missing; run scripts/deps.sh"
	for c in ip jq nbdfuse fusermount3 losetup mkfs.ext4 fsck.ext4 sha256sum psql pgbench pg_isready \
		runuser; do
		command -v "$c" >/dev/null || die "$c is missing; run scripts/deps.sh"
	done
	ulimit -c 0 # no core file from nbdfuse's abort in the current directory
	WORK=$(mktemp -d /var/tmp/hak-$PAIR_TAG.XXXXXX)
	chmod 755 "$WORK"
	head -c 32 /dev/urandom | base64 >"$WORK/cluster.key"
	chmod 600 "$WORK/cluster.key"
	# The database is created on the first start, on whichever node that is; clients on the
	# service network may connect without a password (a demo, not a deployment).
	cat >"$WORK/pg-init" <<-EOF
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
}


config() {
	local pg="runuser -u postgres -- $PGBIN/pg_ctl -D $WORK/mnt-$1/data -w -t 60"
	cat <<EOF
global {
    control-socket $WORK/$1.ctl
    log-level info
    state-dir $WORK/state-$1
    allow-drills yes
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

pair_net() {
	local n
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
}

pair_start() {
	local n
	for n in alpha beta; do
		config "$n" >"$WORK/$n.conf"
		mkdir -p "$WORK/state-$n"
		truncate -s 256M "$WORK/$n.img"
		"$HAKCTL" --config "$WORK/$n.conf" --node "$n" create-md db >>"$WORK/create-md.log"
	done
	# The data starts on alpha: an empty ext4 for the database; beta gets it by the initial
	# sync.
	mkfs.ext4 -q -F "$WORK/alpha.img"
	ip netns exec "${NS[witness]}" "$HAKD" --witness --config "$WORK/alpha.conf" --foreground \
		</dev/null >>"$WORK/witness.log" 2>&1 3>&- 4>&- &
	WITNESS_PID=$!
	for n in alpha beta; do start_hakd "$n"; done
	wait_until 10 is_repl alpha link Connected || die "alpha did not connect to beta within 10 s"
	wait_until 10 eval "[[ \$(js beta .cluster.peer.alive) == true ]]" ||
		die "beta does not hear alpha's heartbeats"
}

pair_first_primary() {
	local peer=beta
	[[ $1 == beta ]] && peer=alpha
	hk "$1" primary db --force >/dev/null
	wait_until 120 is_repl "$peer" disk UpToDate ||
		die "the initial sync to $peer did not finish in 120 s"
	wait_until 120 is_group "$1" started ||
		die "the service group did not start on $1: $(hk "$1" status | tail -n 8)"
	wait_until 10 csql "SELECT 1" || die "PostgreSQL does not answer on the VIP $VIP"
	csql "CREATE TABLE ledger (id int PRIMARY KEY, at timestamptz DEFAULT now())"
	in_ns client pgbench -i -q -s 2 -h "$VIP" -p "$PGPORT" -U postgres postgres >/dev/null 2>&1 ||
		die "pgbench -i failed"
}

# The load: pgbench with 4 clients, and a client with one row per transaction whose id goes to
# the ledger file only after COMMIT returned. Both talk to the VIP from the client namespace,
# retry through a failover (bounded) and stop when WORK/stop appears.
load_start() {
	rm -f "$WORK/stop"
	(
		for ((r = 0; r < 50; r++)); do
			[[ -f $WORK/stop ]] && break
			in_ns client pgbench -n -c 4 -T 600 -P 1 -h "$VIP" -p "$PGPORT" -U postgres \
				postgres >>"$WORK/pgbench.log" 2>&1 || sleep 0.5
		done
	) </dev/null >/dev/null 2>&1 3>&- 4>&- &
	BENCH_PID=$!
	(
		i=$(sort -n "$WORK/acked" 2>/dev/null | tail -n 1 || true)
		i=${i:-0}
		for ((k = 0; k < 100000; k++)); do
			[[ -f $WORK/stop ]] && break
			i=$((i + 1))
			csql "INSERT INTO ledger (id) VALUES ($i)" >/dev/null 2>&1 || {
				sleep 0.05
				continue
			}
			echo "$i" >>"$WORK/acked"
		done
	) </dev/null >/dev/null 2>&1 3>&- 4>&- &
	CLIENT_PID=$!
	wait_until 30 test -s "$WORK/acked" || die "the client could not commit any row through the VIP"
}

load_stop() {
	local p
	touch "$WORK/stop"
	# the loops' pgbench and psql run in the client namespace, children of the subshells:
	# end them there, or they would outlive the subshells
	ns_kill client
	for p in "$CLIENT_PID" "$BENCH_PID"; do [[ -z $p ]] || stop_pid "$p" TERM 10 || true; done
	CLIENT_PID="" BENCH_PID=""
}

# log_us NODE REGEX SINCE_US: when NODE's log first shows a line matching REGEX at or after
# SINCE_US (epoch microseconds; the log stamps are ISO 8601 to the millisecond).
log_us() {
	local t us
	while read -r t _; do
		us=$(date -d "$t" +%s%6N 2>/dev/null) || continue
		((us >= $3)) && { echo "$us"; return 0; }
	done < <(grep -E "$2" "$WORK/$1.log")
	return 1
}

# drill_crash VICTIM SURVIVOR: cut VICTIM's power, wait (90 s at most) until the database
# answers on the VIP again from the client namespace (polled every 20 ms: D_VIP, the RTO), and
# take the steps' times from the survivor's log: peer declared dead (D_DETECT), promoted
# (D_PROMOTE), PostgreSQL up (D_READY, when the VIP after it starts), all in microseconds after
# the cut. Then stop the load and count the ledger's confirmed commits missing from the
# database (D_LOST of D_ACKED).
drill_crash() {
	local v=$1 s=$2 t0 k
	D_DETECT="" D_PROMOTE="" D_READY="" D_VIP=""
	t0=$(now_us)
	kill_node "$v"
	for ((k = 0; k < 4500; k++)); do
		# a probe whose SYN went to the dead node's MAC would wait for the 1 s SYN
		# retransmission: give up after 300 ms and send a fresh one
		if in_ns client timeout 0.3 psql -h "$VIP" -p "$PGPORT" -U postgres -d postgres -Atq -c "SELECT 1" \
			>/dev/null 2>&1 && [[ $(js "$s" '.volumes[0].role') == primary ]]; then
			D_VIP=$(($(now_us) - t0))
			break
		fi
		(($(now_us) - t0 < 90000000)) || die "$s did not take over within 90 s; VIP on \
$(vip_where):
$(hk "$s" status 2>&1)"
		sleep 0.02
	done
	[[ -n $D_VIP ]] || die "$s did not take over"
	D_DETECT=$(($(log_us "$s" 'Event peer node:[0-9]+ state:dead' "$t0") - t0))
	D_PROMOTE=$(($(log_us "$s" "Event role volume:db node:$s role:primary" "$t0") - t0))
	D_READY=$(($(log_us "$s" 'Group pg: start of resource ip' "$t0") - t0))
	load_stop
	csql "SELECT id FROM ledger ORDER BY id" >"$WORK/present"
	D_ACKED=$(wc -l <"$WORK/acked")
	D_LOST=$(awk 'NR == FNR {p[$1] = 1; next} !($1 in p)' "$WORK/present" "$WORK/acked" | wc -l)
}

# node_reboot NODE: nothing of the crashed stack survives a reboot, the links come back, the VIP
# is not configured at boot (only the group adds it), and hakd starts.
node_reboot() {
	detach "$1"
	ip -n "${NS[$1]}" addr del "$VIP/26" dev svc0 2>/dev/null || true
	ip -n "${NS[$1]}" link set svc0 up
	ip -n "${NS[$1]}" link set hrep up
	start_hakd "$1"
}

# wait_resynced NODE SECS [say]: connected, UpToDate, nothing out of sync, and the crash that
# made it resync settled (crashed_primary clears when that resync completes); "say" prints the
# progress.
wait_resynced() {
	local t0 j p last=""
	t0=$(now_us)
	while :; do
		(($(now_us) - t0 < $2 * 1000000)) || die "$1 did not resync within $2 s"
		j=$(hk "$1" status --json | jq -c '.volumes[0].replication') || j='{}'
		jq -e '.link == "Connected" and .disk == "UpToDate" and .out_of_sync_bytes == 0 and
			.crashed_primary == false' <<<"$j" >/dev/null && break
		if [[ ${3:-} == say ]]; then
			p=$(jq -r '.resync | if . then "\(.percent | floor)% of \(.total_bytes / 1048576 |
				floor) MiB" else empty end' <<<"$j")
			[[ -n $p && $p != "$last" ]] && say "resync: $p"
			last=$p
		fi
		sleep 0.05
	done
}
