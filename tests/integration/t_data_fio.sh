#!/usr/bin/env bash
# timeout: 240
# fio's nbd engine as a data-integrity checker. Job 1: 4k random writes, QD32, two connections
# (numjobs=2, each on its own 64 MiB half), every block carrying a crc32c header that fio verifies
# by reading it back. Job 2: mixed 4k-64k random read/write with verification. Any verify error or a
# nonzero fio exit fails the test; the JSON report must show the expected amount of I/O.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_cmd fio jq

MiB=$((1024 * 1024))
IMG=$WORK/vol.img
sparse_file "$IMG" $((128 * MiB))
hakd_start vol "$IMG"

# run_fio NAME ARGS...: fio with JSON output in $WORK/NAME.json; fails on exit status or verify errors.
run_fio() {
	local name=$1 rc=0
	shift
	# From $WORK, and without verify state files, so nothing lands in the caller's directory.
	(cd "$WORK" && fio --name="$name" --ioengine=nbd --uri="$HAKD_URI" --output-format=json \
		--output="$WORK/$name.json" --verify_state_save=0 "$@") >"$WORK/$name.out" 2>&1 || rc=$?
	if ((rc != 0)) || grep -qiE 'verify|crc32c' "$WORK/$name.out"; then
		cat "$WORK/$name.out"
		[[ -f $WORK/$name.json ]] && jq -c '.jobs[] | {jobname, error}' "$WORK/$name.json"
		fail "fio $name: exit status $rc or verify errors"
	fi
	jq -e '[.jobs[].error] | all(. == 0)' "$WORK/$name.json" >/dev/null ||
		fail "fio $name: a job reported an error: $(jq -c '[.jobs[].error]' "$WORK/$name.json")"
}

run_fio randwrite --rw=randwrite --bs=4k --iodepth=32 --numjobs=2 --size=64M --offset_increment=64M \
	--verify=crc32c --do_verify=1 --verify_fatal=1 --randrepeat=0
# Each job writes all of its 64 MiB once and reads all of it back for verification.
w=$(jq '[.jobs[].write.io_kbytes] | add' "$WORK/randwrite.json")
r=$(jq '[.jobs[].read.io_kbytes] | add' "$WORK/randwrite.json")
assert_eq "$w" $((2 * 64 * 1024)) "KiB written by randwrite"
assert_eq "$r" $((2 * 64 * 1024)) "KiB read back for verification by randwrite"
log "randwrite: $(jq -r '[.jobs[].write.iops] | add | floor' "$WORK/randwrite.json") write IOPS"

run_fio randrw --rw=randrw --rwmixread=40 --bsrange=4k-64k --iodepth=16 --numjobs=1 --size=48M \
	--offset=16M --verify=crc32c --do_verify=1 --verify_fatal=1 --randrepeat=0
w=$(jq '.jobs[0].write.io_kbytes' "$WORK/randrw.json")
r=$(jq '.jobs[0].read.io_kbytes' "$WORK/randrw.json")
((w > 0 && r > 0)) || fail "randrw did no mixed I/O: write ${w} KiB, read ${r} KiB"
log "randrw: wrote ${w} KiB, read ${r} KiB (including verification)"

# A last verify-only pass over the first job's data from a fresh connection: it must still be there.
run_fio randwrite --rw=randwrite --bs=4k --iodepth=32 --numjobs=1 --size=16M --offset=96M \
	--verify=crc32c --verify_only=1 --verify_fatal=1 --randrepeat=0
hakd_stop vol
log "all checks passed"
