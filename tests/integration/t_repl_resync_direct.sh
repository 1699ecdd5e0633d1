#!/usr/bin/env bash
# timeout: 240
# The resync target writes resync runs with O_DIRECT although the volume is buffered (direct-io
# no), and falls back to the page cache when the backing store refuses a direct write.
#   1. Full initial sync of 64 MiB of random data from alpha to beta, whose backing file holds
#      0xAA bytes and has no page cache: the copies are identical afterwards, and beta's backing
#      file has (almost) nothing in its page cache, so the runs did not go through it. Written
#      through the cache, all 64 MiB would be resident.
#   2. beta's copy is overwritten with 0xAA again while beta is stopped; beta restarts with
#      HAK_TEST_DIRECT_EINVAL=1 (its first direct write is refused with EINVAL before anything
#      is written, as by a backing store with stricter direct-I/O rules). 'hakctl verify' on alpha finds every block differing,
#      'hakctl resync' repairs them: exactly one log line says resync writes now go through the
#      page cache, no write failed, the copies are identical, and this time the data is resident
#      in beta's page cache.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
require_hakd
require_cmd dd sha256sum cmp jq fincore python3

MiB=$((1024 * 1024))
SIZE=$((64 * MiB))
PAIR_NO_START=1 pair_setup sync 64M

# fill_aa FILE: SIZE bytes of 0xAA, written back and dropped from the page cache.
fill_aa() {
	head -c "$SIZE" /dev/zero | tr '\0' '\252' >"$1"
	python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
os.fsync(fd)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
os.close(fd)' "$1"
}

# resident FILE: bytes of FILE in the page cache.
resident() {
	fincore --bytes --noheadings --output RES "$1" | tr -d " "
}

# same_copies WHAT: both backing files are byte-identical.
same_copies() {
	cmp -s "$(backing alpha)" "$(backing beta)" ||
		fail "the copies differ after $1: first differing byte $(cmp "$(backing alpha)" \
			"$(backing beta)" | awk '{print $5}')"
}

dd if=/dev/urandom of="$(backing alpha)" bs=1M count=64 conv=notrunc status=none ||
	fail "writing alpha's backing file"
fill_aa "$(backing beta)"
r0=$(resident "$(backing beta)")
assert_le "$r0" $((4 * MiB)) "bytes of beta's backing file in the page cache before the sync"

# 1. The full initial sync writes around the page cache.
node_start alpha
node_start beta
pair_report_logs
wait_repl alpha link Connected 20
out=$(hk alpha primary db --force 2>&1) || fail "primary --force on alpha: $out"
wait_synced 60
assert_eq "$(hk alpha status --json | jq -r '.volumes[0].replication.last_resync.bytes_sent')" \
	"$SIZE" "bytes the full sync sent"
r1=$(resident "$(backing beta)")
log "after the full sync: $r1 bytes of beta's backing file in the page cache"
assert_le "$r1" $((4 * MiB)) "bytes of beta's backing file in the page cache after the sync"
node_stop beta
same_copies "the full sync"
assert_not_contains "$(cat "$WORK/beta.log")" "go through the page cache" "beta's log after step 1"

# 2. A backing store that refuses the first direct write: the rest goes through the cache.
fill_aa "$(backing beta)"
HAK_TEST_DIRECT_EINVAL=1 node_start beta
grep -q "Test hook armed: the first 1 direct resync writes" "$WORK/beta.log" ||
	fail "beta did not arm HAK_TEST_DIRECT_EINVAL"
wait_repl alpha link Connected 20
out=$(hk alpha verify db 2>&1) || fail "verify on alpha: $out"
wait_for "[[ \$(repl alpha verify.running) == false ]]" 90 ||
	fail "the verify on alpha did not finish in 90 s: $(repl alpha verify)"
assert_eq "$(repl alpha out_of_sync_bytes)" "$SIZE" "alpha's out_of_sync_bytes after the verify"
out=$(hk alpha resync db 2>&1) || fail "resync on alpha: $out"
wait_synced 60
r2=$(resident "$(backing beta)")
log "after the resync through the page cache: $r2 bytes of beta's backing file resident"
assert_le $((SIZE / 2)) "$r2" "bytes of beta's backing file in the page cache after the fallback"
n=$(grep -c "Direct resync writes to .* failed (Invalid argument); resync writes go through" \
	"$WORK/beta.log" || true)
assert_eq "$n" 1 "log lines about the fallback to the page cache"
assert_not_contains "$(cat "$WORK/beta.log")" "failed: " "beta's log (no failed write)"
node_stop alpha
node_stop beta
same_copies "the resync after the fallback"
log "PASS: full sync direct ($r1 bytes resident), fallback after EINVAL ($r2 bytes resident)," \
	"copies identical ($(sha256sum <"$(backing alpha)" | cut -c1-16))"
