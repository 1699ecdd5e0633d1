#!/usr/bin/env bash
# timeout: 180
# Activity log (issue 4, item 1): a primary killed under a ledger storm comes back and resyncs
# only its activity log's extents plus the bitmaps, never the whole volume. First, a short storm
# checks that extents stay hot while beta has not confirmed their writes with a barrier ack.
#   alpha primary with a small activity log (64 extents of 1 MiB = 64 MiB) on a 512 MiB volume;
#   a hak-ledger storm over 128 MiB (so extents are evicted all the time); kill -9 of alpha;
#   dump-md of alpha shows the hot extents; beta is promoted and takes writes; alpha restarts
#   as secondary with the path down (its bitmap now holds the AL's extents), then the path
#   comes up: resynced bytes <= alpha's bitmap + AL coverage + beta's bitmap, and < the volume;
#   then the copies are identical and the ledger verifies on alpha's file (0 missing).
# Finally it measures the AL's write amplification: AL transactions per 1000 random 4K writes
#   over a 256 MiB working set (logged; 4x the AL's coverage, the worst case).
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
require_hakd
require_cmd sha256sum jq

LEDGER=$TOOLS/hak-ledger
[[ -x $LEDGER ]] || fail "$LEDGER is not built (make BUILD=${HAK_BUILD#"$REPO"/} SAN=1 bins)"
L=$WORK/al.ledger
SIZE=$((512 << 20))
COVER=$((64 << 20))

storm() { # NODE ARGS...: run a hak-ledger writer in the background; sets W
	local n=$1
	shift
	"$LEDGER" write --uri "$(node_uri "$n")" --ledger "$L" --qd 16 "$@" \
		>"$WORK/w.out" 2>"$WORK/w.err" &
	W=$!
	track_pid "$W"
	wait_for "grep -q 'storms blocks' '$WORK/w.err'" 10 ||
		fail "the writer did not start within 10 s: $(cat "$WORK/w.err")"
}

storm_wait() {
	wait_for "! pid_alive $W" 30 || fail "$1: the writer still runs"
	wait "$W" || true
	grep '^ledger:' "$WORK/w.out" || fail "$1: no writer summary: $(cat "$WORK/w.err")"
}

PAIR_BLANK=1 PAIR_EXTRA="al-extents 64
    al-extent-size 1M" pair_setup sync 512M
pair_report_logs
wait_synced 30
hk alpha primary db >/dev/null || fail "promoting alpha failed"
wait_repl beta peer_role primary 10
assert_eq "$(repl alpha activity_log.coverage_bytes)" "$COVER" "alpha's AL coverage"

# ---- writes beta acknowledged but has not flushed keep their extents hot ---------------------
# Until a barrier ack says beta's disk has them, a double power loss could take them from beta
# while alpha has them: the extents must stay in alpha's on-disk log (activity_log.unstable).
storm alpha --seconds 3 --blocks 32768
seen=0
for ((i = 0; i < 20; i++)); do
	u=$(repl alpha activity_log.unstable)
	((u > 0)) && seen=$((seen + 1))
	sleep 0.1
done
sum=$(storm_wait "storm before the crash")
((seen > 0)) || fail "alpha never showed an extent held for an unstable write in 20 samples of a storm"
wait_repl alpha activity_log.unstable 0 10
log "unstable extents seen in $seen of 20 samples during the storm, none after it: $sum"

# ---- crash under a storm -------------------------------------------------------------------
storm alpha --seconds 30 --blocks 32768
sleep 2.5
node_kill9 alpha
sum=$(storm_wait "storm on alpha")
log "alpha killed under a storm: $sum"

