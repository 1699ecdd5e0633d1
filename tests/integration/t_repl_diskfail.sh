#!/usr/bin/env bash
# timeout: 240
# Disk failure on the primary (on-io-error), with real EIO from the kernel: alpha's backing
# store is a FUSE file (nbdfuse) served by nbdkit's file plugin behind its error filter, which
# fails every request while $WORK/inject exists. No device-mapper is needed (containers and this
# CI have none).
#
# detach (default), sync mode:
#   1. a ledger storm (QD 16) on alpha; after 2 s the injection starts: alpha detaches its disk
#      (Diskless, reason in the status, a "detach" event, the local-io-error hook runs) and the
#      storm goes on through beta without a single failed write;
#   2. the ledger, read back through alpha (reads forwarded to beta) and from beta's backing
#      file, misses nothing;
#   3. with the fault removed, 'hakctl attach' pulls the whole volume back while a second storm
#      runs; alpha ends UpToDate, both copies are byte-identical and hold the whole ledger.
# async: the same storm and fault in async mode (writes acknowledged before the peer had them
#   must still reach it; writes after the detach wait for the peer); then, with the peer
#   disconnected, a Diskless primary has no copy left and answers EIO.
# pass-on: the same fault makes a client's write fail with EIO, the disk stays attached (UpToDate)
#   and the hook runs with policy pass-on.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
require_hakd
require_cmd nbdkit nbdfuse fusermount3 qemu-io sha256sum jq

LEDGER=$TOOLS/hak-ledger
[[ -x $LEDGER ]] || fail "$LEDGER is not built (make BUILD=${HAK_BUILD#"$REPO"/} SAN=1 bins)"
SIZE=$((64 * 1024 * 1024))
BLOCKS=8192 # 32 MiB of the 64 MiB volume
L=$WORK/diskfail.ledger

verify_clean() {
	local out rc=0 line
	out=$("$LEDGER" verify --ledger "$L" "$@" 2>&1) || rc=$?
	line=$(grep '^verify:' <<<"$out" | tail -n 1) || true
	if ((rc != 0)) || [[ -z $line ]]; then
		printf '%s\n' "$out" | tail -n 15 | sed 's/^/    /'
		fail "ledger verify ($*) exited $rc: ${line:-no summary}"
	fi
	assert_eq "$(field_before "$line" missing)" 0 "missing blocks ($*)"
	assert_eq "$(field_before "$line" corrupt)" 0 "corrupt blocks ($*)"
	log "verify ($*): $line"
}

# faulty_backing: restart alpha on a FUSE file over alpha.real that fails while $WORK/inject
# exists.
faulty_backing() {
	local dir=$WORK/fuse-alpha
	node_stop alpha
	mv "$WORK/alpha.img" "$WORK/alpha.real"
	mkdir -p "$dir"
	nbdfuse "$dir/disk" --command nbdkit -s --filter=error file "$WORK/alpha.real" \
		error-rate=100% error-file="$WORK/inject" </dev/null >"$WORK/nbdfuse.log" 2>&1 &
	track_pid $!
	defer "fusermount3 -u -z $dir 2>/dev/null || true"
	wait_for "[[ -f $dir/disk ]]" 10 || fail "nbdfuse did not mount $dir: $(cat "$WORK/nbdfuse.log")"
	sed -i "s|backing $WORK/alpha.img|backing $dir/disk|" "$WORK/alpha.conf"
	grep -q "backing $dir/disk" "$WORK/alpha.conf" || fail "alpha.conf still names the old backing file"
	node_start alpha
}

hook_setup() {
	cat >"$WORK/hook.sh" <<EOF
#!/bin/sh
echo "\$* \$HAK_VOLUME \$HAK_ERROR" >>"$WORK/hook.out"
EOF
	chmod +x "$WORK/hook.sh"
	PAIR_EXTRA="local-io-error-hook $WORK/hook.sh; ${1:-}"
}

