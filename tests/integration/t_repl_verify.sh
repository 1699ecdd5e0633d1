#!/usr/bin/env bash
# timeout: 180
# Online verify (hakctl verify) and the resync of what it finds (hakctl resync).
#   1. A blank pair (in sync from the start), alpha primary, 48 MiB of random data written through
#      alpha's export (sync mode: on both disks when acknowledged).
#   2. Behind hakd's back, 64 random bytes are written into each of K=5 chosen blocks of beta's
#      backing file (dd conv=notrunc,fsync); the last one lies in the 16 MiB nobody wrote, a hole
#      on alpha (which verify compares by a hole scan, without reading it) and data on beta. hakd reads its backing file through the page cache
#      (direct-io is off), the same cache dd writes into, so beta's reads see the change at once.
#   3. 'hakctl verify db' on alpha (crc32c): exactly those 5 blocks differ, reported as the 4
#      ranges they form (two of them are adjacent), and they are marked out of sync on alpha.
#   4. 'hakctl resync db': the pair reconnects and resyncs them; both backing files are then
#      identical, and a second verify finds 0 differing blocks.
#   5. beta restarts with verify-alg sha256 and drives a verify itself while fio writes random
#      4k blocks to alpha the whole time: writes during a verify cause no false difference.
#   6. A last verify from alpha with no writes: 0; both nodes stop cleanly; sha256 of the backing
#      files equal.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
require_hakd
require_cmd nbdcopy fio sha256sum jq dd

MiB=$((1024 * 1024))
BS=4096
BLOCKS=(10 2000 2001 9000 14336)
WANT_RANGES='[{"length":4096,"offset":40960},{"length":8192,"offset":8192000},{"length":4096,"offset":36864000},{"length":4096,"offset":58720256}]'

# verify_run NODE: start a verify on NODE, wait for its end; prints the verify status (JSON).
verify_run() {
	local out
	out=$(hk "$1" verify db 2>&1) || fail "verify on $1: $out"
	wait_for "[[ \$(repl $1 verify.running) == false ]]" 90 ||
		fail "the verify on $1 did not finish in 90 s: $(repl "$1" verify)"
	hk "$1" status --json | jq -c '.volumes[0].replication.verify'
}

PAIR_BLANK=1 pair_setup sync 64M
pair_report_logs
wait_synced 30
out=$(hk alpha primary db 2>&1) || fail "primary on alpha: $out"
wait_synced 30

# 1. Data on both nodes.
head -c $((48 * MiB)) /dev/urandom >"$WORK/rand"
nbdcopy --flush "$WORK/rand" "$(node_uri alpha)" || fail "nbdcopy into alpha's export failed"
wait_synced 30

# 2. Corrupt beta's copy of K blocks.
for b in "${BLOCKS[@]}"; do
	dd if=/dev/urandom of="$(backing beta)" bs=64 count=1 seek=$(((b * BS + 1000) / 64)) \
		conv=notrunc,fsync status=none || fail "dd into beta's backing file failed"
done
[[ $(sha256sum <"$(backing alpha)") != $(sha256sum <"$(backing beta)") ]] ||
	fail "the corruption of beta's backing file did not change it"

