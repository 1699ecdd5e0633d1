# shellcheck shell=bash
# Real Corosync + Pacemaker on the two namespaces of pair.sh (source lib.sh, pair.sh, then this).
# Each node gets a "holder" process (sleep) in its network namespace, a mount namespace and a
# UTS namespace of its own: hostname alpha or beta; tmpfs on /run and /dev/shm; its own
# /etc/corosync, /var/lib/corosync, /var/lib/pacemaker, /var/log/pacemaker, /var/log/corosync
# (WORK/pcmk-NODE/...); /usr/lib/ocf/resource.d with the hak agent next to the system's agents;
# /run/hak/hak.conf -> WORK/NODE.conf and /run/hak/hakd.log -> WORK/NODE.log. libqb's IPC uses
# abstract UNIX sockets, which are per network namespace, and /dev/shm, which is per node here:
# the two Pacemakers never see each other's daemons.
#   pcmk_setup                 holders, corosync.conf (knet, two links: the pair's two paths,
#                              two_node), corosync and pacemakerd started on both
#   px NODE CMD...             run CMD on NODE (its namespaces), e.g. px alpha crm_mon -1
#   pcmk_node_procs NODE       pids of every process in NODE's mount namespace but the holder
#   pcmk_kill NODE             SIGKILL every one of them (a power cut of the node's software)
#   pcmk_start NODE            corosync and pacemakerd on NODE
#   pcmk_wait_online TIMEOUT   a DC elected and both nodes online
#   pcmk_add_clone             stonith-enabled=false and the promotable clone hak-db-clone
#   pcmk_wait_promoted TMO     one instance Promoted: P is that node, S the other
#   pcmk_constraint NODE       the hak-fence-db location constraint in NODE's CIB, or ""
#   pcmk_promoted NODE         crm_mon on NODE lists the hak clone Promoted on exactly one
#                              node; prints that node
# Cleanup kills every process of both mount namespaces (by pid, found through
# /proc/PID/ns/mnt), so nothing Pacemaker spawned (its daemons, the agent's hakd) survives.
declare -A PCMK_HOLDER=()

_pcmk_node_script() {
	cat >"$WORK/pcmk-node.sh" <<'EOS'
#!/bin/bash
# pcmk-node.sh WORK NODE: inside the node's fresh mount and UTS namespaces: private state, then
# hold the namespaces open.
set -e
W=$1 N=$2 R=$1/pcmk-$2
hostname "$N"
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p /run/crm /run/resource-agents /run/lock /run/hak
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
for d in etc/corosync var/lib/corosync var/lib/pacemaker var/log/pacemaker var/log/corosync; do
	mkdir -p "/$d"
	mount --bind "$R/${d//\//-}" "/$d"
done
mount --bind /usr/lib/ocf/resource.d/heartbeat "$W/ocf/heartbeat"
mount --bind /usr/lib/ocf/resource.d/pacemaker "$W/ocf/pacemaker"
mount --rbind "$W/ocf" /usr/lib/ocf/resource.d
ln -s "$W/$N.conf" /run/hak/hak.conf
ln -s "$W/$N.log" /run/hak/hakd.log
echo ready >"$R/ready"
exec sleep 100000
EOS
	chmod 755 "$WORK/pcmk-node.sh"
}

_pcmk_corosync_conf() {
	cat <<EOC
totem {
	version: 2
	cluster_name: hak-$PAIR_SID
	transport: knet
	# no encryption between two namespaces of one machine (a real cluster keeps the default
	# and an authkey made by corosync-keygen)
	crypto_cipher: none
	crypto_hash: none
	# A cut of one path must not cost the membership: knet marks the link down after 400 ms
	# without pongs and carries on over the other, well before the token (3 s) is lost. With
	# token 1000 and knet's default ping timeout (token / 2), a loaded machine lost the token
	# first: the peer left the partition and fence-peer answered "offline" (exit 5), not 4.
	token: 3000
	interface {
		linknumber: 0
		knet_ping_interval: 100
		knet_ping_timeout: 400
	}
	interface {
		linknumber: 1
		knet_ping_interval: 100
		knet_ping_timeout: 400
	}
}
nodelist {
	node {
		name: alpha
		nodeid: 1
		ring0_addr: 192.0.2.1
		ring1_addr: 192.0.2.129
	}
	node {
		name: beta
		nodeid: 2
		ring0_addr: 192.0.2.2
		ring1_addr: 192.0.2.130
	}
}
quorum {
	provider: corosync_votequorum
	two_node: 1
}
logging {
	to_stderr: no
	to_syslog: no
	to_logfile: yes
	logfile: /var/log/corosync/corosync.log
	timestamp: on
}
EOC
}

