#!/usr/bin/env bash
# timeout: 240
# A node dies with kill -9 in the middle of a resync.
#   A. The TARGET dies: alpha (primary) is disconnected, 64 MiB of random data is written to it,
#      the link is throttled to 100 Mbit/s (tc tbf in alpha's namespace) so the resync takes
#      seconds, alpha reconnects; once beta (SyncTarget) has applied a good part, beta is killed.
#      alpha keeps serving reads and writes; beta restarts; the second resync resumes (moves
#      less than the first one had to); the copies end identical and hold the random data.
#   B. The SOURCE dies: the same, but alpha (primary, SyncSource) is killed. beta stays
#      Inconsistent and refuses 'primary' without --force, naming its Inconsistent disk. alpha
#      restarts (UpToDate, crashed primary), is promoted again, the resync completes, the copies
#      end identical and hold the second random data set.
#   C. The SOURCE is a secondary and the link drops: alpha writes while disconnected, is demoted,
#      reconnects and resyncs beta as a secondary; path 1 goes down mid-resync and comes back; the
#      resync resumes (moves less than the cut run had) and the copies end identical.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
require_hakd
require_cmd nbdcopy qemu-io sha256sum jq cmp tc

MiB=$((1024 * 1024))
DIRTY=$((64 * MiB))
RATE=100mbit

# rstat NODE: NODE's replication status as one line of JSON.
rstat() {
	hk "$1" status --json | jq -c '.volumes[0].replication'
}

# dirty_alpha FILE: alpha goes StandAlone and FILE (random data) is copied to the start of its export.
dirty_alpha() {
	local out
	head -c "$DIRTY" /dev/urandom >"$1"
	out=$(hk alpha disconnect db 2>&1) || fail "disconnect on alpha: $out"
	wait_repl alpha link StandAlone 10
	nbdcopy --flush "$1" "$(node_uri alpha)" || fail "nbdcopy of $1 into alpha's export failed"
	local oos
	oos=$(repl alpha out_of_sync_bytes)
	assert_eq "$oos" "$DIRTY" "alpha's out_of_sync_bytes after writing $DIRTY random bytes"
}

# midresync: reconnect and wait until beta (SyncTarget) applied 40% of the resync. Sets RS_TOTAL
# (alpha's view of the run) and RS_DONE (beta's applied bytes).
midresync() {
	link_throttle "$RATE"
	out=$(hk alpha connect db 2>&1) || fail "connect on alpha: $out"
	wait_target_share 40 "before the crash"
	((RS_DONE > 0)) || fail "beta applied nothing yet"
	((RS_TOTAL >= DIRTY)) || fail "the resync covers only $RS_TOTAL bytes, want >= $DIRTY"
	((RS_DONE < RS_TOTAL)) || fail "the resync finished before the crash ($RS_DONE of $RS_TOTAL): throttle it more"
	log "mid-resync: beta applied $RS_DONE of $RS_TOTAL bytes"
}

# holds NODE FILE OFF: NODE's backing file holds FILE at OFF.
holds() {
	cmp -s -n "$(stat -c %s "$2")" -i "$3:0" "$(backing "$1")" "$2"
}

PAIR_BLANK=1 pair_setup sync 128M
pair_report_logs
wait_synced 30
out=$(hk alpha primary db 2>&1) || fail "primary on alpha: $out"
wait_synced 30

# ---- A: the target dies mid-resync -------------------------------------------------------------
dirty_alpha "$WORK/rand1"
bytes0=$(repl alpha bytes_resynced)
t0=$(date +%s.%N)
midresync
first_total=$RS_TOTAL
node_kill9 beta
st=$(rstat alpha)
log "alpha after beta's death: $st"
# alpha serves on: a write and a read-back through NBD while its peer is dead.
pattern_file "$WORK/pat5c" 1M 0x5c
out=$(qemu-io -f raw -c "write -P 0x5c 100M 1M" -c flush -c "read -P 0x5c 100M 1M" \
	"$(node_uri alpha)" 2>&1) || fail "alpha stopped serving after beta died: $out"
