#!/bin/bash
# Failover benchmark: DRILLS crash drills on the PostgreSQL pair of `make demo`
# (scripts/hakpair.sh: alpha, beta, a witness and a client in network namespaces, heartbeats at
# the default 200 ms interval and 1 s deadtime, sync mode, PostgreSQL and the VIP in a group).
# Each drill runs pgbench and the commit-recording client against the VIP, cuts the primary's
# power (SIGKILL of its hakd, PostgreSQL and nbdfuse, its links down), and measures from the cut:
# the survivor declaring the peer dead (detection), its promotion, PostgreSQL up, and the
# database answering on the VIP from the client namespace (the RTO). The crashed node then
# reboots, resyncs, and is the survivor of the next drill, so the victims alternate.
#
#   bench/failover.sh           (DRILLS=10, HAK_BUILD=build/rel by default)
#
# Output: one "bench: drill N ..." line per drill, then
#   RESULT failover detect_ms=<median> rto_ms=<median> rto_max_ms=<max> lost_tx=<total>
#   RESULT failover_steps promote_ms=<median> db_ready_ms=<median> drills=<N>
# lost_tx counts the commits the client saw confirmed that are missing afterwards, over all
# drills. Not part of `make check`: the numbers are for reading, never a pass/fail.
set -euo pipefail
cd "$(dirname "$0")/.."
PAIR_TAG=bench-failover
# shellcheck source=scripts/hakpair.sh
. scripts/hakpair.sh
DRILLS=${DRILLS:-10}

if [[ ! -x $HAKD || ! -x $HAKCTL ]]; then
	echo "bench: building $BUILD" >&2
	make -s BUILD="${HAK_BUILD:-build/rel}" bins >&2
fi

# median of the arguments (integers)
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
max() { printf '%s\n' "$@" | sort -n | tail -n 1; }

pair_init
pair_net
pair_start
pair_first_primary alpha
echo "bench: $DRILLS crash drills, work directory $WORK, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2

DET=() PRO=() RDY=() RTO=()
primary=alpha
for ((d = 1; d <= DRILLS; d++)); do
	survivor=beta
	[[ $primary == beta ]] && survivor=alpha
	load_start
	sleep 3
	drill_crash "$primary" "$survivor"
	DET+=($((D_DETECT / 1000)))
	PRO+=($((D_PROMOTE / 1000)))
	RDY+=($((D_READY / 1000)))
	RTO+=($((D_VIP / 1000)))
	echo "bench: drill $d: $primary crashed, $survivor took over: detect $((D_DETECT / 1000)) ms," \
		"promote $((D_PROMOTE / 1000)) ms, PostgreSQL up $((D_READY / 1000)) ms, VIP answering" \
		"$((D_VIP / 1000)) ms; $D_LOST of $D_ACKED confirmed commits missing" >&2
	node_reboot "$primary"
	wait_resynced "$primary" 120
	wait_until 60 is_group "$survivor" started || die "the group is not running on $survivor"
	primary=$survivor
done
echo "RESULT failover detect_ms=$(median "${DET[@]}") rto_ms=$(median "${RTO[@]}")" \
	"rto_max_ms=$(max "${RTO[@]}") lost_tx=$D_LOST"
echo "RESULT failover_steps promote_ms=$(median "${PRO[@]}") db_ready_ms=$(median "${RDY[@]}")" \
	"drills=$DRILLS"