px() {
	local n=$1
	shift
	nsenter -t "${PCMK_HOLDER[$n]}" -m -u -n -- "$@"
}

pcmk_node_procs() {
	local h=${PCMK_HOLDER[$1]} p
	[[ -e /proc/$h/ns/mnt ]] || return 0
	# -ef compares the namespaces' inodes without a process per pid
	for p in /proc/[0-9]*; do
		[[ ${p#/proc/} != "$h" && $p/ns/mnt -ef /proc/$h/ns/mnt ]] && echo "${p#/proc/}"
	done 2>/dev/null
	return 0
}

pcmk_kill() {
	local p
	for p in $(pcmk_node_procs "$1"); do
		kill -KILL "$p" 2>/dev/null || true
	done
	wait_for "[[ -z \$(pcmk_node_procs $1) ]]" 10 ||
		fail "processes of $1 survived SIGKILL: $(pcmk_node_procs "$1" | tr '\n' ' ')"
}

# _pcmk_cleanup NODE: TERM then KILL everything in the node's namespaces, then the holder.
_pcmk_cleanup() {
	local n=$1 p
	[[ -n ${PCMK_HOLDER[$n]:-} ]] || return 0
	for p in $(pcmk_node_procs "$n"); do kill -TERM "$p" 2>/dev/null; done
	wait_for "[[ -z \$(pcmk_node_procs $n) ]]" 5
	for p in $(pcmk_node_procs "$n"); do kill -KILL "$p" 2>/dev/null; done
	wait_for "[[ -z \$(pcmk_node_procs $n) ]]" 5
	kill_own "${PCMK_HOLDER[$n]}"
}

pcmk_start() {
	local n=$1
	: >"$WORK/pcmk-$n/var-log-corosync/corosync.log"
	# Their own session, so that a signal to the test's process group never reaches them;
	# cleanup finds them through the mount namespace.
	setsid nsenter -t "${PCMK_HOLDER[$n]}" -m -u -n -- corosync -f \
		</dev/null >>"$WORK/pcmk-$n.out" 2>&1 &
	wait_for "px $n corosync-cfgtool -s" 20 || fail "corosync on $n did not come up: $(tail -n 20 "$WORK/pcmk-$n/var-log-corosync/corosync.log")"
	setsid nsenter -t "${PCMK_HOLDER[$n]}" -m -u -n -- env PCMK_logfile=/var/log/pacemaker/pacemaker.log \
		PCMK_logfacility=none PCMK_stderr=no pacemakerd </dev/null >>"$WORK/pcmk-$n.out" 2>&1 &
	log "corosync and pacemakerd started on $n"
}

pcmk_setup() {
	local n d
	require_cmd corosync pacemakerd crm_mon cibadmin crm_attribute nsenter unshare
	_pcmk_node_script
	mkdir -p "$WORK/ocf/heartbeat" "$WORK/ocf/pacemaker" "$WORK/ocf/hak"
	install -m 0755 "$REPO/packaging/ocf/hak" "$WORK/ocf/hak/hak"
	chmod 755 "$WORK"
	for n in alpha beta; do
		for d in etc-corosync var-lib-corosync var-lib-pacemaker var-log-pacemaker var-log-corosync; do
			mkdir -p "$WORK/pcmk-$n/$d"
		done
		cp -a /var/lib/pacemaker/. "$WORK/pcmk-$n/var-lib-pacemaker/"
		chown hacluster:haclient "$WORK/pcmk-$n/var-log-pacemaker"
		chmod 2770 "$WORK/pcmk-$n/var-log-pacemaker"
		_pcmk_corosync_conf >"$WORK/pcmk-$n/etc-corosync/corosync.conf"
		local ns=NS_$n
		ip netns exec "${!ns}" unshare -m -u --propagation private "$WORK/pcmk-node.sh" "$WORK" "$n" \
			</dev/null >>"$WORK/pcmk-$n.out" 2>&1 &
		PCMK_HOLDER[$n]=$!
		track_pid "${PCMK_HOLDER[$n]}"
		defer "_pcmk_cleanup $n"
		wait_for "[[ -f $WORK/pcmk-$n/ready ]]" 10 ||
			fail "the namespaces of $n did not come up: $(cat "$WORK/pcmk-$n.out")"
		[[ $(px "$n" hostname) == "$n" ]] || fail "the UTS namespace of $n says $(px "$n" hostname)"
	done
	for n in alpha beta; do
		pcmk_start "$n"
	done
}

pcmk_wait_online() {
	wait_for "px alpha crm_mon -1 | grep -q 'Online: \\[ alpha beta \\]' && ! px alpha crm_mon -1 | grep -q 'Current DC: NONE'" "${1:-60}" ||
		fail "Pacemaker did not elect a DC with both nodes online within ${1:-60}s: $(px alpha crm_mon -1 2>&1)"
}

pcmk_promoted() {
	local out
	out=$(px "$1" crm_mon -1 2>/dev/null) || return 1
	[[ $out =~ Promoted:\ \[\ ([a-z]+)\ \] ]] || return 1
	echo "${BASH_REMATCH[1]}"
}

# pcmk_add_clone: stonith-enabled=false and the promotable clone hak-db-clone of ocf:hak:hak
# (volume db, config /run/hak/hak.conf, the binaries under test, hakd's log in WORK/NODE.log).
pcmk_add_clone() {
	px alpha crm_attribute -t crm_config -n stonith-enabled -v false
	px alpha cibadmin -C -o resources -X "
<clone id=\"hak-db-clone\">
  <meta_attributes id=\"hak-db-clone-meta\">
    <nvpair id=\"hak-db-clone-promotable\" name=\"promotable\" value=\"true\"/>
    <nvpair id=\"hak-db-clone-promoted-max\" name=\"promoted-max\" value=\"1\"/>
    <nvpair id=\"hak-db-clone-promoted-node-max\" name=\"promoted-node-max\" value=\"1\"/>
    <nvpair id=\"hak-db-clone-clone-max\" name=\"clone-max\" value=\"2\"/>
    <nvpair id=\"hak-db-clone-clone-node-max\" name=\"clone-node-max\" value=\"1\"/>
    <nvpair id=\"hak-db-clone-notify\" name=\"notify\" value=\"true\"/>
  </meta_attributes>
  <primitive id=\"hak-db\" class=\"ocf\" provider=\"hak\" type=\"hak\">
    <instance_attributes id=\"hak-db-params\">
      <nvpair id=\"hak-db-config\" name=\"config\" value=\"/run/hak/hak.conf\"/>
      <nvpair id=\"hak-db-volume\" name=\"volume\" value=\"db\"/>
      <nvpair id=\"hak-db-hakd\" name=\"hakd\" value=\"$HAKD\"/>
      <nvpair id=\"hak-db-hakctl\" name=\"hakctl\" value=\"$HAKCTL\"/>
      <nvpair id=\"hak-db-log\" name=\"log_file\" value=\"/run/hak/hakd.log\"/>
    </instance_attributes>
    <operations>
      <op id=\"hak-db-start\" name=\"start\" interval=\"0\" timeout=\"60s\"/>
      <op id=\"hak-db-stop\" name=\"stop\" interval=\"0\" timeout=\"60s\"/>
      <op id=\"hak-db-promote\" name=\"promote\" interval=\"0\" timeout=\"60s\"/>
      <op id=\"hak-db-demote\" name=\"demote\" interval=\"0\" timeout=\"60s\"/>
      <op id=\"hak-db-monitor-promoted\" name=\"monitor\" interval=\"2s\" role=\"Promoted\" timeout=\"20s\"/>
      <op id=\"hak-db-monitor-unpromoted\" name=\"monitor\" interval=\"3s\" role=\"Unpromoted\" timeout=\"20s\"/>
    </operations>
  </primitive>
</clone>" || fail "cibadmin refused the clone"
	px alpha crm_verify -L || fail "crm_verify finds errors in the configuration"
}

# pcmk_wait_promoted TIMEOUT: one instance Promoted (as alpha's Pacemaker sees it); sets P to
# that node and S to the other.
pcmk_wait_promoted() {
	# P is taken from the same crm_mon that showed the promotion: a second call may land in a
	# transition and list none, and its failed assignment ended the test under set -e silently.
	P=
	wait_for "P=\$(pcmk_promoted alpha)" "$1" ||
		fail "Pacemaker promoted no instance within $1 s: $(px alpha crm_mon -1 2>&1)"
	S=alpha
	# shellcheck disable=SC2034 # for the test that sources this
	[[ $P == alpha ]] && S=beta
	return 0
}

# pcmk_constraint NODE: the hak-fence-db constraint as NODE's CIB holds it ("" if none).
pcmk_constraint() {
	px "$1" cibadmin -Q --xpath "//rsc_location[@id='hak-fence-db']" 2>/dev/null || true
}
