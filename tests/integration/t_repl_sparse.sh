#!/usr/bin/env bash
# timeout: 200
# A full initial sync of a sparse volume sends its holes as holes (issue 3: "initial full sync
# skips holes"). alpha's 128 MiB backing file holds four extents of random data (1 MiB at 0,
# 4 MiB at 10 MiB, 12 KiB at 30 MiB + 4 KiB, the last 4 KiB) and holes elsewhere; beta's is full
# of 0xAA bytes, so a hole the resync skipped or failed to punch shows up as a difference. After
# alpha's forced promotion the full resync must send exactly the runs that hold data (a run is
# 256 KiB, RS_CHUNK, and one with any data in it travels whole), count the rest as holes, and
# leave both files byte-identical. (A run the hole scan calls data but that reads as zeros also
# travels as a hole, so this checks the result, not which of the two found the hole.) A second
# round arms HAK_TEST_NO_FALLOCATE on beta, a store that cannot punch: it must write zeroes for
# the holes instead, and the copies must still be identical.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
require_hakd
require_cmd dd sha256sum cmp jq

KiB=1024
MiB=$((1024 * KiB))
SIZE=$((128 * MiB))
PAIR_NO_START=1 pair_setup sync 128M
# offset:length of each data extent in alpha's backing file
EXTENTS=("0:$MiB" "$((10 * MiB)):$((4 * MiB))" "$((30 * MiB + 4 * KiB)):$((12 * KiB))"
	"$((SIZE - 4 * KiB)):$((4 * KiB))")
RUN=$((256 * KiB))
declare -A runs=()
for e in "${EXTENTS[@]}"; do
	off=${e%%:*} len=${e#*:}
	dd if=/dev/urandom of="$(backing alpha)" bs=4096 seek=$((off / 4096)) count=$((len / 4096)) \
		conv=notrunc status=none || fail "writing $len bytes at $off into alpha's backing file"
	for ((r = off / RUN; r <= (off + len - 1) / RUN; r++)); do
		runs[$r]=1
	done
done
data=$((${#runs[@]} * RUN))
# round NAME [ENV=VALUE]: fresh metadata, beta full of 0xAA, a forced full resync from alpha
# with beta's hakd started under ENV; both copies must end byte-identical.
round() {
	local name=$1 n lr
	for n in alpha beta; do
		rm -f "$WORK/$n.meta"
		"$HAKCTL" --config "$WORK/$n.conf" --node "$n" create-md db >>"$WORK/create-md.log" 2>&1 ||
			fail "$name: create-md on $n failed"
	done
	head -c "$SIZE" /dev/zero | tr '\0' '\252' >"$(backing beta)"
	node_start alpha
	if [[ -n ${2:-} ]]; then export "${2?}"; fi
	node_start beta
	if [[ -n ${2:-} ]]; then unset "${2%%=*}"; fi
	wait_repl alpha link Connected 20
	out=$(hk alpha primary db --force 2>&1) || fail "$name: primary --force on alpha: $out"
	wait_synced 60
	lr=$(hk alpha status --json | jq -c '.volumes[0].replication.last_resync')
	log "$name: full resync of the sparse volume: $lr"
	assert_eq "$(jq -r .full <<<"$lr")" true "$name: the resync was a full one"
	assert_eq "$(jq -r .bytes_marked <<<"$lr")" "$SIZE" "$name: bytes marked for the resync"
	assert_eq "$(jq -r .bytes_sent <<<"$lr")" "$data" "$name: bytes of data the resync sent (${#runs[@]} runs)"
	assert_eq "$(jq -r .bytes_holes <<<"$lr")" $((SIZE - data)) "$name: bytes the resync sent as holes"
	node_stop alpha
	node_stop beta
	if ! cmp -s "$(backing alpha)" "$(backing beta)"; then
		fail "$name: the copies differ after the full resync: first differing byte $(cmp \
			"$(backing alpha)" "$(backing beta)" | awk '{print $5}')"
	fi
	log "$name: $data bytes of data sent, $((SIZE - data)) as holes, copies identical" \
		"($(sha256sum <"$(backing alpha)" | cut -c1-16))"
}

pair_report_logs
round punch
# The same on a store that cannot punch (lib/testhook.h): beta writes zeroes instead.
round no-fallocate HAK_TEST_NO_FALLOCATE=1
grep -q 'zeroed ranges from the peer are written as zeroes' "$WORK/beta.log" ||
	fail "no-fallocate: beta never fell back to writing zeroes"
log "PASS: holes travel as holes and land as holes, or as zeroes where the store cannot punch"
