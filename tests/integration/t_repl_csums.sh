#!/usr/bin/env bash
# timeout: 180
# Checksum-based resync (csums yes): a resync of a mostly-equal volume sends only what differs.
#   A. Measured: alpha (primary) is disconnected, the same 64 MiB it already shares with beta are
#      written again (the bitmap marks all of them, the content is equal), plus three truly
#      different extents (4 KiB, 64 KiB, 4 KiB) inside that range. On reconnect the resync must
#      send exactly those 72 KiB of data (bytes_sent), clear the rest by checksum (bytes_equal),
#      and the copies end identical.
#   B. The same, with fio writing random 4k blocks all over alpha (so the bitmap also holds
#      thousands of one-block runs) from before the reconnection until
#      after the checksum resync: writes go on, and the copies still converge (verify finds 0
#      differing blocks, sha256 of both backing files equal).
#   C. A crash in the middle of a checksum resync: 32 MiB of new data on alpha while apart, the
#      link throttled (tc tbf) so the resync takes seconds; beta (SyncTarget) is killed with
#      SIGKILL a part of the way in, restarts, and the resync resumes to identical copies.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
require_hakd
require_cmd nbdcopy qemu-io fio sha256sum jq cmp tc

MiB=$((1024 * 1024))
DIRTY=$((64 * MiB))
DIFF=$((72 * 1024))

# rewrite_alpha: alpha goes StandAlone and gets $WORK/rand again (equal content, all marked).
rewrite_alpha() {
	local out
	out=$(hk alpha disconnect db 2>&1) || fail "disconnect on alpha: $out"
	wait_repl alpha link StandAlone 10
	nbdcopy --flush "$WORK/rand" "$(node_uri alpha)" || fail "nbdcopy into alpha's export failed"
}

PAIR_BLANK=1 PAIR_EXTRA="csums yes" pair_setup sync 128M
pair_report_logs
wait_synced 30
out=$(hk alpha primary db 2>&1) || fail "primary on alpha: $out"
wait_synced 30
head -c "$DIRTY" /dev/urandom >"$WORK/rand"
nbdcopy --flush "$WORK/rand" "$(node_uri alpha)" || fail "nbdcopy into alpha's export failed"
wait_synced 30

# ---- A: measured --------------------------------------------------------------------------
rewrite_alpha
out=$(qemu-io -f raw -c "write -P 0x5c 1M 4k" -c "write -P 0x5d 20M 64k" \
	-c "write -P 0x5e 63M 4k" -c flush "$(node_uri alpha)" 2>&1) ||
	fail "qemu-io writes to alpha failed: $out"
assert_eq "$(repl alpha out_of_sync_bytes)" "$DIRTY" "alpha's out_of_sync_bytes before reconnecting"
t0=$(date +%s.%N)
out=$(hk alpha connect db 2>&1) || fail "connect on alpha: $out"
wait_synced 60
dt=$(elapsed_since "$t0")
lr=$(hk alpha status --json | jq -c '.volumes[0].replication.last_resync')
log "A: checksum resync in $dt s: $lr"
assert_eq "$(jq -r .csums <<<"$lr")" true "the resync compared checksums"
marked=$(jq -r .bytes_marked <<<"$lr")
sent=$(jq -r .bytes_sent <<<"$lr")
equal=$(jq -r .bytes_equal <<<"$lr")
assert_eq "$marked" "$DIRTY" "bytes marked for the resync"
assert_eq "$sent" "$DIFF" "bytes of data the resync sent"
assert_eq "$equal" $((DIRTY - DIFF)) "bytes the resync found equal"
((sent * 10 < marked)) || fail "the checksum resync sent $sent of $marked marked bytes (not < 10%)"
log "A: marked $marked bytes, sent $sent ($(awk "BEGIN{printf \"%.3f\", 100*$sent/$marked}")%), equal $equal"
a=$(sha256sum <"$(backing alpha)")
b=$(sha256sum <"$(backing beta)")
assert_eq "$b" "$a" "sha256 of beta's backing file vs alpha's after resync A"

