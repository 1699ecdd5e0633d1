# shellcheck shell=bash disable=SC2034
# PostgreSQL on the cluster, reached by a client through a virtual IP. Source after lib.sh,
# pair.sh and cluster.sh:
#   . lib.sh; . pair.sh; . cluster.sh; . pgcluster.sh
#
# Topology: cluster.sh's alpha, beta and witness, plus a namespace "client" ($NS_client) holding
# the bridge of the service network. A veth from each node joins it, named svc0 in the node;
# client 192.0.2.193/26, alpha .194, beta .195, the VIP $PGC_VIP (192.0.2.200/26). Each node
# has a group "pg": attach (nbdfuse + loop device, $WORK/fuse-NODE, link $WORK/NODE.dev) ->
# mount (ext4, made once before the start and copied to both backings, so blank metadata is
# true; $WORK/pg-NODE inside the node's mount namespace) -> postgres ($WORK/pg-resource.sh:
# pg_ctl start -w / stop -m fast / pg_isready; data directory on the volume, initdb on the first
# start, listening on every address at $PGC_PORT, trust for the client subnet) -> vip on svc0.
#
# pgc_setup [SIZE]          all of the above in sync mode (256M); alpha becomes primary with the
#                           group running, beta leaves standby, the pair is in sync, the database
#                           answers on the VIP and pgbench's tables exist. Before it:
#                           CLUSTER_HB_INTERVAL / CLUSTER_DEADTIME / CLUSTER_PING_* (cluster.sh),
#                           PGC_BACKING_alpha=PATH to put alpha's backing elsewhere (a faulty
#                           store; the image is made at that path).
# pgc_sql SQL               psql from the client namespace against the VIP (prints the result)
# pgc_wait_db TIMEOUT_S     until the database answers on the VIP
# pgc_client_start / pgc_client_stop
#                           the commit-recording writer (tests/tools/pg-ledger.py) in the client
#                           namespace; stop prints its summary and fails if it gave up
# pgc_pgbench_start / pgc_pgbench_stop
#                           pgbench -c 4 in a loop (it gives up on a lost connection) in the
#                           client namespace; stop sets PGBENCH_TX to the transactions committed
# pgc_assert_rows           every id of the ledger is in the table, every extra row was in doubt
#                           (while the writer runs, rows newer than the ledger are left out);
#                           and pgbench's four balance totals agree
# pgc_vip_on NODE           the VIP is on NODE's svc0 and not on the other node's
# pgc_wait_vip NODE TIMEOUT_S
# pgc_group NODE            NODE's group state (started, stopped, ...)
# pgc_wait_primary NODE TIMEOUT_S
#                           NODE primary with its group started, the other node not primary
# pgc_postmaster NODE       the postmaster's pid on NODE (from its pid file, seen in NODE's mount
#                           namespace)
# pgc_crash NODE            power loss: SIGKILL to every process of NODE's namespace (hakd,
#                           nbdfuse, PostgreSQL); the VIP and the loop device go, as with a
#                           reboot
# sampler_start / sampler_assert  (cluster.sh)
#                           every 100 ms, whether each node is primary and not frozen; assert:
#                           no sample with both (and enough samples)
# other_node NODE           the other node's name

require_cmd mkfs.ext4 losetup nbdfuse fusermount3 runuser psql pg_isready pgbench jq
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[[ -x $PGBIN/pg_ctl ]] || fail "PostgreSQL server binaries are missing (scripts/deps.sh installs them)"
# Debian's interpreter: it is the one python3-psycopg2 installs for.
PGC_PY=/usr/bin/python3
"$PGC_PY" -c 'import psycopg2' 2>/dev/null || fail "python3-psycopg2 is missing; run scripts/deps.sh"
PGC_LEDGER_TOOL=$REPO/tests/tools/pg-ledger.py
# _pgc_cut_disk aborts FUSE connections through fusectl. systemd mounts it at boot; a machine
# without systemd (this CI's) does not, and without it the cut did nothing: a node whose
# nbdfuse exited last in its mount namespace deadlocked in D state (seen 2026-12-04).
mountpoint -q /sys/fs/fuse/connections ||
	mount -t fusectl fusectl /sys/fs/fuse/connections ||
	fail "cannot mount fusectl on /sys/fs/fuse/connections: no way to cut a node's disk"
