#!/usr/bin/env bash
# timeout: 300
# Bad NBD input costs nothing else (DESIGN.md invariant 4). tests/tools/nbd-badclient sends, one case
# at a time: garbage and unknown client flags, a bad option magic, unknown option 99, STARTTLS, a
# 100 MB option, GO for an unknown export, SET_META_CONTEXT before STRUCTURED_REPLY, then in
# transmission: out-of-range, misaligned, unknown, wrongly flagged and oversized requests, a bad
# request magic, a hang-up in the middle of a WRITE payload and 10000 unread 1 MiB READs. Every case
# checks the exact reply the NBD spec requires, and the memory cases check hakd's RSS. Meanwhile a
# well-behaved qemu-io client keeps writing and verifying its own region. At the end hakd is alive,
# hakctl status answers, and hakd stops cleanly.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_cmd qemu-io
BADCLIENT=$TOOLS/nbd-badclient
[[ -x $BADCLIENT ]] || fail "$BADCLIENT is not built (make BUILD=... bins builds tests/tools)"

MiB=$((1024 * 1024))
IMG=$WORK/vol.img
sparse_file "$IMG" $((64 * MiB))
hakd_start vol "$IMG"
log "hakd RSS at start: $(rss_kb "$HAKD_PID") KiB"

# The well-behaved client: 8 MiB at 32M, a new pattern per round, written then verified, each round
# on a new connection; stops when $WORK/stop appears (bounded to 2000 rounds / 240 s anyway).
good_client() {
	local i p t0=$SECONDS
	for ((i = 1; i <= 2000 && SECONDS - t0 < 240; i++)); do
		[[ -e $WORK/stop ]] && break
		p=$(printf '0x%02x' $((i % 250 + 1)))
		if ! qemu-io -f raw -c "write -P $p 32M 4M" -c "aio_write -P $p 36M 4M" -c aio_flush \
			-c "read -P $p 32M 8M" "$HAKD_URI" >"$WORK/good.out" 2>&1 ||
			grep -qiE 'fail|error' "$WORK/good.out"; then
			cp "$WORK/good.out" "$WORK/good.failed"
			echo "round $i" >>"$WORK/good.failed"
			return 1
		fi
		echo "$i $p" >"$WORK/good.rounds"
	done
}
good_client &
GOOD=$!
track_pid $GOOD
wait_for "[[ -s '$WORK/good.rounds' ]]" 30 || fail "the well-behaved client made no progress"

CASES=(client-flags-garbage client-flags-unknown opt-bad-magic opt-unknown opt-starttls opt-too-big
	go-unknown-export go-unknown-export-message meta-before-sr tx-errors bad-request-magic
	disconnect-mid-write flood)
PIDARG=(--pid "$HAKD_PID")
failed=()
for c in "${CASES[@]}"; do
	rc=0
	t0=$(date +%s.%N)
	timeout 120 "$BADCLIENT" "$c" "$HAKD_SOCK" "${PIDARG[@]}" >"$WORK/bad.$c.out" 2>&1 || rc=$?
	sed "s/^/    /" "$WORK/bad.$c.out"
	log "case $c: exit status $rc, $(elapsed_since "$t0")s"
	((rc == 0)) || failed+=("$c")
	hakd_alive vol
	[[ -e $WORK/good.failed ]] && break
done
log "hakd RSS after the bad clients: $(rss_kb "$HAKD_PID") KiB (peak $(rss_kb "$HAKD_PID" VmHWM) KiB)"

# The well-behaved client kept working through all of it.
touch "$WORK/stop"
rc=0
wait_for "! pid_alive $GOOD" 60 || fail "the well-behaved client did not stop"
wait $GOOD || rc=$?
if [[ -e $WORK/good.failed ]]; then
	cat "$WORK/good.failed"
	fail "the well-behaved client failed while bad clients were connected"
fi
((rc == 0)) || fail "the well-behaved client exited with status $rc"
read -r rounds pat <"$WORK/good.rounds"
((rounds >= 3)) || fail "the well-behaved client completed only $rounds rounds"
out=$(qemu-io -f raw -r -c "read -P $pat 32M 8M" "$HAKD_URI" 2>&1) || fail "final read: $out"
assert_not_contains "$out" "fail" "final read of the well-behaved client's data"
log "well-behaved client: $rounds rounds, all verified; its last pattern $pat is in place"

((${#failed[@]} == 0)) || fail "bad-input cases with a wrong server answer: ${failed[*]}"
hakd_alive vol
if [[ $HAK_TEST_SERVER == hakd ]]; then
	st=$(hakctl_status vol --json) || fail "hakctl status does not answer after the bad input"
	echo "$st"
	jq -e '.volumes | length == 1' <<<"$st" >/dev/null || fail "hakctl status --json: $st"
	# tx-errors alone sends 14 requests that must be rejected.
	errs=$(jq '.volumes[0].errors' <<<"$st")
	((errs >= 14)) || fail "hakctl reports $errs errors after at least 14 rejected requests"
	# Every bad client is gone: nothing may stay connected or in flight.
	vj() { hakctl_status vol --json | jq -r ".volumes[0].$1"; }
	wait_for '[[ $(vj clients) == 0 ]]' 10 ||
		fail "hakctl reports $(vj clients) clients after every client disconnected"
	if [[ $(vj in_flight) != null ]]; then
		wait_for '[[ $(vj in_flight) == 0 ]]' 10 ||
			fail "hakctl reports $(vj in_flight) requests in flight with no client connected"
	fi
fi
hakd_stop vol
log "all checks passed"