# 3. Verify finds exactly those blocks.
t0=$(date +%s.%N)
st=$(verify_run alpha)
log "verify 1 (alpha, crc32c) in $(elapsed_since "$t0") s: $st"
assert_eq "$(jq -r .differing_blocks <<<"$st")" "${#BLOCKS[@]}" "differing blocks found by verify 1"
assert_eq "$(jq -c '.first_ranges' <<<"$st")" "$WANT_RANGES" "ranges found by verify 1"
assert_eq "$(jq -r .done_bytes <<<"$st")" $((64 * MiB)) "bytes verified"
# The 16 MiB nobody wrote are holes on alpha: compared there by a scan, without reading (beta
# reads the one run its corrupted block made data, and finds the difference above).
assert_eq "$(jq -r .hole_bytes <<<"$st")" $((16 * MiB)) "bytes alpha compared as holes"
assert_eq "$(jq -r .alg <<<"$st")" crc32c "verify 1 algorithm"
assert_eq "$(repl alpha out_of_sync_bytes)" $((${#BLOCKS[@]} * BS)) "alpha's out_of_sync_bytes after verify 1"
grep -q "Event verify-done volume:db differing_blocks:${#BLOCKS[@]} " "$WORK/alpha.log" ||
	fail "no verify-done event with differing_blocks:${#BLOCKS[@]} in alpha's log"
hk alpha status | grep -q "differs: offset 8192000, 8192 bytes" ||
	fail "hakctl status does not show the differing ranges: $(hk alpha status)"

# 4. Resync repairs them.
resynced0=$(repl alpha bytes_resynced)
out=$(hk alpha resync db 2>&1) || fail "resync on alpha: $out"
wait_synced 60
moved=$(($(repl alpha bytes_resynced) - resynced0))
log "resync moved $moved bytes"
assert_eq "$moved" $((${#BLOCKS[@]} * BS)) "bytes moved by the resync"
a=$(sha256sum <"$(backing alpha)")
b=$(sha256sum <"$(backing beta)")
assert_eq "$b" "$a" "sha256 of beta's backing file vs alpha's after the resync"
st=$(verify_run alpha)
assert_eq "$(jq -r .differing_blocks <<<"$st")" 0 "differing blocks found by verify 2"

# 5. Verify driven by the secondary, sha256, while the primary is written to.
node_stop beta
sed -i 's/^    connect-interval 200ms$/&\n    verify-alg sha256/' "$WORK/beta.conf"
grep -q 'verify-alg sha256' "$WORK/beta.conf" || fail "could not set verify-alg in beta.conf"
node_start beta
wait_synced 30
(cd "$WORK" && exec fio --name=during-verify --ioengine=nbd --uri="$(node_uri alpha)" \
	--rw=randwrite --bs=4k --iodepth=16 --size=64M --time_based --runtime=6 \
	--randrepeat=0 --refill_buffers --end_fsync=1 --output-format=json \
	--output="$WORK/fio.json") >"$WORK/fio.out" 2>&1 &
fio_pid=$!
track_pid "$fio_pid"
sleep 0.5
t0=$(date +%s.%N)
st=$(verify_run beta)
log "verify 3 (beta, sha256, during writes) in $(elapsed_since "$t0") s: $st"
pid_alive "$fio_pid" || log "note: fio ended before the verify did"
wait "$fio_pid" || fail "fio against alpha failed: $(cat "$WORK/fio.out")"
jq -e '[.jobs[].error] | all(. == 0)' "$WORK/fio.json" >/dev/null || fail "fio reported an error"
assert_eq "$(jq -r .alg <<<"$st")" sha256 "verify 3 algorithm"
assert_eq "$(jq -r .differing_blocks <<<"$st")" 0 "differing blocks found during writes"
assert_eq "$(jq -r .done_bytes <<<"$st")" $((64 * MiB)) "bytes verified during writes"
log "fio wrote $(jq '[.jobs[].write.io_kbytes] | add' "$WORK/fio.json") KiB during verify 3;" \
	"$(jq -r .skipped_blocks <<<"$st") blocks skipped as written during the verify"

# 6. Converged.
wait_synced 30
st=$(verify_run alpha)
assert_eq "$(jq -r .differing_blocks <<<"$st")" 0 "differing blocks found by the last verify"
node_stop alpha
node_stop beta
a=$(sha256sum <"$(backing alpha)")
b=$(sha256sum <"$(backing beta)")
assert_eq "$b" "$a" "sha256 of beta's backing file vs alpha's at the end"
log "PASS: verify found exactly the ${#BLOCKS[@]} corrupted blocks; resync repaired them"
