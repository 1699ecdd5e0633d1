#!/usr/bin/env bash
# timeout: 150
# Split brain: both nodes become primary while the replication link is down and each writes
# something the other does not have.
#   1. a synced pair (blank metadata), path 1 down, both promoted (each is UpToDate, no --force),
#      alpha writes 1 MiB of 0x11 at 0, beta 1 MiB of 0x22 at 2 MiB; both demoted; path 1 up;
#   2. within 10 s both nodes report split_brain true and link StandAlone, name it in
#      last_refusal and log "split brain"; the backing files differ, each holds its own write;
#   3. beta's changes are discarded (resolve --discard-local), alpha connects, a resync makes
#      beta a copy of alpha: identical backing files, alpha's 0x11 at 0, and beta's 0x22 at 2 MiB
#      gone (zeros, as alpha never wrote there).
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
require_hakd
require_cmd qemu-io sha256sum jq cmp

MiB=$((1024 * 1024))

# rstat NODE: NODE's replication status as one line of JSON.
rstat() {
	hk "$1" status --json | jq -c '.volumes[0].replication'
}

# holds NODE FILE OFF: NODE's backing file holds FILE at OFF.
holds() {
	cmp -s -n "$(stat -c %s "$2")" -i "$3:0" "$(backing "$1")" "$2"
}

# both_split_brain: both nodes report split brain and stay StandAlone.
both_split_brain() {
	local n st
	for n in alpha beta; do
		st=$(rstat "$n") || return 1
		[[ $(jq -r '"\(.split_brain) \(.link)"' <<<"$st") == "true StandAlone" ]] || return 1
	done
}

PAIR_BLANK=1 pair_setup sync 64M
pair_report_logs
wait_synced 30
pattern_file "$WORK/p11" 1M 0x11
pattern_file "$WORK/p22" 1M 0x22
pattern_file "$WORK/p00" 1M 0x00

# 1. Two primaries, two different writes.
path_down 1
defer "path_up 1"
wait_repl alpha link Connecting 10
wait_repl beta link Connecting 10
for n in alpha beta; do
	out=$(hk "$n" primary db 2>&1) || fail "primary on $n (UpToDate, link down): $out"
done
out=$(qemu-io -f raw -c "write -P 0x11 0 1M" -c flush "$(node_uri alpha)" 2>&1) ||
	fail "write on alpha: $out"
out=$(qemu-io -f raw -c "write -P 0x22 2M 1M" -c flush "$(node_uri beta)" 2>&1) ||
	fail "write on beta: $out"
for n in alpha beta; do
	out=$(hk "$n" secondary db 2>&1) || fail "secondary on $n: $out"
done
t0=$(date +%s.%N)
path_up 1

# 2. Both detect it and stop trying.
wait_for both_split_brain 10 ||
	fail "split brain not reported by both within 10 s: alpha $(rstat alpha), beta $(rstat beta)"
log "both nodes report split brain $(elapsed_since "$t0") s after the link came back"
for n in alpha beta; do
	grep -qi 'split brain' "$WORK/$n.log" || fail "$n's log does not mention the split brain"
	assert_contains "$(repl "$n" last_refusal)" "split brain" "$n's last_refusal"
	log "$n: $(grep -i -m1 'split brain' "$WORK/$n.log")"
done
# It stays that way: StandAlone means no reconnect attempts that could resync either way.
sleep 1
both_split_brain || fail "the split brain state did not last: alpha $(rstat alpha), beta $(rstat beta)"
holds alpha "$WORK/p11" 0 || fail "alpha's backing file lacks its own 0x11 write"
holds beta "$WORK/p22" $((2 * MiB)) || fail "beta's backing file lacks its own 0x22 write"
holds beta "$WORK/p11" 0 && fail "beta got alpha's write although they were split"
holds alpha "$WORK/p22" $((2 * MiB)) && fail "alpha got beta's write although they were split"
[[ $(sha256sum <"$(backing alpha)") != $(sha256sum <"$(backing beta)") ]] ||
	fail "the copies are identical after a split brain"

# 3. Resolve in favour of alpha.
out=$(hk beta resolve db --discard-local 2>&1) || fail "resolve --discard-local on beta: $out"
out=$(hk alpha connect db 2>&1) || fail "connect on alpha: $out"
wait_synced 60
for n in alpha beta; do
	assert_eq "$(repl "$n" split_brain)" false "$n's split_brain after the resolution"
done
node_stop alpha
node_stop beta
a=$(sha256sum <"$(backing alpha)")
b=$(sha256sum <"$(backing beta)")
assert_eq "$b" "$a" "sha256 of beta's backing file vs alpha's after the resolution"
holds beta "$WORK/p11" 0 || fail "beta's backing file does not hold alpha's 0x11 at 0"
holds beta "$WORK/p22" $((2 * MiB)) && fail "beta's backing file still holds its discarded 0x22 at 2 MiB"
holds beta "$WORK/p00" $((2 * MiB)) || fail "beta's 2 MiB..3 MiB is not zeros like alpha's"
log "PASS: split brain detected on both nodes and resolved by discarding beta's changes"
