#!/usr/bin/env bash
# timeout: 180
# Bulk data through libnbd's nbdcopy (multi-connection, many requests in flight): 256 MiB of random
# data copied into a sparse export and back out; source, backing file and copy must have equal
# SHA-256 sums. A second pass copies a file with holes and checks the zeroed ranges too.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_cmd nbdcopy sha256sum

MiB=$((1024 * 1024))
SIZE=$((256 * MiB))
SRC=$WORK/src.bin
IMG=$WORK/vol.img
OUT=$WORK/out.bin
head -c $SIZE /dev/urandom >"$SRC"
sparse_file "$IMG" $SIZE
hakd_start vol "$IMG"

t0=$(date +%s.%N)
nbdcopy --flush "$SRC" "$HAKD_URI" || fail "nbdcopy into the export failed"
log "copied in: $(elapsed_since "$t0")s"
# nbdcopy writes 256 KiB requests back to back: after each one hakd reads only a peek past the
# next header into its input buffer, so little of the payloads is copied from there (up to 64 KiB
# of each, a quarter of the data, before it read that way).
st=$(hakctl_status vol --json)
written=$(jq -r '.volumes[0].bytes.write' <<<"$st")
copied=$(jq -r '.volumes[0].bytes.write_copied' <<<"$st")
log "write payload bytes copied from the input buffer: $copied of $written"
assert_eq "$written" $SIZE "bytes written over NBD"
assert_le "$copied" $((SIZE / 16)) "write bytes copied out of the input buffer"
t0=$(date +%s.%N)
nbdcopy "$HAKD_URI" "$OUT" || fail "nbdcopy out of the export failed"
log "copied out: $(elapsed_since "$t0")s"
s_src=$(sha256sum <"$SRC" | cut -d' ' -f1)
s_out=$(sha256sum <"$OUT" | cut -d' ' -f1)
s_img=$(sha256sum <"$IMG" | cut -d' ' -f1)
assert_eq "$s_out" "$s_src" "sha256 of the copy read back over NBD"
assert_eq "$s_img" "$s_src" "sha256 of the backing file"
assert_eq "$(stat -c %s "$OUT")" $SIZE "size of the copy"

# Second pass: a source with holes. nbdcopy turns zero runs into WRITE_ZEROES/TRIM requests, so the
# zeroed ranges in the export must read back as zeros over the old random data.
rm -f "$OUT"
SPARSE=$WORK/sparse.bin
truncate -s $SIZE "$SPARSE"
dd if="$SRC" of="$SPARSE" bs=1M count=8 seek=100 skip=3 conv=notrunc status=none
dd if="$SRC" of="$SPARSE" bs=1M count=1 seek=255 skip=50 conv=notrunc status=none
nbdcopy --flush "$SPARSE" "$HAKD_URI" || fail "nbdcopy of the sparse file into the export failed"
nbdcopy "$HAKD_URI" "$OUT" || fail "second nbdcopy out of the export failed"
assert_eq "$(sha256sum <"$OUT" | cut -d' ' -f1)" "$(sha256sum <"$SPARSE" | cut -d' ' -f1)" \
	"sha256 after copying a sparse file over the random data"
hakd_stop vol
assert_eq "$(sha256sum <"$IMG" | cut -d' ' -f1)" "$(sha256sum <"$SPARSE" | cut -d' ' -f1)" \
	"sha256 of the backing file after the sparse copy"
log "all checks passed"
