#!/usr/bin/env bash
# timeout: 150
# data-integrity crc32c with injected corruption (the test build's HAK_TEST_CORRUPT_EVERY, see
# lib/testhook.h): beta flips a byte in every 60th checksummed payload it receives, after
# alpha computed the checksum.
#   1. a synced pair with data-integrity crc32c, alpha primary; a ledger storm writes for 8 s;
#   2. beta detects the corruption: integrity_errors > 0, a log line with offset, length and
#      both checksums, an integrity-error event; the connection is reset and comes back;
#   3. after the storm the pair resyncs to Connected/UpToDate with nothing out of sync; both nodes
#      stop cleanly, their backing files are identical and beta's holds every acknowledged write.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
require_hakd
require_cmd sha256sum jq

LEDGER=$TOOLS/hak-ledger
[[ -x $LEDGER ]] || fail "$LEDGER is not built (make BUILD=${HAK_BUILD#"$REPO"/} SAN=1 bins)"

summary_field() {
	local re="([0-9]+) $2"
	[[ $1 =~ $re ]] || fail "no '$2' count in: $1"
	echo "${BASH_REMATCH[1]}"
}

export HAK_TEST_CORRUPT_EVERY=60
PAIR_EXTRA="data-integrity crc32c" PAIR_BLANK=1 pair_setup sync 64M
unset HAK_TEST_CORRUPT_EVERY
pair_report_logs
grep -q 'Test hook armed: every 60-th' "$WORK/beta.log" ||
	fail "beta's hakd did not arm the corruption hook (not a test build?)"
out=$(hk alpha primary db 2>&1) || fail "primary on alpha: $out"
wait_synced 30
assert_eq "$(repl beta data_integrity)" crc32c "beta's data_integrity"
timeout 60 "$HAKCTL" --control "$WORK/beta.ctl" events --timeout 40 >"$WORK/ev.beta" 2>&1 &
track_pid $!

# 1. The storm.
L=$WORK/w.ledger
out=$("$LEDGER" write --uri "$(node_uri alpha)" --ledger "$L" --seconds 8 --blocks 4096 \
	--writer-id 1 --seed 7 2>"$WORK/w.err") || fail "the writer failed: $out $(cat "$WORK/w.err")"
log "writer: $out"
assert_eq "$(summary_field "$out" failed)" 0 "writes that failed"

# 2. Detected and recovered.
wait_synced 60
errs=$(repl beta integrity_errors)
((errs > 0)) || fail "beta counted no integrity error with every 60th payload corrupted"
assert_eq "$(repl alpha integrity_errors)" 0 "alpha's integrity_errors (it only sends)"
line=$(grep -m1 'Integrity error in' "$WORK/beta.log") || fail "beta logged no integrity error"
[[ $line =~ ([0-9]+)\ bytes\ at\ offset\ ([0-9]+)\ have\ crc32c\ 0x([0-9a-f]{8}),\ the\ sender\ computed\ 0x([0-9a-f]{8}) ]] ||
	fail "the integrity log line lacks range or checksums: $line"
[[ ${BASH_REMATCH[3]} != "${BASH_REMATCH[4]}" ]] || fail "the logged checksums are equal: $line"
drops=$(grep -c 'Lost the connection to beta: .*' "$WORK/alpha.log" || true)
((drops > 0)) || fail "alpha never lost the connection although beta reset it"
wait_for "grep -q '^integrity-error ' $WORK/ev.beta" 5 || fail "no integrity-error event on beta"
log "$errs integrity errors on beta, $drops connection resets seen by alpha; first: $line"

# 3. Identical copies with every acknowledged write.
wait_repl alpha in_flight_writes 0 20
node_stop alpha
node_stop beta
a=$(sha256sum <"$(backing alpha)")
b=$(sha256sum <"$(backing beta)")
assert_eq "$b" "$a" "sha256 of beta's backing file vs alpha's"
out=$("$LEDGER" verify --ledger "$L" --file "$(backing beta)" 2>&1) || fail "ledger verify: $out"
vline=$(grep '^verify:' <<<"$out") || fail "verify printed no summary: $out"
log "beta: $vline"
assert_eq "$(summary_field "$vline" missing)" 0 "acknowledged writes missing on beta"
assert_eq "$(summary_field "$vline" corrupt)" 0 "corrupt blocks on beta"
((errs >= 2)) || log "note: only $errs integrity error(s) in this run"
log "PASS: $errs corrupted payloads never reached beta's disk; the copies converged"
