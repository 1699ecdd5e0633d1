#!/usr/bin/env bash
# Runs inside the guest (tests/integration/t_kernel.sh boots it): what replication does over TCP
# (t_repl_verify.sh, t_repl_csums.sh, the async and memsync modes), done over RDMA (Soft-RoCE,
# the one-device layout of _pair_one_ns_setup in pair.sh), kept short:
#   1. a sync pair with csums yes: 8 MiB written through alpha; 3 blocks of beta's backing file
#      changed behind hakd's back; 'hakctl verify' on alpha finds exactly those 3 blocks (as
#      the 3 ranges they are) and marks them; 'hakctl resync' repairs them;
#   2. the same pair, apart: the same 8 MiB written again plus 68 KiB of new data; on reconnect
#      the checksum resync sends exactly those 68 KiB and finds the rest equal; copies equal;
#   3. an async pair and 4. a memsync pair: a 4 s hak-ledger storm on alpha each, copies equal
#      at the end and the ledger verifies on beta's copy with 0 missing.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/../integration/pair.sh"
require_hakd
require_cmd sha256sum jq rdma nbdcopy qemu-io dd
# shellcheck source=tests/integration/ledger.sh
. "$(dirname "$0")/../integration/ledger.sh"

MiB=$((1024 * 1024))
BS=4096
BLOCKS=(10 700 1500)
WANT_RANGES='[{"length":4096,"offset":40960},{"length":4096,"offset":2867200},{"length":4096,"offset":6144000}]'
DIFF=$((68 * 1024))
TOP=$WORK

# pair_rdma MODE EXTRA: a fresh blank pair over RDMA of MODE in its own WORK (and veth, rxe).
pair_rdma() {
	WORK=$TOP/$1
	mkdir -p "$WORK"
	PAIR_SID=$(printf '%06x' $((RANDOM * 256 + RANDOM % 256)))
	PAIR_TRANSPORT=rdma PAIR_BLANK=1 PAIR_EXTRA=$2 pair_setup "$1" 32M
	pair_report_logs
	wait_synced 60
	hk alpha primary db >/dev/null || fail "promoting alpha ($1) failed"
	wait_repl beta peer_role primary 10
}

# pair_done: both stopped, copies equal, the pair's device and veth gone.
pair_done() {
	node_stop alpha
	node_stop beta
	assert_eq "$(sha256sum <"$(backing beta)")" "$(sha256sum <"$(backing alpha)")" \
		"sha256 of beta's copy vs alpha's ($PAIR_MODE)"
	rdma link delete "rxe-$PAIR_SID"
	ip link del "ha1-$PAIR_SID"
}

verify_run() {
	local out
	out=$(hk "$1" verify db 2>&1) || fail "verify on $1: $out"
	wait_for "[[ \$(repl $1 verify.running) == false ]]" 60 ||
		fail "the verify on $1 did not finish in 60 s: $(repl "$1" verify)"
	hk "$1" status --json | jq -c '.volumes[0].replication.verify'
}

# ---- 1. verify over RDMA --------------------------------------------------------------------
pair_rdma sync "csums yes"
head -c $((8 * MiB)) /dev/urandom >"$WORK/rand"
nbdcopy --flush "$WORK/rand" "$(node_uri alpha)" || fail "nbdcopy into alpha's export failed"
wait_synced 30
for b in "${BLOCKS[@]}"; do
	dd if=/dev/urandom of="$(backing beta)" bs=64 count=1 seek=$(((b * BS + 1000) / 64)) \
		conv=notrunc,fsync status=none || fail "dd into beta's backing file failed"
