#!/usr/bin/env bash
# timeout: 300
# The cluster key is rotated without a gap: alpha, beta and the witness each read their own copy
# of the key file, and an operator replaces them one at a time, seconds apart, while the pair
# serves writes. Throughout: neither node declares the other (or a heartbeat path) dead, alpha
# stays the only primary, nobody asks the witness for the vote, and the witness stays reachable.
# While only alpha has the new key, its status says the rotation waits for the peer and the
# witness, beta rejects the packets it cannot verify yet, and a replication reconnect (path 1
# cut and healed) still authenticates, under the old key. Once all three have it, each side
# ends in the grace period, a reconnect authenticates under the new key, and the old key file
# alone no longer gets a connection through (an evil peer holding it is refused). The copies
# are equal at the end.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
# shellcheck source=tests/integration/cluster.sh
. "$(dirname "$0")/cluster.sh"
require_hakd
require_cmd jq sha256sum

CLUSTER_KEY_SPLIT=1
PAIR_BLANK=1 CLUSTER_HB_INTERVAL=100ms CLUSTER_DEADTIME=500ms cluster_setup sync 64M
pair_report_logs
wait_synced 30
wait_for "[[ -f $WORK/alpha.marker && \$(cl alpha rule) == serve ]]" 15 ||
	fail "alpha did not take the primary role with its group: $(hk alpha status)"
hk beta unstandby >/dev/null
wait_for "[[ \$(cl beta standby) == false ]]" 5 || fail "beta did not leave standby"
cp -p "$WORK/cluster.key" "$WORK/old.key"
assert_eq "$(cl alpha key.peer) $(cl alpha key.witness)" "none none" "alpha's rotation before"

new_key() {
	(umask 077 && head -c 32 /dev/urandom | base64 >"$WORK/new.key")
}
# install FILE NODE: the way an operator should replace a key file (rename over the old one)
install_key() {
	cp -p "$1" "$(_cluster_key "$2").tmp" && mv "$(_cluster_key "$2").tmp" "$(_cluster_key "$2")"
}
alive_both() {
	[[ $(cl alpha peer.alive) == true && $(cl beta peer.alive) == true &&
		$(cl alpha witness.reachable) == true && $(cl beta witness.reachable) == true ]]
}

# A steady trickle of writes through alpha, checked at the end by the copies' checksums.
fio --name=trickle --ioengine=nbd --uri="$(node_uri alpha)" --rw=randwrite --bs=4k \
	--iodepth=4 --size=32M --rate_iops=200 --time_based --runtime=20 \
	--output="$WORK/fio.out" >/dev/null 2>&1 &
FIO=$!
track_pid "$FIO"

new_key
install_key "$WORK/new.key" alpha
wait_for "[[ \$(cl alpha key.peer) == waiting && \$(cl alpha key.witness) == waiting ]]" 5 ||
	fail "alpha did not start the rotation: $(hk alpha status --json | jq -c .cluster.key)"
sleep 2
alive_both || fail "a node lost its peer or the witness while only alpha had the new key"
assert_eq "$(cl beta key.peer)" "none" "beta's rotation while it has the old key"
assert_contains "$(hk alpha status)" "cluster key rotation: peer waiting, witness waiting" \
	"hakctl status on alpha mid-rotation"
log "only alpha rotated: alpha $(hk alpha status --json | jq -c .cluster.key), beta alive"

# The replication link reconnects while the keys differ: the old key still proves alpha.
path_down 1
wait_for "[[ \$(repl alpha link) != Connected ]]" 20 || fail "cutting path 1 did not drop the link"
path_up 1
wait_repl alpha link Connected 30
wait_repl beta link Connected 30
log "replication reconnected with the keys half rotated"

install_key "$WORK/new.key" beta
wait_for "[[ \$(cl alpha key.peer) == grace && \$(cl beta key.peer) == grace ]]" 5 ||
	fail "the heartbeats did not settle on the new key: alpha $(hk alpha status --json |
		jq -c .cluster.key), beta $(hk beta status --json | jq -c .cluster.key)"
# the witness client checks its file on its own (once a second too)
wait_for "[[ \$(cl beta key.witness) == waiting ]]" 5 ||
	fail "beta's witness client did not start the rotation: $(hk beta status --json | jq -c .cluster.key)"
sleep 1
alive_both || fail "a node lost its peer or the witness with the witness on the old key"
install_key "$WORK/new.key" witness
wait_for "[[ \$(cl alpha key.witness) == grace && \$(cl beta key.witness) == grace ]]" 5 ||
	fail "the witness requests did not settle on the new key: alpha $(hk alpha status --json |
		jq -c .cluster.key), beta $(hk beta status --json | jq -c .cluster.key)"
sleep 1
alive_both || fail "a node lost its peer or the witness after the rotation"

# A reconnect now runs under the new key, and that ends the replication key's rotation.
path_down 1
wait_for "[[ \$(repl alpha link) != Connected ]]" 20 || fail "cutting path 1 did not drop the link"
path_up 1
wait_repl alpha link Connected 30
wait_repl beta link Connected 30
wait_for "grep -q 'authenticated with the new replication key' $WORK/alpha.log $WORK/beta.log" 10 ||
	fail "no connection proved the new replication key"

# Holding only the old key gets nobody in any more.
refused0=$(hk beta status --json | jq '.volumes[0].replication.auth_refused')
ip netns exec "$NS_alpha" timeout 10 "$HAK_BUILD/tests/tools/hak-evilpeer" --connect 192.0.2.2:7789 \
	--node alpha --peer beta --volume db --key "$WORK/old.key" --scenario garbage >"$WORK/evil.log" 2>&1 || true
wait_for "(( \$(hk beta status --json | jq '.volumes[0].replication.auth_refused') > $refused0 ))" 10 ||
	fail "a connection holding the old key was not refused: $(tail -3 "$WORK/evil.log")"

wait "$FIO" || fail "the writes failed: $(tail -5 "$WORK/fio.out")"
# path 0 shares the veth cut twice above; path 1 and the peer must never have gone dead
dead=$(grep -hE 'heartbeat-path path:1 state:dead|peer .*state:dead' "$WORK/alpha.log" \
	"$WORK/beta.log" | head -3 || true)
[[ -z $dead ]] || fail "heartbeat path 1 or the peer was declared dead: $dead"
n_cut=$(grep -c 'heartbeat-path path:0 state:dead' "$WORK/alpha.log" || true)
((n_cut == 2)) || fail "path 0 went dead $n_cut times on alpha; the test cut it twice"
assert_eq "$(role alpha) $(role beta)" "primary secondary" "the roles after the rotation"
assert_eq "$(cl alpha witness.want) $(cl beta witness.want)" "false false" "votes asked for"
wait_synced 30
assert_eq "$(sha256sum <"$(backing alpha)")" "$(sha256sum <"$(backing beta)")" "both copies"
log "PASS: the cluster key rotated on alpha, beta and the witness one by one without a gap"
