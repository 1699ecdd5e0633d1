#!/usr/bin/env bash
# timeout: 240
# Overlapping writes in flight at once must land in the same order on both copies. Two fio
# clients on separate NBD connections write random data into the same 8 MiB of a pair for 10 s,
# one 4K blocks at QD32, the other 1M extents at QD8, so many writes overlap one in flight on the
# other connection, while online verifies run back to back. The primary may not start a write
# while an older overlapping one is still in flight: its disk could complete them in either
# order while the peer applies them in arrival order, and the copies would differ until the
# block is written again. Every verify must find 0 differing blocks, and both backing files
# must be byte-identical afterwards. Then the same in async mode.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
require_hakd
require_cmd fio sha256sum cmp jq

run_mode() {
	local mode=$1 pids=() p i a b
	PAIR_EXTRA="verify-alg crc32c" PAIR_BLANK=1 pair_setup "$mode" 64M
	pair_report_logs
	wait_repl alpha link Connected 20
	hk alpha primary db >/dev/null || fail "primary on alpha failed"
	wait_synced 30
	for i in 1 2; do
		# one client writes 4K blocks, the other 1M extents: a large buffered write may be
		# handed to a kernel worker and finish after a small one submitted later
		fio --name="ov$i" --ioengine=nbd --uri="$(node_uri alpha)" --rw=randwrite \
			--bs="$([[ $i == 1 ]] && echo 4k || echo 1M)" --iodepth="$([[ $i == 1 ]] && echo 32 || echo 8)" \
			--offset=8M --size=8M --time_based --runtime=10 --norandommap \
			--randrepeat=0 --refill_buffers --output-format=json \
			--output="$WORK/fio-$mode-$i.json" >"$WORK/fio-$mode-$i.err" 2>&1 &
		pids+=($!)
		track_pid $!
	done
	# Verifies during the load: a block whose copies differ after both writes completed is a
	# divergence (blocks written during a verify's pass are skipped, not counted). The
	# divergence is short-lived here (the next overlapping write heals it), so it is looked
	# for while it exists. In async mode the load outruns the peer: a full send buffer drops
	# the link (pull-ahead) and a resync follows, so a verify may not start or may be cut
	# short; only verifies that finished count.
	local nv=0 diff=0 d end=$((SECONDS + 40))
	while pid_alive "${pids[0]}" && ((nv < 60 && SECONDS < end)); do
		if ! hk alpha verify db >/dev/null 2>&1; then
			sleep 0.1
			continue
		fi
		wait_for "[[ \$(repl alpha verify.running) == false ]]" 30 || fail "a verify hung"
		d=$(repl alpha verify.differing_blocks)
		diff=$((diff + d))
		[[ $(repl alpha verify.interrupted) == true ]] || nv=$((nv + 1))
	done
	for p in "${pids[@]}"; do
		wait "$p" || fail "fio failed: $(cat "$WORK"/fio-"$mode"-*.err)"
	done
	a=$(jq '.jobs[0].write.total_ios' "$WORK/fio-$mode-1.json")
	b=$(jq '.jobs[0].write.total_ios' "$WORK/fio-$mode-2.json")
	log "$mode: $a 4K and $b 1M overlapping writes into 8 MiB; $nv verifies found $diff differing blocks"
	# Two in sync mode; async may spend most of the load dropping and resyncing.
	((nv >= 2)) || { ((nv >= 1)) && [[ $mode == async ]]; } || fail "only $nv verifies finished during the load"
	((diff == 0)) || fail "$mode: verifies during the load found $diff differing blocks"
	((a > 1000 && b > 50)) || fail "too few writes ran ($a, $b)"
	wait_repl alpha in_flight_writes 0 30
	wait_synced 30
	if ! cmp -s "$(backing alpha)" "$(backing beta)"; then
		cmp -l "$(backing alpha)" "$(backing beta)" | awk '{print int(($1 - 1) / 4096)}' |
			uniq | head -5 >"$WORK/diff"
		fail "$mode: the copies differ in blocks $(tr '\n' ' ' <"$WORK/diff")"
	fi
	log "$mode: copies identical ($(sha256sum <"$(backing alpha)" | cut -c1-16))"
	node_stop alpha
	node_stop beta
}

if [[ -n ${REPL_MODE:-} ]]; then
	run_mode "$REPL_MODE"
	exit 0
fi
for m in sync async; do
	REPL_MODE=$m bash "$0" || fail "mode $m failed"
done
log "PASS"