NS_client=hak-c-$PAIR_SID
PGC_VIP=192.0.2.200
PGC_PORT=$((20000 + RANDOM % 20000))
PGC_LEDGER=$WORK/commits.ledger
# A client stuck on a node that died would wait for TCP's retransmissions (minutes): libpq's
# timeouts make it give up in seconds, as the ledger writer does.
PGC_CONNINFO="dbname=postgres connect_timeout=5 keepalives_idle=2 keepalives_interval=1 keepalives_count=3 tcp_user_timeout=5000"

other_node() {
	[[ $1 == alpha ]] && echo beta || echo alpha
}

_cluster_group() {
	local n=$1
	cat <<EOG
group pg {
    volume db
    monitor-interval 500ms
    max-restarts 2
    restart-window 60s
    resource disk {
        type attach
        directory $WORK/fuse-$n
        link $WORK/$n.dev
        timeout 30s
    }
    resource fs {
        type mount
        device $WORK/$n.dev
        directory $WORK/pg-$n
        fstype ext4
        timeout 60s
    }
    resource postgres {
        type exec
        start "$WORK/pg-resource.sh start $n"
        stop "$WORK/pg-resource.sh stop $n"
        monitor "$WORK/pg-resource.sh monitor $n"
        pidfile $WORK/pg-$n/data/postmaster.pid
        timeout 90s
    }
    resource ip {
        type vip
        address $PGC_VIP/26
        interface svc0
        garp-count 3
        garp-delay 1s
    }
}
EOG
}

# The exec resource's commands. The data directory lives on the volume, so the configuration
# written at initdb moves with it; only the socket directory and the log are the node's own.
_pgc_resource_script() {
	cat >"$WORK/pg-resource.sh" <<EOS
#!/bin/sh
# pg-resource.sh start|stop|monitor NODE
set -u
n=\$2
data=$WORK/pg-\$n/data
sock=$WORK/pgsock-\$n
pgctl() { runuser -u postgres -- $PGBIN/pg_ctl -D "\$data" -w -t 80 "\$@"; }
case \$1 in
start)
	if [ ! -f "\$data/PG_VERSION" ]; then
		install -d -o postgres -m 700 "\$data" || exit 1
		runuser -u postgres -- $PGBIN/initdb -A trust --wal-segsize=1 -D "\$data" \
			>$WORK/initdb-\$n.log 2>&1 || exit 1
		cat >>"\$data/postgresql.conf" <<EOF
listen_addresses = '*'
port = $PGC_PORT
max_connections = 40
shared_buffers = 16MB
min_wal_size = 8MB
max_wal_size = 48MB
fsync = on
synchronous_commit = on
full_page_writes = on
EOF
		echo "host all all 192.0.2.192/26 trust" >>"\$data/pg_hba.conf"
		# initdb synced its files; these appends must reach the volume too, or a crash
		# soon after leaves the peer a data directory without them
		sync "\$data/postgresql.conf" "\$data/pg_hba.conf" || exit 1
	fi
	# A postmaster.pid left by a crash names a pid of the node that died (or of a process gone
	# since): PostgreSQL would refuse to start if that pid exists here. It is stale when no
	# live process has its working directory in this data directory (the postmaster and every
	# backend do), which also keeps the file while orphaned backends still use the data.
	if [ -f "\$data/postmaster.pid" ]; then
		id=\$(stat -c %d:%i "\$data")
		i=0
		while :; do
			busy=
			for p in /proc/[0-9]*; do
				[ "\$(stat -Lc %d:%i "\$p/cwd" 2>/dev/null)" = "\$id" ] && { busy=\${p#/proc/}; break; }
			done
			[ -z "\$busy" ] && break
			i=\$((i + 1))
			[ \$i -gt 100 ] && break
			sleep 0.1
		done
		if [ -z "\$busy" ]; then
			echo "pg-resource: removing the stale postmaster.pid (pid \$(head -n 1 "\$data/postmaster.pid"))" >>"\$sock/resource.log"
			rm -f "\$data/postmaster.pid"
		fi
	fi
	pgctl -o "-k \$sock" -l "\$sock/server.log" start
	;;
stop)
	pgctl stop -m fast || ! pgctl status >/dev/null
	;;
monitor)
	pg_isready -q -U postgres -h "\$sock" -p $PGC_PORT
	;;
