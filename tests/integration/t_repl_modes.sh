#!/usr/bin/env bash
# timeout: 240
# Replication in each mode (sync, memsync, async), one fresh pair per mode, one after the other,
# and sync once more with direct-io on both nodes (O_DIRECT backing files: every payload the
# secondary writes and every run the resync source reads must be aligned, or the kernel says EINVAL):
#   1. both nodes start fresh (no-sync by rule both-fresh); 'primary --force' on alpha makes its
#      data the reference and a full resync to beta follows;
#   2. beta, the secondary, refuses NBD clients with a reason that names its role;
#   3. fio random 4k writes at QD32 for 4 s over NBD, a 1 MiB sequential pattern write and a flush
#      against alpha; the peer acknowledges them (sync/memsync: no second resync was needed);
#      With direct-io, alpha then disconnects, writes 4 MiB and reconnects: a resync of data;
#   4. once both sides are in sync with nothing in flight, both nodes stop cleanly and the two
#      backing files must be byte-identical and hold the pattern, and neither log reports a
#      failed write.
# Each mode runs in a child invocation of this script (own namespaces, scratch directory and
# cleanup), so a failing mode leaves nothing behind for the next.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
require_hakd
require_cmd fio qemu-io nbdinfo sha256sum jq cmp

MiB=$((1024 * 1024))
SIZE=128M
PAT_OFF=$((64 * MiB))

# refusal_text NODE: what an NBD client hears when it asks NODE for the export (empty on success).
refusal_text() {
	local out rc=0
	out=$(LIBNBD_DEBUG=1 timeout 20 nbdinfo "$(node_uri "$1")" 2>&1) || rc=$?
	((rc != 0)) || return 0
	grep -E 'server error message|nbdinfo:' <<<"$out" || true
}

# settled: both in sync, nothing left in flight to the peer (async acknowledges before the peer).
settled() {
	wait_synced 60
	wait_repl alpha in_flight_writes 0 30
	wait_synced 30
}

