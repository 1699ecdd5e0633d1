#!/usr/bin/env bash
# timeout: 360
# Invariant 1 (DESIGN.md): in sync mode no write acknowledged to a client is missing on the node
# that becomes primary after a single failure. KILL_CYCLES (default 20) cycles, the primary
# alternating between alpha and beta:
#   a hak-ledger storm (QD 16) on the primary; after 0.5-2 s kill -9 of the primary; the storm
#   ends with "server disconnected"; the survivor (UpToDate) is promoted without --force and the
#   ledger (one file for all cycles, so generations only grow) verifies against it: 0 missing,
#   0 corrupt; the killed node restarts as a crashed primary, puts its activity log's extents
#   into its bitmap and is resynced from the survivor by bitmap (issue 4: never the whole volume,
#   only the storm's region can differ), and the pair is in sync again before the next cycle.
# At the end both nodes stop, the backing files are identical and the ledger verifies on both.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
require_hakd
require_cmd sha256sum jq

LEDGER=$TOOLS/hak-ledger
[[ -x $LEDGER ]] || fail "$LEDGER is not built (make BUILD=${HAK_BUILD#"$REPO"/} SAN=1 bins)"
CYCLES=${KILL_CYCLES:-20}
# 16384 blocks of 4 KiB: 64 MiB of a 128 MiB volume; the rest stays a hole and resyncs as flags.
BLOCKS=${KILL_BLOCKS:-16384}
L=$WORK/cycles.ledger
VOL_BYTES=$((128 * 1024 * 1024))

# verify_clean SOURCE_ARGS...: hak-ledger verify must exit 0 with 0 missing and 0 corrupt.
# Sets VERIFY_LINE.
verify_clean() {
	local out rc=0
	out=$("$LEDGER" verify --ledger "$L" "$@" 2>&1) || rc=$?
	VERIFY_LINE=$(grep '^verify:' <<<"$out" | tail -n 1) || true
	if ((rc != 0)) || [[ -z $VERIFY_LINE ]]; then
		printf '%s\n' "$out" | tail -n 15 | sed 's/^/    /'
		fail "ledger verify ($*) exited $rc: ${VERIFY_LINE:-no summary}"
	fi
	assert_eq "$(field_before "$VERIFY_LINE" missing)" 0 "missing blocks ($*)"
	assert_eq "$(field_before "$VERIFY_LINE" corrupt)" 0 "corrupt blocks ($*)"
}

bitmap_resyncs() {
	grep -c 'Starting a bitmap-based resync as target' "$WORK/$1.log" || true
}

PAIR_BLANK=1 pair_setup sync $VOL_BYTES
# Registered like hakd_start's logs: their tails are printed on failure and sanitizer-checked.
HAKD_LOGS[alpha]=$WORK/alpha.log
HAKD_LOGS[beta]=$WORK/beta.log
wait_synced 30
hk alpha primary db >/dev/null || fail "promoting alpha failed"
wait_repl beta peer_role primary 10

T_START=$(date +%s.%N)
primary=alpha
survivor=beta
total_acked=0
for ((c = 1; c <= CYCLES; c++)); do
	tc=$(date +%s.%N)
	"$LEDGER" write --uri "$(node_uri "$primary")" --ledger "$L" --qd 16 --blocks "$BLOCKS" \
		--seconds 60 >"$WORK/w.out" 2>"$WORK/w.err" &
	W=$!
	track_pid "$W"
	# The kill delay counts from the first write: the NBD handshake comes first.
	wait_for "grep -q 'storms blocks' '$WORK/w.err'" 10 ||
		fail "cycle $c: the writer did not start within 10 s: $(cat "$WORK/w.err")"
	csecs=$(elapsed_since "$tc")
	delay=$(awk -v r="$RANDOM" 'BEGIN {printf "%.2f", 0.5 + 1.5 * r / 32767}')
	sleep "$delay"
	pid_alive "$W" ||
		fail "cycle $c: the writer ended before the kill: $(cat "$WORK/w.out" "$WORK/w.err")"
	rs_before=$(bitmap_resyncs "$primary")
	node_kill9 "$primary"
	wait_for "! pid_alive $W" 15 || fail "cycle $c: the writer still runs 15 s after the kill"
	rc=0
	wait "$W" || rc=$?
	sum=$(grep '^ledger:' "$WORK/w.out") ||
		fail "cycle $c: the writer printed no summary: $(cat "$WORK/w.out" "$WORK/w.err")"
	assert_eq "$rc" 0 "cycle $c: writer exit status ($sum)"
	assert_contains "$sum" "stopped: server disconnected" "cycle $c: writer summary"
	acked=$(field_before "$sum" "writes acknowledged")
	((acked > 0)) || fail "cycle $c: no write was acknowledged in ${delay}s: $(cat "$WORK/w.err")"
	total_acked=$((total_acked + acked))

	# The survivor sees the link go (the kernel closed the dead process' sockets) and, being
	# UpToDate, may take over without --force.
	wait_for "[[ \$(repl $survivor link) != Connected ]]" 10 ||
		fail "cycle $c: $survivor still believes it is connected to the killed $primary"
	assert_eq "$(repl "$survivor" disk)" UpToDate "cycle $c: disk of the survivor $survivor"
	out=$(hk "$survivor" primary db 2>&1) ||
		fail "cycle $c: promoting the survivor $survivor without --force failed: $out"
	verify_clean --uri "$(node_uri "$survivor")"
	vline=$VERIFY_LINE

	# The killed node returns as a secondary that crashed as primary: a bitmap resync target.
	tr=$(date +%s.%N)
	node_start "$primary"
	wait_synced 60
	rsecs=$(elapsed_since "$tr")
	assert_eq "$(repl "$primary" role)" secondary "cycle $c: role of the restarted $primary"
	assert_eq "$(repl "$primary" crashed_primary)" false "cycle $c: crashed_primary after resync"
	rbytes=$(repl "$primary" bytes_resynced)
	# Only the storm's region can differ: the AL's extents and both bitmaps lie inside it.
	assert_le "$rbytes" $((BLOCKS * 4096)) "cycle $c: bytes resynced to $primary"
	rs_after=$(bitmap_resyncs "$primary")
	((rs_after >= rs_before + 1)) ||
		fail "cycle $c: the restarted $primary did not log a bitmap resync as target" \
			"($rs_before before, $rs_after after)"
	log "cycle $c/$CYCLES: killed $primary after ${delay}s with $acked writes acked; $survivor" \
		"promoted, ${vline#verify: }; bitmap resync of $rbytes bytes in ${rsecs}s;" \
		"writer connected in ${csecs}s; cycle $(elapsed_since "$tc")s"
	tmp=$primary
	primary=$survivor
	survivor=$tmp
done
log "$CYCLES cycles, $total_acked acknowledged writes, in $(elapsed_since "$T_START")s"

# Quiesce: demote the primary so both stop as clean secondaries, then compare the copies.
hk "$primary" secondary db >/dev/null || fail "demoting $primary failed"
wait_repl "$survivor" peer_role secondary 10
node_stop alpha
node_stop beta
sa=$(sha256sum <"$(backing alpha)")
sb=$(sha256sum <"$(backing beta)")
assert_eq "$sa" "$sb" "sha256 of alpha's and beta's backing files"
verify_clean --file "$(backing alpha)"
log "alpha's file: ${VERIFY_LINE#verify: }"
verify_clean --file "$(backing beta)"
log "beta's file: ${VERIFY_LINE#verify: }"
log "all checks passed"
