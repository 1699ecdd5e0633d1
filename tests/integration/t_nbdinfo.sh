#!/usr/bin/env bash
# timeout: 120
# What hakd advertises, checked with libnbd's nbdinfo: size, transmission flags, block sizes, export
# name and description, the export list, the base:allocation map of a file with a known layout, and a
# --read-only export that reports read-only and refuses writes.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_cmd nbdinfo qemu-io jq

SIZE=$((64 * 1024 * 1024))
IMG=$WORK/vol0.img
sparse_file "$IMG" $SIZE
hakd_start vol0 "$IMG"
U=$HAKD_URI

# --- flags, sizes, name, description -----------------------------------------------------------
J=$(nbdinfo --json "$U")
echo "$J"
jqx() { jq -r ".exports[0].$1" <<<"$J"; }
assert_eq "$(jq -r '.protocol' <<<"$J")" newstyle-fixed "protocol"
assert_eq "$(jq -r '.structured' <<<"$J")" true "structured replies"
assert_eq "$(jq '.exports | length' <<<"$J")" 1 "number of exports"
assert_eq "$(jqx '"export-size"')" $SIZE "export-size"
for f in can_flush can_fua can_trim can_zero can_fast_zero can_cache can_df can_multi_conn; do
	assert_eq "$(jqx $f)" true "$f"
done
assert_eq "$(jqx is_read_only)" false "is_read_only"
assert_eq "$(jqx block_size_minimum)" 512 "block_size_minimum"
assert_eq "$(jqx block_size_preferred)" 4096 "block_size_preferred"
assert_eq "$(jqx block_size_maximum)" 33554432 "block_size_maximum"
assert_eq "$(jq -r '.exports[0].contexts | index("base:allocation") != null' <<<"$J")" true \
	"base:allocation in contexts"
DESC=$(jqx description)
[[ -n $DESC && $DESC != null ]] || fail "the export has no description (got '$DESC')"
# The default export name is the basename of the backing file; "" selects the same export.
J2=$(nbdinfo --json "$(nbd_uri "$HAKD_SOCK" vol0.img)")
assert_eq "$(jq -r '.exports[0]."export-name"' <<<"$J2")" vol0.img "export name when asked for vol0.img"
assert_eq "$(jq -r '.exports[0]."export-size"' <<<"$J2")" $SIZE "size of export vol0.img"
# nbdinfo --can/--is exit codes are a second, independent reading of the same flags.
for c in flush fua trim zero fast-zero cache df multi-conn; do
	nbdinfo --can "$c" "$U" || fail "nbdinfo --can $c says no"
done
if nbdinfo --is read-only "$U"; then fail "nbdinfo --is read-only says yes on a writable export"; fi

# --- export list --------------------------------------------------------------------------------
L=$(nbdinfo --list --json "$U")
echo "$L"
assert_eq "$(jq -r '[.exports[]."export-name"] | index("vol0.img") != null' <<<"$L")" true \
	"vol0.img in nbdinfo --list"
assert_eq "$(jq -r '.exports[] | select(."export-name" == "vol0.img") | ."export-size"' <<<"$L")" \
	$SIZE "listed size"

# --- block status map: data at 0 and 16M (1 MiB each), holes elsewhere --------------------------
qemu-io -f raw -c 'write -P 0xa5 0 1M' -c 'write -P 0x5a 16M 1M' -c flush "$U" >"$WORK/qio.out" ||
	{ cat "$WORK/qio.out"; fail "qemu-io writes for the map failed"; }
M=$(nbdinfo --map --json "$U")
echo "$M"
WANT='[[0,1048576,0],[1048576,15728640,3],[16777216,1048576,0],[17825792,49283072,3]]'
assert_eq "$(jq -c '[.[] | [.offset, .length, .type]]' <<<"$M")" "$WANT" "nbdinfo --map extents"
# The data itself came through: the backing file holds the patterns.
qemu-io -f raw -r -c 'read -P 0xa5 0 1M' -c 'read -P 0x5a 16M 1M' -c 'read -P 0 1M 15M' \
	-c 'read -P 0 17M 47M' "$IMG" >"$WORK/verify.out" || { cat "$WORK/verify.out"; fail "backing file content"; }
assert_not_contains "$(cat "$WORK/verify.out")" "Pattern verification failed" "backing file check"

# --- custom name ----------------------------------------------------------------------------------
hakd_stop vol0
hakd_start named "$IMG" --name data-vol
L=$(nbdinfo --list --json "$HAKD_URI")
assert_eq "$(jq -c '[.exports[]."export-name"]' <<<"$L")" '["data-vol"]' "export list with --name"
assert_eq "$(nbdinfo --size "$(nbd_uri "$HAKD_SOCK" data-vol)")" $SIZE "size of data-vol"
if nbdinfo --size "$(nbd_uri "$HAKD_SOCK" no-such-export)" >/dev/null 2>&1; then
	fail "an unknown export name was accepted"
fi
hakd_stop named

# --- read-only export -----------------------------------------------------------------------------
SUM=$(sha256sum <"$IMG")
hakd_start ro "$IMG" --read-only
J=$(nbdinfo --json "$HAKD_URI")
assert_eq "$(jqx is_read_only)" true "is_read_only with --read-only"
nbdinfo --is read-only "$HAKD_URI" || fail "nbdinfo --is read-only says no with --read-only"
# qemu refuses to open a read-only export for writing; nbdcopy gets EPERM from the server.
if qemu-io -f raw -c 'write -P 0x77 0 4k' "$HAKD_URI" >"$WORK/ro.out" 2>&1; then
	cat "$WORK/ro.out"
	fail "a write to the read-only export succeeded"
fi
head -c 4096 /dev/urandom >"$WORK/4k"
if nbdcopy --destination-is-zero "$WORK/4k" "$HAKD_URI" >"$WORK/ro2.out" 2>&1; then
	cat "$WORK/ro2.out"
	fail "nbdcopy into the read-only export succeeded"
fi
qemu-io -f raw -r -c 'read -P 0xa5 0 1M' "$HAKD_URI" >"$WORK/ro3.out" ||
	{ cat "$WORK/ro3.out"; fail "read from the read-only export failed"; }
assert_not_contains "$(cat "$WORK/ro3.out")" "Pattern verification failed" "read-only export read"
hakd_stop ro
assert_eq "$(sha256sum <"$IMG")" "$SUM" "backing file checksum after the write attempts"
log "all checks passed"
