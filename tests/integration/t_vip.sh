#!/usr/bin/env bash
# timeout: 120
# The vip resource on real interfaces: three namespaces A, B, C on one L2 segment (a bridge in
# B, veths from A and C). The VIP (192.0.2.10/24, then 2001:db8::10/64) is added in A with
# hak-vip (vip.c): B reaches it, B's listener counts the gratuitous ARPs of the 5 + 5 schedule
# with the second burst after the delay, a second add is idempotent, removal makes it
# unreachable, and the VIP moved to C takes over B's neighbour entry through C's announcements
# alone, before B sends any packet to it. IPv6: added without DAD, reachable, 5 unsolicited NAs.
. "$(dirname "$0")/lib.sh"

require_cmd ip ping
VIP=$TOOLS/hak-vip
[[ -x $VIP ]] || fail "$VIP is missing; build with make bins"

SID=$(printf '%06x' $(((($$ << 15) + RANDOM) & 0xffffff)))
NS_A=hak-va-$SID NS_B=hak-vb-$SID NS_C=hak-vc-$SID
V4=192.0.2.10 V6=2001:db8::10

for ns in "$NS_A" "$NS_B" "$NS_C"; do
	ip netns add "$ns"
	defer "ip netns del $ns 2>/dev/null || true"
	ip -n "$ns" link set lo up
done
ip -n "$NS_B" link add br0 type bridge
ip -n "$NS_B" link set br0 up
for x in a c; do
	ns=NS_${x^^}
	ip link add "v$x-$SID" type veth peer name "b$x-$SID"
	ip link set "v$x-$SID" netns "${!ns}"
	ip link set "b$x-$SID" netns "$NS_B"
	ip -n "$NS_B" link set "b$x-$SID" master br0 up
	ip -n "${!ns}" link set "v$x-$SID" up
done
IF_A=va-$SID IF_C=vc-$SID
ip -n "$NS_A" addr add 192.0.2.1/24 dev "$IF_A"
ip -n "$NS_B" addr add 192.0.2.2/24 dev br0
ip -n "$NS_C" addr add 192.0.2.3/24 dev "$IF_C"
ip -n "$NS_A" addr add 2001:db8::1/64 dev "$IF_A" nodad
ip -n "$NS_B" addr add 2001:db8::2/64 dev br0 nodad
ip -n "$NS_C" addr add 2001:db8::3/64 dev "$IF_C" nodad
MAC_A=$(ip -n "$NS_A" -j link show "$IF_A" | jq -r '.[0].address')
MAC_C=$(ip -n "$NS_C" -j link show "$IF_C" | jq -r '.[0].address')
wait_for "ip netns exec $NS_B ping -c1 -W1 192.0.2.1" 10 || fail "the test segment does not work"
wait_for "ip netns exec $NS_B ping -c1 -W1 192.0.2.3" 10 || fail "the test segment does not work"
log "segment up: A $MAC_A, C $MAC_C, bridge in B"

in_a() { ip netns exec "$NS_A" "$@"; }
in_b() { ip netns exec "$NS_B" "$@"; }
in_c() { ip netns exec "$NS_C" "$@"; }
neigh_b() { in_b ip -j neigh show "$1" dev br0 | jq -r '.[0].lladdr // "none"'; }

# listen_b ADDR SECONDS NAME: start B's listener in the background, wait until it listens.
listen_b() {
	rm -f "$WORK/$3.ready"
	in_b "$VIP" listen br0 "$1" "$2" "$WORK/$3.ready" >"$WORK/$3.out" 2>&1 &
	LISTENER=$!
	track_pid "$LISTENER"
	wait_for "[[ -e $WORK/$3.ready ]]" 5 || fail "the listener in B did not start"
}

