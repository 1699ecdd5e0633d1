#!/usr/bin/env bash
# timeout: 120
# The event stream (hakctl events) during a disconnect, a resync that is interrupted, and one
# that finishes:
#   1. a synced pair; a watcher runs `hakctl events` on each node; alpha is promoted;
#   2. alpha disconnects (operator), writes 24 MiB, path 1 is throttled to 40 Mbit/s and alpha
#      connects: a bitmap resync starts (source on alpha, target on beta, 24 MiB);
#   3. while it runs alpha disconnects again: the resync is interrupted; the throttle goes away,
#      alpha connects, the resync finishes;
#   4. each watcher's lines are `<type> time:<unix.ms> key:value...`, in the order of the
#      transitions, with the right keys and byte counts.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
require_hakd
require_cmd qemu-io jq tc

MiB=$((1024 * 1024))

PAIR_BLANK=1 pair_setup sync 64M
pair_report_logs
wait_synced 30
declare -A WATCH=()
for n in alpha beta; do
	timeout 90 "$HAKCTL" --control "$WORK/$n.ctl" events --timeout 80 >"$WORK/ev.$n" 2>"$WORK/ev.$n.err" &
	WATCH[$n]=$!
	track_pid "${WATCH[$n]}"
done
sleep 0.3
out=$(hk alpha primary db 2>&1) || fail "primary on alpha: $out"

# 2. Writes while disconnected, then a throttled resync.
out=$(hk alpha disconnect db 2>&1) || fail "disconnect on alpha: $out"
wait_repl beta link Connecting 10
out=$(qemu-io -f raw -c "write -P 0x5a 0 24M" -c flush "$(node_uri alpha)" 2>&1) ||
	fail "write on alpha: $out"
ip netns exec "$NS_alpha" tc qdisc add dev "ha1-$PAIR_SID" root tbf rate 40mbit burst 32kb latency 400ms
defer "ip netns exec $NS_alpha tc qdisc del dev ha1-$PAIR_SID root"
out=$(hk alpha connect db 2>&1) || fail "connect on alpha: $out"
wait_repl alpha link SyncSource 10
wait_for "grep -q '^resync-start ' $WORK/ev.alpha" 5 || fail "no resync-start event on alpha"

# 3. Interrupt it, then let it finish.
sleep 1
out=$(hk alpha disconnect db 2>&1) || fail "second disconnect on alpha: $out"
wait_for "grep -q '^resync-interrupt ' $WORK/ev.alpha" 5 || fail "no resync-interrupt event on alpha"
ip netns exec "$NS_alpha" tc qdisc del dev "ha1-$PAIR_SID" root
out=$(hk alpha connect db 2>&1) || fail "third connect on alpha: $out"
wait_synced 60
wait_for "grep -q '^resync-end ' $WORK/ev.alpha && grep -q '^resync-end ' $WORK/ev.beta" 5 ||
	fail "no resync-end event on both nodes"
sleep 0.3
for n in alpha beta; do
	kill "${WATCH[$n]}" 2>/dev/null || true
	wait "${WATCH[$n]}" 2>/dev/null || true
	log "$n events:"
	sed 's/^/    /' "$WORK/ev.$n"
done

# 4. The lines.
for n in alpha beta; do
	bad=$(grep -vE '^[a-z-]+ time:[0-9]{10}\.[0-9]{3}( [a-z-]+:[^ ]+)+$' "$WORK/ev.$n" || true)
	[[ -z $bad ]] || fail "$n: malformed event lines: $bad"
done
# types_of NODE: the event types in order, one line.
types_of() {
	awk '{print $1}' "$WORK/ev.$1" | tr '\n' ' '
}
assert_eq "$(types_of alpha)" "role disconnect connect resync-start disconnect resync-interrupt connect resync-start resync-end " "alpha's event sequence"
assert_eq "$(types_of beta)" "disconnect connect resync-start disconnect resync-interrupt connect resync-start resync-end " "beta's event sequence"
ev() { # ev NODE TYPE N: the Nth line of TYPE on NODE
	grep "^$2 " "$WORK/ev.$1" | sed -n "${3:-1}p"
}
assert_contains "$(ev alpha role)" " volume:db node:alpha role:primary" "alpha's role event"
assert_contains "$(ev alpha disconnect 1)" "reason:the-operator-disconnected" "alpha's first disconnect"
assert_contains "$(ev beta disconnect 1)" "volume:db peer:alpha reason:" "beta's first disconnect"
assert_contains "$(ev alpha connect 1)" "peer:beta peer-role:secondary peer-disk:UpToDate decision:sync-source" "alpha's connect"
assert_contains "$(ev beta connect 1)" "peer:alpha peer-role:primary peer-disk:UpToDate decision:sync-target" "beta's connect"
assert_contains "$(ev alpha resync-start 1)" "direction:source full:no bytes:$((24 * MiB))" "alpha's first resync-start"
assert_contains "$(ev beta resync-start 1)" "direction:target full:no bytes:$((24 * MiB))" "beta's first resync-start"
int=$(ev alpha resync-interrupt)
[[ $int =~ direction:source\ bytes:([0-9]+)\ left-bytes:([0-9]+) ]] || fail "alpha's resync-interrupt: $int"
done_b=${BASH_REMATCH[1]} left=${BASH_REMATCH[2]}
((done_b > 0 && left > 0 && left < 24 * MiB)) ||
	fail "the interrupted resync should have moved some but not all bytes: $int"
second=$(ev alpha resync-start 2)
[[ $second =~ bytes:([0-9]+) ]] || fail "alpha's second resync-start: $second"
((BASH_REMATCH[1] >= left && BASH_REMATCH[1] < 24 * MiB)) ||
	fail "the second resync should cover what was left ($left bytes) and less than all: $second"
assert_contains "$(ev alpha resync-end)" "direction:source bytes:${BASH_REMATCH[1]}" "alpha's resync-end"
assert_contains "$(ev beta resync-end)" "direction:target bytes:${BASH_REMATCH[1]}" "beta's resync-end"
grep -q 'Event resync-end volume:db' "$WORK/alpha.log" || fail "alpha's log lacks the resync-end event line"
log "PASS: role, disconnect, connect and resync start/interrupt/end events on both nodes"
