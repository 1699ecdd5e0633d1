#!/usr/bin/env bash
# timeout: 180
# The replication link fails under a sync-mode write load and comes back:
#   1. a synced pair, alpha primary; writer 1 (hak-ledger) storms 8 MiB at the start of alpha's
#      128 MiB export for 12 s;
#   2. 2 s in, path 1 (the replication link) goes down for 4 s (longer if the checks need it). alpha notices (ping timeout),
#      shows link Connecting and a growing out_of_sync_bytes, and keeps acknowledging writes:
#      writer 1's ledger grows during the outage, and writer 2, run entirely inside the outage on
#      the second 64 MiB, gets acknowledged writes and no failures;
#   3. the link comes back: a bitmap-based resync moves at most twice the bytes that were out of
#      sync just before (a full resync would move 128 MiB);
#   4. both nodes stop cleanly: the backing files are identical and beta's holds every write
#      either ledger saw acknowledged.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
require_hakd
require_cmd sha256sum jq

LEDGER=$TOOLS/hak-ledger
[[ -x $LEDGER ]] || fail "$LEDGER is not built (make BUILD=${HAK_BUILD#"$REPO"/} SAN=1 bins)"
MiB=$((1024 * 1024))
OUTAGE=4

# ledger_records FILE: acknowledged writes the ledger holds so far (the writer syncs every 100 ms).
ledger_records() {
	local sz
	sz=$(stat -c %s "$1" 2>/dev/null) || sz=32
	echo $(((sz > 32 ? sz - 32 : 0) / 16))
}

# summary_field TEXT WORD: the number before WORD in a "ledger: ..." or "verify: ..." line.
summary_field() {
	local re="([0-9]+) $2"
	[[ $1 =~ $re ]] || fail "no '$2' count in: $1"
	echo "${BASH_REMATCH[1]}"
}

# verify_clean LEDGER FILE: every acknowledged write of LEDGER is in FILE.
verify_clean() {
	local out rc=0
	out=$("$LEDGER" verify --ledger "$1" --file "$2" 2>&1) || rc=$?
	local line
	line=$(grep '^verify:' <<<"$out") || fail "verify printed no summary: $out"
	log "$(basename "$1") against $(basename "$2"): $line"
	assert_eq "$rc" 0 "verify exit status of $(basename "$1") ($out)"
	local missing corrupt ok
	missing=$(summary_field "$line" missing)
	corrupt=$(summary_field "$line" corrupt)
	ok=$(summary_field "$line" ok)
	assert_eq "$missing" 0 "missing blocks in $(basename "$1")"
	assert_eq "$corrupt" 0 "corrupt blocks in $(basename "$1")"
	((ok > 0)) || fail "verify of $(basename "$1") checked no block: $line"
}

PAIR_BLANK=1 pair_setup sync 128M
pair_report_logs
wait_synced 30
out=$(hk alpha primary db 2>&1) || fail "primary on alpha: $out"
wait_synced 30
rs0=$(repl alpha bytes_resynced)
n_rs0=$(repl alpha resyncs_completed)

# 1. The load.
L1=$WORK/w1.ledger
L2=$WORK/w2.ledger
"$LEDGER" write --uri "$(node_uri alpha)" --ledger "$L1" --seconds 12 --blocks 2048 \
	--writer-id 1 --seed 11 >"$WORK/w1.out" 2>"$WORK/w1.err" &
W1=$!
track_pid "$W1"
sleep 2
wait_for "(( \$(ledger_records '$L1') > 0 ))" 5 || fail "writer 1 got no write acknowledged: $(cat "$WORK/w1.err")"

# 2. The outage.
t_down=$(date +%s.%N)
path_down 1
defer "path_up 1"
log "path 1 down with $(ledger_records "$L1") writes acknowledged so far"
wait_repl alpha link Connecting 5
n1=$(ledger_records "$L1")
log "alpha noticed the outage after $(elapsed_since "$t_down") s ($n1 writes acknowledged):" \
	"$(grep -m1 'Lost the connection' "$WORK/alpha.log" || true)"
out=$("$LEDGER" write --uri "$(node_uri alpha)" --ledger "$L2" --seconds 1.5 \
	--region-offset $((64 * MiB)) --blocks 2048 --writer-id 2 --seed 22 2>"$WORK/w2.err") ||
	fail "writer 2 failed: $out $(cat "$WORK/w2.err")"
log "writer 2 (inside the outage): $out"
failed2=$(summary_field "$out" failed)
acked2=$(summary_field "$out" "writes acknowledged")
assert_eq "$failed2" 0 "writes of writer 2 that failed during the outage"
((acked2 > 0)) || fail "no write was acknowledged during the outage: $out"
st=$(hk alpha status --json | jq -c .volumes[0].replication)
assert_eq "$(jq -r .link <<<"$st")" Connecting "alpha's link during the outage ($st)"
assert_eq "$(jq -r .role <<<"$st")" primary "alpha's role during the outage"
oos_mid=$(jq -r .out_of_sync_bytes <<<"$st")
((oos_mid > 0)) || fail "alpha tracks nothing out of sync during the outage ($st)"
n2=$(ledger_records "$L1")
((n2 > n1)) || fail "writer 1 got no write acknowledged during the outage ($n1 -> $n2)"
# The link stays down for OUTAGE seconds, or longer if the checks above took longer (load).
el=$(elapsed_since "$t_down")
sleep "$(awk -v e="$el" -v o="$OUTAGE" 'BEGIN {printf "%.2f", e < o ? o - e : 0}')"
pid_alive "$W1" || fail "writer 1 stopped before the link came back: make its --seconds longer"
oos_up=$(repl alpha out_of_sync_bytes)
n3=$(ledger_records "$L1")
path_up 1
log "path 1 up after $(elapsed_since "$t_down") s: $oos_up bytes out of sync (mid-outage $oos_mid)," \
	"writer 1 acknowledged $((n3 - n1)) writes while the link was down"
((oos_up >= oos_mid)) || fail "out_of_sync_bytes shrank during the outage ($oos_mid -> $oos_up)"

# 3. Resync after the link is back.
wait "$W1" || fail "writer 1 exited with an error: $(cat "$WORK/w1.err")"
w1=$(cat "$WORK/w1.out")
log "writer 1: $w1"
failed1=$(summary_field "$w1" failed)
assert_eq "$failed1" 0 "writes of writer 1 that failed"
wait_synced 60
wait_repl alpha in_flight_writes 0 20
rs1=$(repl alpha bytes_resynced)
n_rs1=$(repl alpha resyncs_completed)
((n_rs1 > n_rs0)) || fail "no resync completed after the link came back ($n_rs0 -> $n_rs1)"
moved=$((rs1 - rs0))
log "resync after the outage moved $moved bytes for $oos_up bytes dirtied"
((moved > 0)) || fail "the resync moved no data"
assert_le "$moved" $((2 * oos_up)) "bytes resynced after the outage (limit: 2 x bytes dirtied)"
assert_le "$oos_up" $((16 * MiB)) "bytes out of sync (the writers cover 16 MiB)"

# 4. Identical copies holding every acknowledged write.
node_stop alpha
node_stop beta
a=$(sha256sum <"$(backing alpha)")
b=$(sha256sum <"$(backing beta)")
assert_eq "$b" "$a" "sha256 of beta's backing file vs alpha's"
verify_clean "$L1" "$(backing beta)"
verify_clean "$L2" "$(backing beta)"
log "PASS: outage of ${OUTAGE} s survived; $moved bytes resynced"
