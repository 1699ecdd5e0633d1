#!/usr/bin/env bash
# timeout: 120
# sched-policy batch holds only while a node is primary for every volume: a secondary's event
# loop and I/O workers run with the normal policy, so the peer's writes are served at once even
# when the secondary's CPU is busy (with batch, a 4 KiB sync write at QD1 took 3.4 ms instead of
# 0.2 ms behind a busy loop there: bench/replication.sh BUSY_PEER=1). Checked on the threads
# themselves: /proc/PID/task/TID/stat field 41 is the policy (0 SCHED_OTHER, 3 SCHED_BATCH).
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
require_hakd
require_cmd jq qemu-io

# policies NODE: "NAME=POLICY" for hakd's main thread and its I/O workers (hakd-io*), sorted.
policies() {
	local pid=${NODE_PIDS[$1]} t name st
	for t in /proc/"$pid"/task/*; do
		name=$(cat "$t/comm" 2>/dev/null) || continue
		[[ $name == hakd || $name == hakd-io* ]] || continue
		st=$(cat "$t/stat" 2>/dev/null) || continue
		st=${st##*) }
		echo "$name=$(awk '{print $39}' <<<"$st")"
	done | sort | paste -sd' '
}

# all_policy NODE POLICY: every such thread runs with POLICY.
all_policy() {
	local p
	p=$(policies "$1")
	[[ -n $p ]] || return 1
	! tr ' ' '\n' <<<"$p" | grep -qv "=$2\$"
}

pair_setup sync 64M
pair_report_logs
wait_repl alpha link Connected 20
# Both start as secondaries: normal everywhere (the workers take it before their first job).
for n in alpha beta; do
	wait_for "all_policy $n 0" 10 || fail "$n (secondary) threads: $(policies "$n"), want all 0"
done
log "both secondary: alpha $(policies alpha); beta $(policies beta)"
out=$(hk alpha primary db --force 2>&1) || fail "primary on alpha: $out"
wait_synced 60
wait_for "all_policy alpha 3" 10 || fail "alpha (primary) threads: $(policies alpha), want all 3"
all_policy beta 0 || fail "beta (secondary) threads: $(policies beta), want all 0"
# Writes through the primary: the secondary's workers apply them and stay normal.
qemu-io -f raw -c "write -P 0x5a 0 4M" "$(node_uri alpha)" >/dev/null ||
	fail "writing through alpha failed"
all_policy beta 0 || fail "beta's threads after applying writes: $(policies beta), want all 0"
grep -q "The I/O threads run with the batch CPU scheduling policy now" "$WORK/alpha.log" ||
	fail "alpha did not log its change to batch"
log "alpha primary: $(policies alpha); beta secondary: $(policies beta)"
out=$(hk alpha secondary db 2>&1) || fail "secondary on alpha: $out"
wait_for "all_policy alpha 0" 10 || fail "alpha (secondary again) threads: $(policies alpha)"
log "PASS: batch only on the primary, normal on the secondary, both ways"
