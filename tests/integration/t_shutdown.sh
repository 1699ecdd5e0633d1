#!/usr/bin/env bash
# timeout: 120
# Graceful shutdown under load: while fio writes over two connections and a qemu-io client writes
# numbered 256 KiB blocks, hakd gets SIGTERM. It must exit with status 0 within 15 s and log that it
# finished its in-flight requests. Afterwards the data written before the load is intact, and every
# block whose write qemu-io saw acknowledged is in the backing file with its own pattern.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_cmd fio qemu-io cmp

MiB=$((1024 * 1024))
IMG=$WORK/vol.img
sparse_file "$IMG" $((256 * MiB))
hakd_start vol "$IMG"

# Data written (and flushed) before the load: 16 MiB of 0x3c at 0.
qemu-io -f raw -c 'write -P 0x3c 0 16M' -c flush "$HAKD_URI" >"$WORK/pre.out" 2>&1 ||
	{ cat "$WORK/pre.out"; fail "initial write failed"; }

# fio: 4k random writes QD32 on two connections over [32M, 128M), time-based so it outlasts hakd.
fio --name=load --ioengine=nbd --uri="$HAKD_URI" --rw=randwrite --bs=4k --iodepth=32 --numjobs=2 \
	--offset=32M --size=96M --time_based --runtime=60 --output-format=json \
	--output="$WORK/fio.json" >"$WORK/fio.out" 2>&1 &
FIO=$!
track_pid $FIO

# qemu-io: block i (256 KiB at 128M + i*256K) gets pattern 0x40 + i%64, one write every ~40 ms.
BASE=$((128 * MiB))
BS=$((256 * 1024))
NBLK=150
QC=()
for ((i = 0; i < NBLK; i++)); do
	QC+=(-c "write -P $(printf '0x%02x' $((0x40 + i % 64))) $((BASE + i * BS)) $BS" -c "sleep 40")
done
stdbuf -oL qemu-io -f raw "${QC[@]}" "$HAKD_URI" >"$WORK/qio.out" 2>&1 &
QIO=$!
track_pid $QIO

wait_for "[[ \$(grep -c '^wrote' '$WORK/qio.out') -ge 5 ]]" 30 || fail "qemu-io made no progress"
sleep 1
pid_alive $FIO || { cat "$WORK/fio.out"; fail "fio ended before the shutdown"; }
acked_before=$(grep -c '^wrote' "$WORK/qio.out")
log "sending SIGTERM with fio running and $acked_before qemu-io blocks acknowledged"
hakd_stop vol 15
log "hakd exited 0 in ${HAKD_STOP_SECS}s"
grep -qiE 'in-flight|inflight' "$HAKD_LOG" ||
	fail "hakd's log does not mention finishing in-flight requests"
grep -iE 'in-flight|inflight' "$HAKD_LOG" | tail -n 3 || true
# hakd gives up on requests after a grace period and says so; that must not have happened.
if grep -qiE 'still in flight|abandon' "$HAKD_LOG"; then
	fail "hakd exited without finishing its in-flight requests: $(grep -iE 'still in flight|abandon' "$HAKD_LOG")"
fi

# Both clients notice the closed connection and stop on their own.
wait_for "! pid_alive $FIO && ! pid_alive $QIO" 30 || fail "clients still running 30 s after hakd exited"
wait $FIO || true
wait $QIO || true

# The data from before the load is intact.
pattern_file "$WORK/pre.bin" $((16 * MiB)) 0x3c
cmp -n $((16 * MiB)) "$WORK/pre.bin" "$IMG" || fail "the 16 MiB written before the load changed"

# Every acknowledged qemu-io block holds its pattern.
mapfile -t offs < <(sed -nE "s/^wrote $BS\/$BS bytes at offset ([0-9]+)$/\1/p" "$WORK/qio.out")
((${#offs[@]} >= acked_before)) || fail "qemu-io lost acknowledgements: ${#offs[@]} < $acked_before"
VC=()
for off in "${offs[@]}"; do
	i=$(((off - BASE) / BS))
	VC+=(-c "read -P $(printf '0x%02x' $((0x40 + i % 64))) $off $BS")
done
qemu-io -f raw -r "${VC[@]}" "$IMG" >"$WORK/verify.out" 2>&1 ||
	{ grep -i fail "$WORK/verify.out" | head; fail "an acknowledged block is missing from the backing file"; }
log "${#offs[@]} acknowledged blocks verified in the backing file"
((${#offs[@]} < NBLK)) || log "note: qemu-io finished all $NBLK writes before the shutdown"

# hakd starts again on the same file and serves the old data.
hakd_start vol2 "$IMG"
qemu-io -f raw -r -c 'read -P 0x3c 0 16M' "$HAKD_URI" >"$WORK/post.out" 2>&1 ||
	{ cat "$WORK/post.out"; fail "data read after the restart is wrong"; }
hakd_stop vol2
log "all checks passed"