assert_eq "$(repl alpha role)" primary "alpha's role after beta died"
wait_repl alpha link Connecting 10
node_start beta
wait_synced 90
link_throttle off
moved=$(($(repl alpha bytes_resynced) - bytes0))
log "A: resync after the restart moved $moved bytes; the interrupted one had $first_total" \
	"(beta had applied $RS_DONE); total $(elapsed_since "$t0") s"
((moved > 0)) || fail "no resync ran after beta's restart"
((moved < first_total)) ||
	fail "the resync did not resume: it moved $moved bytes again, the interrupted run had $first_total"
assert_eq "$(repl beta disk)" UpToDate "beta's disk after the resumed resync"

# ---- B: the source dies mid-resync -------------------------------------------------------------
dirty_alpha "$WORK/rand2"
t0=$(date +%s.%N)
midresync
node_kill9 alpha
link_throttle off
wait_repl beta link Connecting 10
st=$(rstat beta)
log "beta after alpha's death: $st"
assert_eq "$(jq -r .disk <<<"$st")" Inconsistent "beta's disk after its source died"
rc=0
out=$(hk beta primary db 2>&1) || rc=$?
((rc != 0)) || fail "beta (Inconsistent) was promoted without --force: $out"
assert_contains "$out" Inconsistent "beta's refusal to be promoted"
log "beta refuses promotion: $out"
assert_eq "$(repl beta role)" secondary "beta's role after the refused promotion"
out=$(LIBNBD_DEBUG=1 timeout 20 nbdinfo "$(node_uri beta)" 2>&1) &&
	fail "beta serves NBD clients while Inconsistent"
assert_contains "$out" "is secondary" "beta's NBD refusal"

node_start alpha
assert_eq "$(repl alpha disk)" UpToDate "alpha's disk after its restart"
out=$(hk alpha primary db 2>&1) || fail "promoting the restarted alpha (UpToDate) failed: $out"
wait_synced 90
log "B: resync after alpha's restart done in $(elapsed_since "$t0") s:" \
	"$(grep 'Starting a' "$WORK/alpha.log" | tail -n 1)"
assert_eq "$(repl alpha role)" primary "alpha's role after it was promoted again"
holds beta "$WORK/rand2" 0 || fail "B: beta's backing file does not hold the second random data set"

# ---- C: the source is a secondary and the link drops mid-resync --------------------------------
dirty_alpha "$WORK/rand3"
out=$(hk alpha secondary db 2>&1) || fail "demoting alpha failed: $out"
bytes0=$(repl alpha bytes_resynced)
t0=$(date +%s.%N)
midresync
assert_eq "$(repl alpha role)" secondary "C: alpha's role while it is the resync source"
assert_eq "$(repl alpha link)" SyncSource "C: alpha's link state"
first_total=$RS_TOTAL
path_down 1
wait_for "[[ \$(repl alpha link) != SyncSource && \$(repl beta link) != SyncTarget ]]" 10 ||
	fail "C: the nodes did not notice the cut link (alpha $(repl alpha link), beta $(repl beta link))"
assert_eq "$(repl beta disk)" Inconsistent "C: beta's disk while its source is cut off"
log "C: link cut with beta at $RS_DONE of $RS_TOTAL bytes: $(rstat beta)"
link_throttle off
path_up 1
wait_synced 90
moved=$(($(repl alpha bytes_resynced) - bytes0))
log "C: resync from secondary alpha done in $(elapsed_since "$t0") s: the resumed run moved" \
	"$moved bytes, the cut one had $first_total (beta had applied $RS_DONE)"
((moved > 0)) || fail "C: no resync ran after the link came back"
((moved < first_total)) ||
	fail "C: the resync did not resume after the cut: it moved $moved bytes again, the cut run had $first_total"
assert_eq "$(repl alpha role)" secondary "C: alpha's role after the resync"

node_stop alpha
node_stop beta
a=$(sha256sum <"$(backing alpha)")
b=$(sha256sum <"$(backing beta)")
assert_eq "$b" "$a" "sha256 of beta's backing file vs alpha's"
holds beta "$WORK/rand3" 0 || fail "beta's backing file does not hold the third random data set"
holds beta "$WORK/pat5c" $((100 * MiB)) || fail "beta's backing file lacks the write made while it was dead"
log "PASS: both crashes healed; the copies are identical"