run_mode() {
	local mode=$1 t0 rs0 out a b
	if [[ $mode == sync-direct ]]; then
		mode=sync
		PAIR_EXTRA="direct-io yes"
	fi
	pair_setup "$mode" "$SIZE"
	pair_report_logs
	wait_repl alpha link Connected 20
	assert_eq "$(repl beta disk)" Inconsistent "beta's disk before the first promotion"

	# 1. The forced promotion makes alpha the reference; beta takes a full resync.
	t0=$(date +%s.%N)
	out=$(hk alpha primary db --force 2>&1) || fail "primary --force on alpha: $out"
	wait_synced 60
	log "$mode: initial full sync done in $(elapsed_since "$t0") s"
	assert_eq "$(repl alpha role)" primary "alpha's role"
	assert_eq "$(repl beta role)" secondary "beta's role"
	assert_eq "$(repl alpha mode)" "$mode" "alpha's mode"
	rs0=$(repl alpha resyncs_completed)
	assert_eq "$rs0" 1 "resyncs completed after the initial sync"
	assert_eq "$(repl alpha bytes_resynced)" $((128 * MiB)) "bytes of the initial full resync"

	# 2. Only the primary serves.
	out=$(refusal_text beta)
	[[ -n $out ]] || fail "beta (secondary) accepted an NBD client"
	assert_contains "$out" secondary "beta's NBD refusal"
	[[ -z $(refusal_text alpha) ]] || fail "alpha (primary) refused an NBD client: $(refusal_text alpha)"

	# 3. Writes through the primary.
	(cd "$WORK" && fio --name="rw-$mode" --ioengine=nbd --uri="$(node_uri alpha)" \
		--rw=randwrite --bs=4k --iodepth=32 --size="$SIZE" --time_based --runtime=4 \
		--randrepeat=0 --refill_buffers --end_fsync=1 --output-format=json \
		--output="$WORK/fio-$mode.json") >"$WORK/fio-$mode.out" 2>&1 ||
		fail "fio against alpha ($mode) failed: $(cat "$WORK/fio-$mode.out")"
	jq -e '[.jobs[].error] | all(. == 0)' "$WORK/fio-$mode.json" >/dev/null ||
		fail "fio ($mode) reported an error: $(jq -c '[.jobs[].error]' "$WORK/fio-$mode.json")"
	local kib iops
	kib=$(jq '[.jobs[].write.io_kbytes] | add' "$WORK/fio-$mode.json")
	iops=$(jq '[.jobs[].write.iops] | add | floor' "$WORK/fio-$mode.json")
	((kib >= 4 * 100)) || fail "fio ($mode) wrote only $kib KiB in 4 s"
	out=$(qemu-io -f raw -c "write -P 0xa5 $PAT_OFF 1M" -c flush "$(node_uri alpha)" 2>&1) ||
		fail "qemu-io pattern write + flush on alpha ($mode): $out"
	log "$mode: fio wrote $kib KiB ($iops IOPS), plus 1 MiB of 0xa5 at $PAT_OFF and a flush"

	if [[ -n ${PAIR_EXTRA:-} ]]; then
		# 3b. A resync of real data (the initial one only punched holes): 4 MiB written while
		# disconnected reach beta as RS_DATA runs, read and written with O_DIRECT.
		wait_synced 60
		rs0=$(repl alpha bytes_resynced)
		out=$(hk alpha disconnect db 2>&1) || fail "disconnect on alpha: $out"
		wait_repl alpha link StandAlone 20
		out=$(qemu-io -f raw -c "write -P 0x3c $((PAT_OFF + 8 * MiB)) 4M" -c flush \
			"$(node_uri alpha)" 2>&1) || fail "qemu-io write on disconnected alpha ($mode): $out"
		out=$(hk alpha connect db 2>&1) || fail "connect on alpha: $out"
		wait_synced 60
		a=$(($(repl alpha bytes_resynced) - rs0))
		((a >= 4 * MiB)) || fail "the resync after the disconnect moved $a bytes, want >= 4 MiB"
		log "$mode ($PAIR_EXTRA): resync after the disconnect moved $a bytes"
		rs0=$(repl alpha resyncs_completed)
	fi
	settled
	if [[ $mode != async ]]; then
		# The writes reached beta through the replication stream, not through a later resync.
		assert_eq "$(repl alpha resyncs_completed)" "$rs0" "resyncs completed after the writes ($mode)"
		a=$(repl alpha ack_latency_ms)
		b=$(repl alpha ack_latency_max_ms)
		awk -v a="$a" 'BEGIN {exit !(a > 0)}' || fail "alpha saw no peer ack latency ($a ms) in $mode mode"
		awk -v a="$a" -v b="$b" 'BEGIN {exit !(b >= a)}' ||
			fail "alpha's largest ack latency ($b ms) is below its mean ($a ms) in $mode mode"
	else
		log "async: resyncs completed $(repl alpha resyncs_completed) (the send buffer may overflow)"
	fi

	# 4. Identical copies.
	node_stop alpha
	node_stop beta
	out=$(grep -h -E 'hakd err:|failed to write|failed a ' "$WORK/alpha.log" "$WORK/beta.log" | head -3 || true)
	[[ -z $out ]] || fail "a node reported failed writes ($mode${PAIR_EXTRA:+, $PAIR_EXTRA}): $out"
	a=$(sha256sum <"$(backing alpha)")
	b=$(sha256sum <"$(backing beta)")
	assert_eq "$b" "$a" "sha256 of beta's backing file vs alpha's ($mode)"
	pattern_file "$WORK/pat" 1M 0xa5
	cmp -s -n "$MiB" -i "$PAT_OFF:0" "$(backing beta)" "$WORK/pat" ||
		fail "beta's backing file does not hold the 0xa5 pattern at $PAT_OFF ($mode)"
	[[ $a != "$(head -c "$SIZE" /dev/zero | sha256sum)" ]] || fail "the copies are all zeros ($mode)"
	log "$mode: copies identical after the writes"
}

if [[ -n ${REPL_MODE:-} ]]; then
	run_mode "$REPL_MODE"
	exit 0
fi

for m in sync memsync async sync-direct; do
	t0=$(date +%s.%N)
	REPL_MODE=$m bash "$0" || fail "mode $m failed"
	log "mode $m passed in $(elapsed_since "$t0") s"
done