# ---- IPv4 in A ----
in_b ping -c1 -W1 "$V4" >/dev/null 2>&1 && fail "$V4 answers before it was added"
listen_b "$V4" 4 garp4
in_a "$VIP" add "$IF_A" "$V4/24" || fail "adding $V4 in A failed"
in_a "$VIP" present "$IF_A" "$V4" || fail "$V4 is not on $IF_A after the add"
t0=$(date +%s%N)
out=$(in_a "$VIP" garp "$IF_A" "$V4/24" 5 1.5) || fail "the announcements from A failed: $out"
assert_eq "$out" "Sent 10 announcements of $V4/24 on $IF_A." "hak-vip garp"
took=$((($(date +%s%N) - t0) / 1000000))
((took >= 1400)) || fail "the schedule finished after ${took}ms, before its 1.5s delay"
wait "$LISTENER" || fail "the listener failed: $(cat "$WORK/garp4.out")"
assert_eq "$(grep -c "^announce .* $MAC_A\$" "$WORK/garp4.out")" 10 "gratuitous ARPs from A seen in B"
assert_eq "$(tail -n1 "$WORK/garp4.out")" "total 10" "announcements for $V4 seen in B"
# the two bursts: 5 packets, then 5 more at least the delay later
first=$(awk '/^announce/ {print $2; exit}' "$WORK/garp4.out")
sixth=$(awk '/^announce/ {if (++n == 6) print $2}' "$WORK/garp4.out")
fifth=$(awk '/^announce/ {if (++n == 5) print $2}' "$WORK/garp4.out")
((fifth - first < 500)) || fail "the first burst took $((fifth - first))ms"
((sixth - first >= 1400)) || fail "the second burst came $((sixth - first))ms after the first"
log "10 gratuitous ARPs seen in B: first burst in $((fifth - first))ms, second $((sixth - first))ms later"
in_b ping -c1 -W2 "$V4" >/dev/null || fail "B cannot ping $V4 in A"
assert_eq "$(neigh_b "$V4")" "$MAC_A" "B's neighbour entry for $V4"

# a second add is a success and leaves one address
in_a "$VIP" add "$IF_A" "$V4/24" || fail "a second add of $V4 failed"
assert_eq "$(in_a ip -j -4 addr show dev "$IF_A" | jq "[.[0].addr_info[] | select(.local == \"$V4\")] | length")" 1 \
	"copies of $V4 on $IF_A"

# ---- removal: idempotent, and the address stops answering ----
in_a "$VIP" remove "$IF_A" "$V4/24" || fail "removing $V4 failed"
in_a "$VIP" remove "$IF_A" "$V4/24" || fail "a second remove of $V4 failed"
in_a "$VIP" present "$IF_A" "$V4" && fail "$V4 is still on $IF_A"
in_b ping -c1 -W1 "$V4" >/dev/null 2>&1 && fail "$V4 still answers after the remove"
log "idempotent add and remove; $V4 gone"

# ---- the VIP moves to C: B's entry follows C's announcements, without B sending anything ----
assert_eq "$(neigh_b "$V4")" "$MAC_A" "B's neighbour entry before the move"
in_c "$VIP" add "$IF_C" "$V4/24" || fail "adding $V4 in C failed"
out=$(in_c "$VIP" garp "$IF_C" "$V4" 5 0) || fail "the announcements from C failed: $out"
wait_for "[[ \$(neigh_b $V4) == $MAC_C ]]" 3 || fail "B's neighbour entry for $V4 is $(neigh_b "$V4"), not C's $MAC_C"
log "B's neighbour entry for $V4 moved from $MAC_A to $MAC_C on the announcements alone"
in_b ping -c1 -W2 "$V4" >/dev/null || fail "B cannot ping $V4 in C"
in_c "$VIP" remove "$IF_C" "$V4/24" || fail "removing $V4 from C failed"

# ---- IPv6 in A ----
listen_b "$V6" 3 na6
in_a "$VIP" add "$IF_A" "$V6/64" || fail "adding $V6 in A failed"
flags=$(in_a ip -j -6 addr show dev "$IF_A" | jq -c ".[0].addr_info[] | select(.local == \"$V6\")")
[[ -n $flags ]] || fail "$V6 is not on $IF_A"
assert_not_contains "$flags" tentative "$V6 flags"
assert_contains "$flags" '"nodad":true' "$V6 flags"
out=$(in_a "$VIP" garp "$IF_A" "$V6" 5 0) || fail "the advertisements from A failed: $out"
wait "$LISTENER" || fail "the listener failed: $(cat "$WORK/na6.out")"
assert_eq "$(grep -c "^announce .* $MAC_A\$" "$WORK/na6.out")" 5 "unsolicited NAs from A seen in B"
in_b ping -6 -c1 -W2 "$V6" >/dev/null || fail "B cannot ping $V6 in A"
in_a "$VIP" add "$IF_A" "$V6/64" || fail "a second add of $V6 failed"
in_a "$VIP" remove "$IF_A" "$V6/64" || fail "removing $V6 failed"
in_a "$VIP" remove "$IF_A" "$V6/64" || fail "a second remove of $V6 failed"
in_a "$VIP" present "$IF_A" "$V6" && fail "$V6 is still on $IF_A"
log "IPv6: added without DAD, 5 unsolicited NAs seen in B, reachable, removed"
log "PASS"
