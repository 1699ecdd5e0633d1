#!/usr/bin/env bash
# timeout: 120
# hakctl status against known traffic: exact request and byte counters in --json after 10 x 4 KiB
# writes + 5 x 4 KiB reads (+ the flush qemu-io sends when it closes), then a discard and two write
# zeroes, a block-status query and a CACHE; the client count while two clients are connected and after
# they leave; the text form names the volume and its size.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_hakd
require_cmd qemu-io nbdinfo jq

MiB=$((1024 * 1024))
IMG=$WORK/vol.img
sparse_file "$IMG" $((64 * MiB))
hakd_start vol "$IMG" --name hakvol

# vol_json: the status of our volume as one JSON object.
vol_json() {
	hakctl_status vol --json | jq -c '.volumes[] | select(.name == "hakvol")'
}
# counter PATH: one field of vol_json, e.g. counter .requests.write
counter() {
	jq -r "$1" <<<"$(vol_json)"
}
# expect_counters 'read write flush trim zero cache' 'bytes.read bytes.write errors'
expect_counters() {
	local V k want got
	V=$(vol_json)
	echo "$V"
	for kv in "$@"; do
		k=${kv%=*}
		want=${kv#*=}
		got=$(jq -r ".$k" <<<"$V")
		assert_eq "$got" "$want" "hakctl status --json .$k"
	done
}

V=$(vol_json)
[[ -n $V ]] || fail "hakctl status --json has no volume named hakvol: $(hakctl_status vol --json)"
assert_eq "$(jq -r '.size' <<<"$V")" $((64 * MiB)) "volume size"
assert_eq "$(jq -r '.clients' <<<"$V")" 0 "clients before any connection"
expect_counters requests.read=0 requests.write=0 requests.flush=0 requests.trim=0 requests.zero=0 \
	requests.cache=0 requests.block_status=0 bytes.read=0 bytes.write=0 errors=0

# Phase 1: exactly 10 writes and 5 reads of 4 KiB on one connection; qemu-io flushes once on close.
QC=()
for i in $(seq 0 9); do QC+=(-c "write -P 0x$((i + 10)) $((i * 8192)) 4k"); done
for i in $(seq 0 4); do QC+=(-c "read -P 0x$((i + 10)) $((i * 8192)) 4k"); done
qemu-io -f raw "${QC[@]}" "$(nbd_uri "$HAKD_SOCK" hakvol)" >"$WORK/q1.out" 2>&1 ||
	{ cat "$WORK/q1.out"; fail "qemu-io phase 1 failed"; }
expect_counters requests.read=5 requests.write=10 requests.flush=1 requests.trim=0 requests.zero=0 \
	requests.cache=0 requests.block_status=0 bytes.read=20480 bytes.write=40960 errors=0

# Phase 2: one discard, two write-zeroes (+1 flush on close), a block-status map, one CACHE.
qemu-io -f raw -c 'discard 0 4k' -c 'write -z 8k 4k' -c 'write -z 1M 1M' "$HAKD_URI" \
	>"$WORK/q2.out" 2>&1 || { cat "$WORK/q2.out"; fail "qemu-io phase 2 failed"; }
nbdinfo --map "$HAKD_URI" >/dev/null || fail "nbdinfo --map failed"
"$TOOLS/nbd-badclient" cache "$HAKD_SOCK" || fail "nbd-badclient cache failed"
expect_counters requests.read=5 requests.write=10 requests.flush=2 requests.trim=1 requests.zero=2 \
	requests.cache=1 bytes.read=20480 bytes.write=40960 errors=0
bs=$(counter .requests.block_status)
((bs >= 1)) || fail "block_status counter is $bs after nbdinfo --map"

# Clients: two idle qemu-io connections are counted while they stay, and not after they leave.
q=()
for i in 1 2; do
	qemu-io -f raw -r -c 'sleep 30000' "$HAKD_URI" >/dev/null 2>&1 &
	q+=($!)
	track_pid $!
done
wait_for '[[ $(counter .clients) == 2 ]]' 10 || fail "clients is $(counter .clients) with 2 connected, want 2"
log "clients = 2 while two qemu-io processes are connected"
kill_own "${q[0]}"
wait_for '[[ $(counter .clients) == 1 ]]' 10 || fail "clients is $(counter .clients) with 1 connected, want 1"
kill_own "${q[1]}"
wait_for '[[ $(counter .clients) == 0 ]]' 10 || fail "clients is $(counter .clients) after both left, want 0"
# The idle clients did no reads or writes.
expect_counters requests.read=5 requests.write=10 bytes.read=20480 bytes.write=40960 errors=0

# Text status: the volume's name and size.
T=$(hakctl_status vol)
echo "$T"
assert_contains "$T" hakvol "text status"
[[ $T =~ 67108864|64[[:space:]]*M|64\.0[[:space:]]*M ]] || fail "text status does not show the size 64 MiB: $T"
hakd_stop vol
log "all checks passed"
