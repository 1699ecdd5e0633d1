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
PAIR_TAG=demo
# shellcheck source=scripts/hakpair.sh
. scripts/hakpair.sh

pair_init

step "1. Four hosts in network namespaces: alpha, beta, a witness and a client"
pair_net
say "replication link: alpha 192.0.2.1 <-> beta 192.0.2.2"
say "service network 192.0.2.64/26 (a bridge): alpha ${LAN_IP[alpha]}, beta ${LAN_IP[beta]}," \
	"witness ${LAN_IP[witness]}, client ${LAN_IP[client]}; the database's VIP will be $VIP"
pair_start
say "hakd on alpha and beta, the witness (hakd --witness) on ${LAN_IP[witness]}:7791"
say "configs, metadata (hakctl create-md db) and logs in $WORK"
status alpha
status beta

step "2. Alpha becomes primary; its cluster manager starts PostgreSQL and the VIP"
T_SYNC=$(now_us)
pair_first_primary alpha
say "alpha promoted with --force (neither copy was UpToDate; alpha's, with the new ext4, wins);"
say "initial sync and group start took $(secs_since "$T_SYNC") s (holes travel as flags)"
say "the cluster manager started group pg on alpha: attach -> mount -> PostgreSQL -> VIP"
say "the VIP $VIP is on: $(vip_where)"
load_start
sleep 4
say "pgbench (4 clients) and the ledger client run against $VIP from the client namespace:" \
	"$(wc -l <"$WORK/acked") ledger commits confirmed so far"
status alpha
status beta

step "3. The drill: alpha dies (a power cut: hakd, PostgreSQL and nbdfuse killed, links down)"
say "beta's cluster manager takes over by itself: no command is typed from here on"
# pgbench's last progress line before the crash: "progress: 4.0 s, 312.5 tps, lat ..."
TPS_BEFORE=$(grep -h '^progress:' "$WORK/pgbench.log" 2>/dev/null | tail -n 1 | awk '{print $4}' || true)
drill_crash alpha beta
# the same load on beta, through the same VIP, for 3 s
tps=$(in_ns client pgbench -n -c 4 -T 3 -h "$VIP" -p "$PGPORT" -U postgres postgres 2>/dev/null |
	awk '/^tps/ {print $3}' || true)
echo
echo "  drill report: crash of the primary (alpha), failover to beta"
printf '    %-34s %6s s\n' "peer declared dead (detection)" "$(secs_since 0 "$D_DETECT")" \
	"beta primary (vote + promotion)" "$(secs_since 0 "$D_PROMOTE")" \
	"database ready (PostgreSQL up)" "$(secs_since 0 "$D_READY")" \
	"database answering on the VIP" "$(secs_since 0 "$D_VIP")"
printf '    %-34s %6s s\n' "RTO" "$(secs_since 0 "$D_VIP")"
printf '    %-34s %6s\n' "RPO: confirmed commits lost" "$D_LOST of $D_ACKED"
printf '    %-34s %6.0f\n' "pgbench on alpha before (tps)" "${TPS_BEFORE:-0}" \
	"pgbench on beta after (tps)" "${tps:-0}"
say "the VIP $VIP is now on: $(vip_where)"
log_lines beta 'Cluster manager: rule (failover|ask-vote|takeover|serve)' | head -n 4
((D_LOST == 0)) || die "$D_LOST confirmed commits are missing on beta"
status beta

step "4. Alpha comes back as secondary and resyncs from beta"
T_RS=$(now_us)
node_reboot alpha
say "alpha went down as primary, so it may hold writes beta never got: its activity log's"
say "extents go into its bitmap, and only they and beta's changes are resynced from beta"
wait_resynced alpha 60 say
say "the pair is in sync again $(secs_since "$T_RS") s after alpha's restart; beta stays primary"
say "(switchback is manual: hakctl switchover --to alpha)"
log_lines beta 'Resync finished' | tail -n 1
status alpha
status beta

step "5. hakctl drill crash-service: PostgreSQL dies on beta and is restarted in place"
"$HAKCTL" --control "$WORK/beta.ctl" drill crash-service --peer-socket "$WORK/alpha.ctl" \
	--check "PGCONNECT_TIMEOUT=2 ip netns exec ${NS[client]} psql -h $VIP -p $PGPORT -U postgres -d postgres -Atq -c 'SELECT count(*) FROM ledger'" |
	sed 's/^/  /' || die "the crash-service drill failed"
say "the group's monitor noticed, restarted PostgreSQL on beta (no failover), and the database"
say "answers on the VIP again: $(csql 'SELECT count(*) FROM ledger') ledger rows"

step "6. Standby on both nodes stops the services cleanly; the two copies are identical"
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