done
t0=$(date +%s.%N)
st=$(verify_run alpha)
log "verify over RDMA in $(elapsed_since "$t0") s: $st"
assert_eq "$(jq -r .differing_blocks <<<"$st")" "${#BLOCKS[@]}" "differing blocks found by verify"
assert_eq "$(jq -c .first_ranges <<<"$st")" "$WANT_RANGES" "ranges found by verify"
assert_eq "$(jq -r .done_bytes <<<"$st")" $((32 * MiB)) "bytes verified"
assert_eq "$(repl alpha out_of_sync_bytes)" $((${#BLOCKS[@]} * BS)) "alpha's out_of_sync_bytes after verify"
out=$(hk alpha resync db 2>&1) || fail "resync on alpha: $out"
wait_synced 60
assert_eq "$(sha256sum <"$(backing beta)")" "$(sha256sum <"$(backing alpha)")" \
	"sha256 of beta's copy vs alpha's after the verify's resync"

# ---- 2. checksum resync over RDMA -----------------------------------------------------------
out=$(hk alpha disconnect db 2>&1) || fail "disconnect on alpha: $out"
wait_repl alpha link StandAlone 10
nbdcopy --flush "$WORK/rand" "$(node_uri alpha)" || fail "nbdcopy into alpha's export failed"
out=$(qemu-io -f raw -c "write -P 0x5c 1M 4k" -c "write -P 0x5d 5M 64k" -c flush \
	"$(node_uri alpha)" 2>&1) || fail "qemu-io writes to alpha failed: $out"
assert_eq "$(repl alpha out_of_sync_bytes)" $((8 * MiB)) "alpha's out_of_sync_bytes while apart"
t0=$(date +%s.%N)
out=$(hk alpha connect db 2>&1) || fail "connect on alpha: $out"
wait_synced 60
lr=$(hk alpha status --json | jq -c '.volumes[0].replication.last_resync')
log "checksum resync over RDMA in $(elapsed_since "$t0") s: $lr"
assert_eq "$(jq -r .csums <<<"$lr")" true "the resync compared checksums"
assert_eq "$(jq -r .bytes_marked <<<"$lr")" $((8 * MiB)) "bytes marked for the resync"
assert_eq "$(jq -r .bytes_sent <<<"$lr")" "$DIFF" "bytes of data the resync sent"
assert_eq "$(jq -r .bytes_equal <<<"$lr")" $((8 * MiB - DIFF)) "bytes the resync found equal"
hk alpha secondary db >/dev/null || fail "demoting alpha failed"
pair_done

# ---- 3, 4. async and memsync storms over RDMA -----------------------------------------------
for mode in async memsync; do
	pair_rdma "$mode" ""
	out=$("$LEDGER" write --uri "$(node_uri alpha)" --ledger "$WORK/l" --qd 8 --blocks 4096 \
		--seconds 4 2>&1) || fail "the $mode storm failed: $(tail -n 3 <<<"$out")"
	sum=$(grep '^ledger:' <<<"$out") || fail "the $mode storm printed no summary: $out"
	[[ $sum =~ ([0-9]+)\ writes\ acknowledged.*\ ([0-9]+)\ failed ]] || fail "no counts in: $sum"
	((BASH_REMATCH[1] > 0)) || fail "no write acknowledged in the $mode storm: $sum"
	assert_eq "${BASH_REMATCH[2]}" 0 "failed writes in the $mode storm"
	wait_synced 60
	log "$mode storm over RDMA: $sum"
	hk alpha secondary db >/dev/null || fail "demoting alpha ($mode) failed"
	wait_repl beta peer_role secondary 10
	pair_done
	out=$("$LEDGER" verify --ledger "$WORK/l" --file "$(backing beta)" 2>&1) ||
		fail "ledger verify on beta's copy ($mode) failed: $(tail -n 3 <<<"$out")"
	line=$(grep '^verify:' <<<"$out" | tail -n 1)
	[[ $line =~ \ 0\ missing,\ 0\ corrupt$ ]] || fail "ledger verify on beta's copy ($mode): $line"
	log "$mode: $line"
done
log "PASS: over RDMA, verify found exactly the ${#BLOCKS[@]} changed blocks, the checksum resync sent $DIFF of $((8 * MiB)) bytes, async and memsync storms converged with 0 missing"