dump=$("$HAKCTL" --config "$WORK/alpha.conf" --node alpha dump-md db) || fail "dump-md failed"
re='activity log +seq ([0-9]+), 64 slots of 1024 KiB, ([0-9]+) extents hot \(([0-9]+) bytes\)'
[[ $dump =~ $re ]] || fail "dump-md shows no activity log: $dump"
al_bytes=${BASH_REMATCH[3]}
assert_le "$al_bytes" "$COVER" "bytes in alpha's hot extents"
re='bits set +[0-9]+ \(([0-9]+) bytes out of sync\)'
[[ $dump =~ $re ]] || fail "dump-md shows no bitmap count: $dump"
a_bm=${BASH_REMATCH[1]}
log "alpha's metadata: $al_bytes bytes in hot extents, $a_bm bytes in the bitmap"

wait_for "[[ \$(repl beta link) != Connected ]]" 10 || fail "beta did not notice alpha's death"
hk beta primary db >/dev/null || fail "promoting beta failed"
storm beta --max-writes 300 --blocks 32768 --region-offset $((256 << 20))
sum=$(storm_wait "storm on beta")
log "beta took writes as primary: $sum"

# ---- alpha returns -------------------------------------------------------------------------
path_down 1
node_start alpha
assert_eq "$(repl alpha role)" secondary "role of the restarted alpha"
assert_eq "$(repl alpha crashed_primary)" true "crashed_primary of the restarted alpha"
a_oos=$(repl alpha out_of_sync_bytes)
b_oos=$(repl beta out_of_sync_bytes)
assert_le "$a_oos" $((a_bm + al_bytes)) "alpha's out-of-sync bytes after the AL recovery"
assert_le "$al_bytes" "$a_oos" "alpha's bitmap covers its hot extents"
grep -q 'Recovered the activity log after a crash as primary' "$WORK/alpha.log" ||
	fail "alpha's log does not mention the AL recovery"
path_up 1
wait_synced 60
rb=$(repl beta bytes_resynced)
bound=$((a_oos + b_oos))
log "resynced $rb bytes; bound $bound (alpha $a_oos incl. AL, beta $b_oos); volume $SIZE"
assert_le "$rb" "$bound" "bytes resynced"
((rb < SIZE)) || fail "a full resync ($rb bytes) instead of the AL + bitmap"
grep -q 'resyncing the bitmaps only' "$WORK/beta.log" "$WORK/alpha.log" ||
	fail "no node decided for a bitmap resync after the crash"
assert_eq "$(repl alpha crashed_primary)" false "crashed_primary after the resync"

# ---- the copies ----------------------------------------------------------------------------
hk beta secondary db >/dev/null || fail "demoting beta failed"
node_stop alpha
node_stop beta
[[ $(sha256sum <"$(backing alpha)") == $(sha256sum <"$(backing beta)") ]] ||
	fail "alpha's and beta's backing files differ after the resync"
out=$("$LEDGER" verify --ledger "$L" --file "$(backing alpha)" 2>&1) || fail "verify: $out"
line=$(grep '^verify:' <<<"$out" | tail -n 1)
assert_eq "$(field_before "$line" missing)" 0 "missing blocks on alpha"
assert_eq "$(field_before "$line" corrupt)" 0 "corrupt blocks on alpha"
log "copies identical; $line"

# ---- write amplification -------------------------------------------------------------------
node_start alpha
node_start beta
wait_synced 30
hk alpha primary db >/dev/null || fail "promoting alpha failed"
w0=$(repl alpha activity_log.writes)
storm alpha --max-writes 1000 --blocks 65536 --qd 1 --region-offset 0
storm_wait "amplification storm" >/dev/null
w1=$(repl alpha activity_log.writes)
log "AL write amplification: $((w1 - w0)) AL transactions per 1000 random 4K writes (QD1)" \
	"over 256 MiB with 64 MiB of AL coverage"
storm alpha --max-writes 1000 --blocks 65536 --qd 16 --region-offset 0
storm_wait "amplification storm" >/dev/null
w2=$(repl alpha activity_log.writes)
log "AL write amplification: $((w2 - w1)) AL transactions per 1000 random 4K writes (QD16)" \
	"over 256 MiB with 64 MiB of AL coverage"
assert_le $((w2 - w1)) 1000 "AL transactions per 1000 writes"
node_stop alpha
node_stop beta
log "all checks passed"