run_passon() {
	hook_setup "on-io-error pass-on"
	PAIR_BLANK=1 pair_setup sync $SIZE
	pair_report_logs
	faulty_backing
	wait_synced 30
	hk alpha primary db >/dev/null || fail "promoting alpha failed"
	local out rc=0
	out=$(qemu-io -f raw -c "write -P 0x5a 1M 64k" "$(node_uri alpha)" 2>&1) ||
		fail "the write before the fault failed: $out"
	touch "$WORK/inject"
	out=$(qemu-io -f raw -c "write -P 0x6b 2M 64k" "$(node_uri alpha)" 2>&1) || rc=$?
	rm -f "$WORK/inject"
	assert_contains "$out" "Input/output error" "qemu-io's write under the fault (pass-on)"
	assert_eq "$(repl alpha disk)" UpToDate "alpha's disk after a pass-on error"
	local errs
	errs=$(hk alpha status --json | jq '.volumes[0].io_errors')
	((errs >= 1)) || fail "alpha counts $errs I/O errors after a failed write"
	wait_for "grep -q 'pass-on' '$WORK/hook.out' 2>/dev/null" 10 ||
		fail "the local-io-error hook did not run: $(cat "$WORK/hook.out" 2>/dev/null)"
	assert_contains "$(head -n 1 "$WORK/hook.out")" "db EIO write pass-on db EIO" "the hook's arguments"
	out=$(qemu-io -f raw -c "write -P 0x6b 2M 64k" "$(node_uri alpha)" 2>&1) ||
		fail "a write after the fault was removed failed: $out"
	log "pass-on: the client got EIO ($errs I/O errors counted), the disk stayed UpToDate"
}

# storm_with_fault MODE SECONDS: a pair in MODE with alpha primary on the faulty store; a ledger
# storm of SECONDS on alpha with the fault injected after 2 s. Sets ACKED.
storm_with_fault() {
	hook_setup
	PAIR_BLANK=1 pair_setup "$1" $SIZE
	pair_report_logs
	faulty_backing
	wait_synced 30
	hk alpha primary db >/dev/null || fail "promoting alpha failed"
	wait_repl beta peer_role primary 10

	"$LEDGER" write --uri "$(node_uri alpha)" --ledger "$L" --qd 16 --blocks $BLOCKS \
		--seconds "$2" >"$WORK/w1.out" 2>"$WORK/w1.err" &
	local w=$!
	track_pid $w
	wait_for "grep -q 'storms blocks' '$WORK/w1.err'" 10 || fail "the writer did not start: $(cat "$WORK/w1.err")"
	sleep 2
	touch "$WORK/inject"
	log "fault injected into alpha's backing store"
	wait_repl alpha disk Diskless 10
	wait "$w" || fail "the writer exited with $?: $(cat "$WORK/w1.err")"
	local line
	line=$(grep '^ledger:' "$WORK/w1.out") || fail "no ledger summary: $(cat "$WORK/w1.out" "$WORK/w1.err")"
	log "storm 1: $line"
	assert_eq "$(field_before "$line" failed)" 0 "writes that failed across the detach"
	assert_contains "$line" "stopped: time limit" "why the storm stopped"
	ACKED=$(field_before "$line" "writes acknowledged")
	((ACKED > 1000)) || fail "only $ACKED writes were acknowledged"
	assert_contains "$(repl alpha detach_reason)" "EIO" "alpha's detach reason"
	assert_eq "$(repl beta peer_disk)" Diskless "beta's view of alpha's disk"
	grep -Eq 'detach volume:db disk:UpToDate->Diskless reason:[a-z-]+-error-EIO' "$WORK/alpha.log" ||
		fail "no detach event in alpha's log"
	wait_for "grep -q 'detach' '$WORK/hook.out' 2>/dev/null" 10 || fail "the local-io-error hook did not run"
	log "alpha: $(grep -m 1 'Detached the backing store' "$WORK/alpha.log")"
	# The metadata no longer vouches for the disk: no consistent flag, generation 0, so a
	# restart could only make it the target of a full resync.
	local md
	md=$("$HAKCTL" --config "$WORK/alpha.conf" --node alpha dump-md db 2>&1) || fail "dump-md: $md"
	assert_contains "$(grep '^gen current' <<<"$md")" "0000000000000000" "alpha's persisted generation"
	assert_not_contains "$(grep '^flags' <<<"$md")" "CONSISTENT" "alpha's persisted flags"
	assert_not_contains "$(grep '^flags' <<<"$md")" "UPTODATE" "alpha's persisted flags"
}

