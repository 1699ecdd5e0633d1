#!/usr/bin/env bash
# RDMA against TCP, indicative only. Runs in the Debian kernel guest (QEMU TCG, Soft-RoCE):
#
#   tests/guest/guest.sh --timeout 900 -- env HAK_BUILD=build/rel HAK_IO_ENGINE=uring \
#       bash bench/rdma_guest.sh
#
# For each transport (TRANSPORTS, default "tcp rdma") a sync pair in one namespace
# (PAIR_ONE_NS, _pair_one_ns_setup in tests/integration/pair.sh: rdma loops inside one rxe
# device, tcp through lo), alpha primary; hak-ledger storms of SECS seconds (default 5) of 4 KiB
# writes at QD1 and QD32 against alpha's NBD socket; then beta stopped, 16 MiB written on alpha,
# beta restarted, and the bitmap resync's own duration from alpha's resync-end event. Output:
#   RESULT transport=<t> qd1_iops=<x> qd32_iops=<y> resync_mib_s=<z>
# An emulated CPU runs both nodes, both kernels' network paths and rxe's software RoCE; on real
# hardware the adapter does what rxe does in software, so these numbers say nothing about it.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/../tests/integration/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/../tests/integration/pair.sh"
require_hakd
LEDGER=$TOOLS/hak-ledger
SECS=${SECS:-5}

# storm QD: acknowledged 4 KiB writes per second on alpha at queue depth QD.
storm() {
	local out
	out=$("$LEDGER" write --uri "$(node_uri alpha)" --ledger "$WORK/l-$RANDOM" --qd "$1" \
		--blocks 4096 --seconds "$SECS" 2>/dev/null | grep '^ledger:') ||
		fail "the QD$1 storm printed no summary"
	[[ $out =~ ([0-9]+)\ writes\ acknowledged ]] || fail "no count in: $out"
	echo $((BASH_REMATCH[1] / SECS))
}

TOP=$WORK
for t in ${TRANSPORTS:-tcp rdma}; do
	# Each transport its own files and link (the addresses are the same).
	WORK=$TOP/$t
	mkdir -p "$WORK"
	PAIR_SID=$(printf '%06x' $((RANDOM * 256 + RANDOM % 256)))
	PAIR_TRANSPORT=$t PAIR_ONE_NS=1 PAIR_BLANK=1 pair_setup sync 64M
	wait_synced 60
	hk alpha primary db >/dev/null || fail "promoting alpha failed"
	wait_repl beta peer_role primary 10
	q1=$(storm 1)
	q32=$(storm 32)
	node_stop beta
	"$LEDGER" write --uri "$(node_uri alpha)" --ledger "$WORK/l-rs" --qd 32 --blocks 4096 \
		--max-writes 4096 --region-offset $((32 << 20)) --seconds 60 >/dev/null 2>&1 ||
		fail "writing the resync's 16 MiB failed"
	node_start beta
	wait_synced 120
	secs=$(grep -o 'resync-end volume:db peer:beta direction:source bytes:[0-9]* seconds:[0-9.]*' \
		"$WORK/alpha.log" | tail -n 1 | sed 's/.*seconds://; s/\.$//')
	bytes=$(grep -o 'resync-end volume:db peer:beta direction:source bytes:[0-9]*' \
		"$WORK/alpha.log" | tail -n 1 | sed 's/.*bytes://')
	rate=$(awk -v b="$bytes" -v s="$secs" 'BEGIN { printf "%.1f", b / 1048576 / s }')
	echo "RESULT transport=$t qd1_iops=$q1 qd32_iops=$q32 resync_mib_s=$rate (${bytes} bytes in ${secs}s)"
	hk alpha secondary db >/dev/null || fail "demoting alpha failed"
	node_stop alpha
	node_stop beta
	[[ $t == rdma ]] && rdma link delete "rxe-$PAIR_SID"
	ip link del "ha1-$PAIR_SID"
done