esac
EOS
	chmod +x "$WORK/pg-resource.sh"
}

# _pgc_svc_net: the client namespace with the bridge, and svc0 in both nodes.
_pgc_svc_net() {
	local n ns addr=194
	ip netns add "$NS_client"
	defer "ip netns del $NS_client 2>/dev/null || true"
	ip -n "$NS_client" link set lo up
	ip -n "$NS_client" link add br0 type bridge
	ip -n "$NS_client" addr add 192.0.2.193/26 dev br0
	ip -n "$NS_client" link set br0 up
	for n in alpha beta; do
		ns=NS_$n
		ip link add "hs${n:0:1}-$PAIR_SID" type veth peer name "hc${n:0:1}-$PAIR_SID"
		ip link set "hs${n:0:1}-$PAIR_SID" netns "${!ns}"
		ip link set "hc${n:0:1}-$PAIR_SID" netns "$NS_client"
		ip -n "${!ns}" link set "hs${n:0:1}-$PAIR_SID" name svc0
		ip -n "${!ns}" addr add "192.0.2.$addr/26" dev svc0
		ip -n "${!ns}" link set svc0 up
		ip -n "$NS_client" link set "hc${n:0:1}-$PAIR_SID" master br0 up
		addr=$((addr + 1))
	done
	wait_for "ip netns exec $NS_client ping -c1 -W1 192.0.2.194 && ip netns exec $NS_client ping -c1 -W1 192.0.2.195" 10 ||
		fail "the service network does not work"
}

# _pgc_release NODE: after NODE's processes are gone, drop the loop device the attach made
# (recorded before, while the node's mount namespace still showed its backing file).
_pgc_release() {
	local dev=$1 i
	[[ -n $dev && -b $dev ]] || return 0
	for ((i = 0; i < 50; i++)); do
		losetup -d "$dev" 2>/dev/null && return 0
		sleep 0.1
	done
	log "could not detach $dev"
}