run_async() {
	# DISKFAIL_MODE=memsync runs this case in memsync mode (not part of the default run).
	storm_with_fault "${DISKFAIL_MODE:-async}" 5
	wait_repl alpha in_flight_writes 0 20
	verify_clean --uri "$(node_uri alpha)"
	verify_clean --file "$(backing beta)"
	# Without the peer there is no copy left: EIO, and the disk stays Diskless.
	hk alpha disconnect db >/dev/null || fail "disconnect on alpha failed"
	wait_repl alpha link StandAlone 10
	local out rc=0
	out=$(qemu-io -f raw -c "read 0 4k" "$(node_uri alpha)" 2>&1) || rc=$?
	assert_contains "$out" "Input/output error" "a read of a Diskless primary without its peer"
	out=$(qemu-io -f raw -c "write -P 0x11 0 4k" "$(node_uri alpha)" 2>&1) || rc=$?
	assert_contains "$out" "Input/output error" "a write of a Diskless primary without its peer"
	assert_eq "$(repl alpha disk)" Diskless "alpha's disk without the peer"
	out=$(hk alpha attach db 2>&1) && fail "attach without the peer succeeded: $out"
	assert_contains "$out" "must be connected and UpToDate" "attach without the peer"
	log "${DISKFAIL_MODE:-async}: $ACKED writes across the fault, 0 failed; without the peer: EIO"
}

run_detach() {
	storm_with_fault sync 6
	log "hook: $(head -n 1 "$WORK/hook.out")"

	# 2. Nothing lost: through alpha (forwarded reads) and on beta's disk.
	verify_clean --uri "$(node_uri alpha)"
	local rr
	rr=$(repl alpha remote_reads)
	((rr > 0)) || fail "alpha forwarded no reads to beta ($rr)"
	verify_clean --file "$(backing beta)"

	# 3. Repair and attach under a second storm.
	rm -f "$WORK/inject"
	"$LEDGER" write --uri "$(node_uri alpha)" --ledger "$L" --qd 16 --blocks $BLOCKS \
		--seconds 4 >"$WORK/w2.out" 2>"$WORK/w2.err" &
	w=$!
	track_pid $w
	wait_for "grep -q 'storms blocks' '$WORK/w2.err'" 10 || fail "the second writer did not start"
	sleep 1
	local out
	out=$(hk alpha attach db 2>&1) || fail "hakctl attach failed: $out"
	wait "$w" || fail "the second writer exited with $?"
	line=$(grep '^ledger:' "$WORK/w2.out") || fail "no summary of the second storm"
	log "storm 2 (during the attach): $line"
	assert_eq "$(field_before "$line" failed)" 0 "writes that failed during the attach"
	wait_repl alpha disk UpToDate 60
	wait_synced 30
	assert_eq "$(repl alpha bytes_resynced)" "$SIZE" "bytes pulled by the attach"
	grep -q 'attach-done volume:db' "$WORK/alpha.log" || fail "no attach-done event in alpha's log"
	log "alpha: $(grep -m 1 'The attached disk is UpToDate' "$WORK/alpha.log")"
	verify_clean --uri "$(node_uri alpha)"

	node_stop alpha
	node_stop beta
	local a b
	a=$(sha256sum <"$WORK/alpha.real")
	b=$(sha256sum <"$(backing beta)")
	assert_eq "$a" "$b" "sha256 of alpha's re-attached disk vs beta's"
	verify_clean --file "$WORK/alpha.real"
	log "detach: $ACKED writes across the fault, 0 failed; attach resynced $SIZE bytes; copies equal"
}

if [[ -n ${DISKFAIL_CASE:-} ]]; then
	"run_$DISKFAIL_CASE"
	exit 0
fi
for c in detach async passon; do
	t0=$(date +%s.%N)
	DISKFAIL_CASE=$c bash "$0" || fail "case $c failed"
	log "case $c passed in $(elapsed_since "$t0") s"
done