# ---- B: writes during a checksum resync ----------------------------------------------------
rewrite_alpha
(cd "$WORK" && exec fio --name=during-csum --ioengine=nbd --uri="$(node_uri alpha)" \
	--rw=randwrite --bs=4k --iodepth=16 --size=128M --time_based --runtime=5 \
	--randrepeat=0 --refill_buffers --end_fsync=1 --output-format=json \
	--output="$WORK/fio.json") >"$WORK/fio.out" 2>&1 &
fio_pid=$!
track_pid "$fio_pid"
sleep 1
out=$(hk alpha connect db 2>&1) || fail "connect on alpha: $out"
wait_repl alpha link SyncSource 10
pid_alive "$fio_pid" || fail "fio ended before the checksum resync started: make it run longer"
wait "$fio_pid" || fail "fio against alpha failed: $(cat "$WORK/fio.out")"
jq -e '[.jobs[].error] | all(. == 0)' "$WORK/fio.json" >/dev/null || fail "fio reported an error"
wait_synced 60
lr=$(hk alpha status --json | jq -c '.volumes[0].replication.last_resync')
log "B: checksum resync with fio writing $(jq '[.jobs[].write.io_kbytes] | add' "$WORK/fio.json") KiB: $lr"
assert_eq "$(jq -r .csums <<<"$lr")" true "resync B compared checksums"
out=$(hk alpha verify db 2>&1) || fail "verify on alpha: $out"
wait_for "[[ \$(repl alpha verify.running) == false ]]" 60 || fail "verify did not finish"
assert_eq "$(repl alpha verify.differing_blocks)" 0 "differing blocks after resync B"

# ---- C: the target dies during a checksum resync ------------------------------------------
out=$(hk alpha disconnect db 2>&1) || fail "disconnect on alpha: $out"
wait_repl alpha link StandAlone 10
head -c $((32 * MiB)) /dev/urandom >"$WORK/rand2"
nbdcopy --flush "$WORK/rand2" "$(node_uri alpha)" || fail "nbdcopy of rand2 into alpha failed"
ip -n "$NS_alpha" link set "ha1-$PAIR_SID" txqueuelen 1000
tc -n "$NS_alpha" qdisc replace dev "ha1-$PAIR_SID" root tbf rate 40mbit burst 64kb latency 50ms
defer "tc -n $NS_alpha qdisc del dev ha1-$PAIR_SID root 2>/dev/null || true"
out=$(hk alpha connect db 2>&1) || fail "connect on alpha: $out"
seen=0
for ((i = 0; i < 300; i++)); do
	st=$(hk beta status --json | jq -c '.volumes[0].replication')
	if [[ $(jq -r .link <<<"$st") == SyncTarget ]]; then
		seen=1
		d=$(jq -r '.resync.done_bytes // 0' <<<"$st")
		((d >= 8 * MiB)) && break
	elif ((seen)); then
		fail "the checksum resync ended before beta could be killed in it (beta: $st)"
	fi
	sleep 0.1
done
((i < 300)) || fail "beta did not get 8 MiB into the checksum resync in 30 s: $st"
log "C: killing beta after $d bytes of the checksum resync"
node_kill9 beta
tc -n "$NS_alpha" qdisc del dev "ha1-$PAIR_SID" root 2>/dev/null || true
wait_repl alpha link Connecting 10
node_start beta
wait_synced 60
lr=$(hk alpha status --json | jq -c '.volumes[0].replication.last_resync')
log "C: the resumed resync: $lr"
assert_eq "$(jq -r .csums <<<"$lr")" true "the resumed resync compared checksums"
node_stop alpha
node_stop beta
a=$(sha256sum <"$(backing alpha)")
b=$(sha256sum <"$(backing beta)")
assert_eq "$b" "$a" "sha256 of beta's backing file vs alpha's at the end"
cmp -s -n $((32 * MiB)) "$(backing beta)" "$WORK/rand2" || fail "beta does not hold rand2"
log "PASS: the checksum resync sent $sent of $marked marked bytes; copies identical"