# _pgc_loop NODE: NODE's loop device, if its link points to one backed by NODE's FUSE file. The
# FUSE mount exists in the node's mount namespace only, so the backing file's path is read
# there (seen from here it may lose its directories).
_pgc_loop() {
	local dev pid f
	dev=$(readlink "$WORK/$1.dev" 2>/dev/null) || return 0
	[[ -b $dev ]] || return 0
	f=/sys/block/${dev#/dev/}/loop/backing_file
	pid=$(cat "$WORK/fuse-$1.pid" 2>/dev/null) || true
	if [[ -n $pid ]] && pid_alive "$pid" &&
		[[ $(timeout 5 nsenter -t "$pid" -m cat "$f" 2>/dev/null) == "$WORK/fuse-$1/disk" ]]; then
		echo "$dev"
	elif [[ $(cat "$f" 2>/dev/null) == "$WORK/fuse-$1/disk" ]]; then
		echo "$dev"
	fi
	return 0
}

# _pgc_kill_ns NODE: SIGKILL every process in NODE's network namespace; waits until they are gone.
_pgc_kill_ns() {
	local ns=NS_$1 pids p i
	pids=$(ip netns pids "${!ns}" 2>/dev/null) || return 0
	[[ -n $pids ]] || return 0
	# shellcheck disable=SC2086
	kill -KILL $pids 2>/dev/null || true
	for p in $pids; do
		for ((i = 0; i < 100; i++)); do
			pid_alive "$p" || break
			sleep 0.1
		done
	done
	[[ -z ${NODE_PIDS[$1]:-} ]] || wait "${NODE_PIDS[$1]}" 2>/dev/null || true
	rm -f "$WORK/$1.ctl"
	return 0
}

# _pgc_cut_disk NODE: abort the FUSE connection under NODE's loop device, as a disk that loses
# power. Needed before its processes die, not only realistic: the last process of the node's
# mount namespace unmounts the ext4 on its way out, and when that is nbdfuse itself, the
# unmount's writeback waits for the FUSE server that is exiting: a deadlock in D state that
# also blocks every sync and drop_caches on the machine.
_pgc_cut_disk() {
	local pid conn
	pid=$(cat "$WORK/fuse-$1.pid" 2>/dev/null) || return 0
	pid_alive "$pid" || return 0
	conn=$(timeout 5 stat -c %d "/proc/$pid/root$WORK/fuse-$1" 2>/dev/null) || return 0
	# st_dev of a FUSE mount: major 0, the minor is the connection number
	((conn > 0 && conn < 256)) || conn=$(((conn & 0xff) | ((conn >> 12) & 0xfff00)))
	if [[ -e /sys/fs/fuse/connections/$conn/abort ]]; then
		echo 1 >"/sys/fs/fuse/connections/$conn/abort"
	else
		log "warning: no FUSE connection $conn to abort under $1's disk"
	fi
	return 0
}

pgc_crash() {
	local dev ns=NS_$1
	dev=$(_pgc_loop "$1")
	_pgc_cut_disk "$1"
	_pgc_kill_ns "$1"
	# a machine that loses power stops answering for its addresses; the namespace outlives
	# its processes, so the VIP goes by hand (the reboot would not have it either)
	ip -n "${!ns}" addr del "$PGC_VIP/26" dev svc0 2>/dev/null || true
	_pgc_release "$dev"
	log "crashed $1: every process of its namespace killed, VIP dropped, loop device ${dev:-none} released"
}

_pgc_teardown() {
	local n dev
	for n in alpha beta; do
		dev=$(_pgc_loop "$n")
		_pgc_cut_disk "$n"
		_pgc_kill_ns "$n"
		_pgc_release "$dev"
	done
}

pgc_setup() {
	local size=${1:-256M} n img
	require_hakd
	PGC_BACKING_alpha=${PGC_BACKING_alpha:-$WORK/alpha.img}
	# a faulty store given in PGC_BACKING_alpha already has its size
	[[ $PGC_BACKING_alpha != "$WORK/alpha.img" ]] || truncate -s "$size" "$PGC_BACKING_alpha"
	mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$PGC_BACKING_alpha"
	cp --sparse=always "$PGC_BACKING_alpha" "$WORK/beta.img"
	_pgc_resource_script
	for n in alpha beta; do
		install -d -o postgres "$WORK/pgsock-$n"
		mkdir -p "$WORK/pg-$n"
	done
	PAIR_NO_START=1 PAIR_BLANK=1 cluster_setup sync "$size"
	if [[ $PGC_BACKING_alpha != "$WORK/alpha.img" ]]; then
		sed -i "s|backing $WORK/alpha.img|backing $PGC_BACKING_alpha|" "$WORK/alpha.conf"
		grep -q "backing $PGC_BACKING_alpha" "$WORK/alpha.conf" || fail "alpha.conf names the wrong backing"
	fi
	pair_report_logs
	defer _pgc_teardown
	_pgc_svc_net
	node_start alpha
	node_start beta
	# initdb and the first start under the sanitizer build on a busy machine take a while
	pgc_wait_primary alpha 150
	wait_synced 60
	hk beta unstandby >/dev/null
	wait_for "[[ \$(cl beta standby) == false && \$(cl beta pending) == none ]]" 10 ||
		fail "beta did not leave standby: $(hk beta status)"
	pgc_wait_db 30
	ip netns exec "$NS_client" pgbench -i -q -s 2 -h "$PGC_VIP" -p "$PGC_PORT" \
		-U postgres postgres >"$WORK/pgbench-init.log" 2>&1 ||
		fail "pgbench -i failed: $(tail -n 5 "$WORK/pgbench-init.log")"
	log "PostgreSQL up on alpha behind $PGC_VIP:$PGC_PORT; beta in sync and eligible"
}

pgc_sql() {
	PGCONNECT_TIMEOUT=3 ip netns exec "$NS_client" psql -h "$PGC_VIP" -p "$PGC_PORT" -U postgres \
		-d postgres -Atq -v ON_ERROR_STOP=1 -c "$1"
}

pgc_wait_db() {
	wait_for "pgc_sql 'SELECT 1'" "$1" || fail "the database does not answer on $PGC_VIP within $1 s"
}

pgc_group() {
	hk "$1" status --json 2>/dev/null | jq -r '.groups[0].state'
}

# _pgc_is_primary NODE: NODE primary with the group started, the other node not primary.
_pgc_is_primary() {
	[[ $(role "$1") == primary && $(pgc_group "$1") == started && $(role "$(other_node "$1")") != primary ]]
}

pgc_wait_primary() {
	wait_for "_pgc_is_primary $1" "$2" ||
		fail "$1 is not the only primary with its group started after $2 s: role $(role "$1"), group $(pgc_group "$1"); $(other_node "$1"): $(role "$(other_node "$1")"); $(hk "$1" status 2>&1 | head -n 30)"
}

_pgc_vip_here() {
	local ns=NS_$1
	ip -n "${!ns}" -j addr show dev svc0 | jq -e --arg v "$PGC_VIP" '[.[0].addr_info[] | select(.local == $v)] | length == 1' >/dev/null
}

pgc_vip_on() {
	_pgc_vip_here "$1" || fail "the VIP $PGC_VIP is not on $1"
	_pgc_vip_here "$(other_node "$1")" && fail "the VIP $PGC_VIP is on $(other_node "$1") too"
	return 0
}

pgc_wait_vip() {
	wait_for "_pgc_vip_here $1 && ! _pgc_vip_here $(other_node "$1")" "$2" ||
		fail "the VIP did not settle on $1 within $2 s"
}

pgc_postmaster() {
	local f=/proc/${NODE_PIDS[$1]}/root$WORK/pg-$1/data/postmaster.pid
	head -n 1 "$f" 2>/dev/null
}

pgc_client_start() {
	rm -f "$WORK/client.stop"
	ip netns exec "$NS_client" "$PGC_PY" "$PGC_LEDGER_TOOL" write --host "$PGC_VIP" \
		--port "$PGC_PORT" --ledger "$PGC_LEDGER" --stop-file "$WORK/client.stop" \
		--max-outage 90 >"$WORK/client.out" 2>"$WORK/client.err" &
	PGC_CLIENT_PID=$!
	track_pid "$PGC_CLIENT_PID"
	wait_for "[[ -s $PGC_LEDGER ]]" 20 || fail "the writer committed nothing: $(cat "$WORK/client.err")"
}

pgc_client_stop() {
	local rc=0
	touch "$WORK/client.stop"
	wait_for "! pid_alive $PGC_CLIENT_PID" 30 || fail "the writer did not stop"
	wait "$PGC_CLIENT_PID" || rc=$?
	((rc == 0)) || fail "the writer exited with $rc: $(tail -n 5 "$WORK/client.err")"
	PGC_CLIENT_SUMMARY=$(cat "$WORK/client.out")
	log "$PGC_CLIENT_SUMMARY"
}

pgc_assert_rows() {
	local out live=() rows
	pid_alive "${PGC_CLIENT_PID:-0}" && live=(--live)
	out=$(ip netns exec "$NS_client" "$PGC_PY" "$PGC_LEDGER_TOOL" check --host "$PGC_VIP" \
		--port "$PGC_PORT" --ledger "$PGC_LEDGER" "${live[@]}" 2>&1) || fail "rows lost: $out"
	log "$out"
	(($(wc -l <"$PGC_LEDGER") > 0)) || fail "the ledger is empty"
	# pgbench's TPC-B moves money between rows in one transaction each: after any failover
	# the four totals agree (one statement, one snapshot) or a transaction was torn
	local sums
	sums=$(pgc_sql "SELECT (SELECT sum(abalance) FROM pgbench_accounts), (SELECT sum(bbalance) FROM pgbench_branches), (SELECT sum(tbalance) FROM pgbench_tellers), (SELECT coalesce(sum(delta), 0) FROM pgbench_history)") ||
		fail "the pgbench totals cannot be read"
	[[ $sums =~ ^(-?[0-9]+)\|(-?[0-9]+)\|(-?[0-9]+)\|(-?[0-9]+)$ && ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" &&
		${BASH_REMATCH[2]} == "${BASH_REMATCH[3]}" && ${BASH_REMATCH[3]} == "${BASH_REMATCH[4]}" ]] ||
		fail "pgbench's totals disagree (accounts|branches|tellers|history): $sums"
	# with the writer stopped, a plain SELECT gives the same count
	if ((${#live[@]} == 0)); then
		rows=$(pgc_sql "SELECT count(*) FROM commits") || fail "SELECT count(*) failed"
		assert_contains "$out" "check: rows $rows," "the row count"
	fi
}

pgc_pgbench_start() {
	rm -f "$WORK/pgbench.stop"
	ip netns exec "$NS_client" bash -c "
		while [[ ! -e $WORK/pgbench.stop ]]; do
			pgbench -n -c 4 -j 2 -T 20 -h $PGC_VIP -p $PGC_PORT -U postgres '$PGC_CONNINFO' \
				>>$WORK/pgbench.log 2>&1 &
			echo \$! >$WORK/pgbench.pid
			wait \$!
			sleep 0.3
		done" </dev/null >/dev/null 2>&1 &
	PGC_PGBENCH_LOOP=$!
	track_pid "$PGC_PGBENCH_LOOP"
}

pgc_pgbench_stop() {
	local p
	touch "$WORK/pgbench.stop"
	p=$(cat "$WORK/pgbench.pid" 2>/dev/null) || true
	if [[ -n $p && $(cat "/proc/$p/comm" 2>/dev/null) == pgbench ]]; then
		# SIGTERM: a background job of a non-interactive shell ignores SIGINT
		kill -TERM "$p" 2>/dev/null || true
	fi
	wait_for "! pid_alive $PGC_PGBENCH_LOOP" 20 || {
		p=$(cat "$WORK/pgbench.pid" 2>/dev/null) || true
		[[ -n $p && $(cat "/proc/$p/comm" 2>/dev/null) == pgbench ]] && kill -KILL "$p"
		wait_for "! pid_alive $PGC_PGBENCH_LOOP" 10 || fail "the pgbench loop did not stop"
	}
	wait "$PGC_PGBENCH_LOOP" 2>/dev/null || true
	# every committed pgbench transaction left one row in pgbench_history
	PGBENCH_TX=$(pgc_sql "SELECT count(*) FROM pgbench_history") || fail "cannot count pgbench's transactions"
	log "pgbench: $PGBENCH_TX transactions committed, $(grep -c '^pgbench (' "$WORK/pgbench.log") runs, $(grep -c 'aborted in command' "$WORK/pgbench.log") clients aborted by the faults"
}

