#!/usr/bin/env bash
# timeout: 240
# hakctl drill against a running pair (cluster.sh: alpha, beta, witness; the group's second
# resource is a service whose pid file names a sleep process it started):
#  - refused, with the exact reason, on a pair whose replication link is down, for an unknown
#    scenario, without --peer-socket, and by a hakd without allow-drills;
#  - crash-service kills the service: the group restarts it in place, no failover, the report
#    has the service failure noticed before the service is back and the check passes; with a
#    check that never passes the drill stops at --timeout naming that step (exit 4), and an
#    --rpo-cmd that prints no number is reported as such;
#  - crash-primary kills the primary's hakd and its service (their pids are gone afterwards):
#    the survivor detects, promotes, starts its group, and the report's times are ordered
#    (detection <= promotion <= group started <= check) with --rpo-cmd's number in it;
#  - switchover (back to alpha, restarted): the old primary's services stop before the
#    promotion, and the roles end swapped.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
# shellcheck source=tests/integration/cluster.sh
. "$(dirname "$0")/cluster.sh"
require_hakd
require_cmd jq

cluster_group_extra() {
	cat <<EOC
    resource svc {
        type exec
        start "setsid sleep 600 </dev/null >/dev/null 2>&1 & echo \$! >$WORK/$1.svc.pid"
        stop "kill \$(cat $WORK/$1.svc.pid) 2>/dev/null; rm -f $WORK/$1.svc.pid"
        monitor "kill -0 \$(cat $WORK/$1.svc.pid) 2>/dev/null && ! grep -q '^State:.*Z' /proc/\$(cat $WORK/$1.svc.pid)/status"
        pidfile $WORK/$1.svc.pid
        timeout 5s
    }
EOC
}
drill() {
	timeout 120 "$HAKCTL" --control "$WORK/alpha.ctl" drill "$@" --peer-socket "$WORK/beta.ctl"
}

CLUSTER_GLOBAL_EXTRA="allow-drills yes" PAIR_BLANK=1 cluster_setup sync 64M
pair_report_logs
wait_synced 30
wait_for "[[ -f $WORK/alpha.svc.pid && \$(cl alpha rule) == serve ]]" 15 ||
	fail "alpha did not start its group: $(hk alpha status)"
# beta runs without allow-drills: its hakd refuses to inject a fault
node_stop beta
sed -i '/allow-drills yes/d' "$WORK/beta.conf"
node_start beta
wait_synced 30
out=$(python3 - "$WORK/beta.ctl" <<'PY2'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
s.connect(sys.argv[1])
s.sendall(b'{"cmd":"drill","fault":"service"}\n')
print(s.recv(4096).decode().strip())
PY2
)
assert_contains "$out" "Drills are not allowed on node beta: add 'allow-drills yes' to the global section of its configuration and restart hakd."
hk beta unstandby >/dev/null
wait_for "[[ \$(cl beta standby) == false ]]" 5 || fail "beta did not leave standby"

# ---- refusals ----
hk alpha disconnect db >/dev/null
wait_repl alpha link StandAlone 10
# fencing resource-only: the primary's disconnect outdates beta (over the heartbeat paths, tens
# of milliseconds later), which the drill names first
wait_repl beta disk Outdated 5
out=$(drill crash-primary 2>&1) && fail "a drill ran on a disconnected pair: $out"
assert_contains "$out" "the pair is not ready for a drill: both disks must be UpToDate (alpha UpToDate, beta Outdated)"
assert_contains "$out" "A drill needs one node primary and the other secondary, both disks UpToDate, the replication link Connected, each node hearing the other's heartbeats, and the group started on the primary."
hk alpha connect db >/dev/null
wait_synced 30
out=$(drill explode 2>&1) && fail "an unknown scenario was accepted"
assert_contains "$out" "unknown scenario 'explode'; use crash-primary, crash-service or switchover."
out=$(timeout 20 "$HAKCTL" --control "$WORK/alpha.ctl" drill crash-primary 2>&1) && fail "no --peer-socket accepted"
assert_contains "$out" "--peer-socket PATH is required"

# ---- crash-service: restart in place ----
svc0=$(cat "$WORK/alpha.svc.pid")
out=$(drill crash-service --check "test -f $WORK/alpha.svc.pid && kill -0 \$(cat $WORK/alpha.svc.pid)" --json) ||
	fail "the crash-service drill failed: $out"
log "crash-service: $out"
assert_eq "$(jq -r .failover <<<"$out")" false "failover after a service crash"
assert_eq "$(jq -r .victim <<<"$out")" alpha "the victim"
down=$(jq .down_ms <<<"$out") svc=$(jq .service_ms <<<"$out") chk=$(jq .check_ms <<<"$out")
((down >= 0 && down <= svc && svc <= chk)) || fail "unordered times: down $down, service $svc, check $chk"
pid_alive "$svc0" && fail "the service $svc0 survived the drill"
svc1=$(cat "$WORK/alpha.svc.pid")
[[ $svc1 != "$svc0" ]] && pid_alive "$svc1" || fail "the service was not restarted ($svc0 -> $svc1)"
assert_eq "$(role alpha)" primary "alpha's role after the service drill"
# a step that never happens: the drill gives up after --timeout, names it, exits 4
wait_for "[[ \$(cl alpha rule) == serve && \$(jq -r '.groups[0].state' <<<\"\$(hk alpha status --json)\") == started ]]" 15 ||
	fail "alpha's group is not started again: $(hk alpha status)"
rc=0
out=$(drill crash-service --check false --rpo-cmd "echo none" --timeout 3 2>&1) || rc=$?
log "crash-service with a failing check: $out"
assert_eq "$rc" 4 "exit status of a drill whose check never passed"
assert_contains "$out" "--rpo-cmd 'echo none' printed 'none', not a count of lost transactions; no RPO reported."
assert_contains "$out" "hakctl drill: within 3 s, the check command did not succeed (the report above shows what did happen)."
assert_contains "$out" "check command succeeded              did not happen"
wait_for "[[ -f $WORK/alpha.svc.pid ]] && pid_alive \$(cat $WORK/alpha.svc.pid)" 15 ||
	fail "the service was not restarted after the second drill"
svc1=$(cat "$WORK/alpha.svc.pid")
assert_eq "$(role beta)" secondary "beta's role after the service drill"

# ---- crash-primary: failover ----
wait_for "[[ \$(jq -r '.groups[0].state' <<<\"\$(hk alpha status --json)\") == started ]]" 15 ||
	fail "alpha's group is not started again: $(hk alpha status)"
hakd_alpha=${NODE_PIDS[alpha]}
out=$(drill crash-primary --check "test -f $WORK/beta.svc.pid" --rpo-cmd "echo 0" --timeout 60) ||
	fail "the crash-primary drill failed: $out"
log "crash-primary report:"
echo "$out"
assert_contains "$out" "drill crash-primary: fault on alpha (primary), beta was secondary"
assert_contains "$out" "RPO (lost, by --rpo-cmd)                    0"
ms() { awk -v k="$1" 'index($0, k) {print int($(NF - 1) * 1000)}' <<<"$out"; }
d=$(ms "peer declared dead") p=$(ms "survivor primary") s=$(ms "group started") r=$(ms "RTO")
log "detect $d ms, promote $p ms, group $s ms, RTO $r ms"
((d > 0 && d <= p && p <= s && s <= r)) || fail "unordered times: $d $p $s $r"
((r < 15000)) || fail "RTO $r ms"
wait_for "! pid_alive $hakd_alpha" 5 || fail "alpha's hakd survived the crash drill"
pid_alive "$svc1" && fail "alpha's service $svc1 survived the crash drill"
assert_eq "$(role beta)" primary "beta's role after the crash drill"
rm -f "$WORK/alpha.ctl" "$WORK/alpha.marker" "$WORK/alpha.svc.pid"

# ---- switchover back: planned, the report has the old primary's stop before the promotion ----
node_start alpha
wait_synced 60
wait_for "[[ \$(cl alpha peer.alive) == true && \$(cl beta peer.alive) == true ]]" 10 ||
	fail "the nodes do not hear each other after alpha's restart"
out=$(drill switchover --check "test -f $WORK/alpha.svc.pid" --json) ||
	fail "the switchover drill failed: $out"
log "switchover: $out"
assert_eq "$(jq -r .victim <<<"$out")" beta "the switchover's old primary"
assert_eq "$(jq -r .failover <<<"$out")" true "alpha took the role"
down=$(jq .down_ms <<<"$out") p=$(jq .promote_ms <<<"$out") c=$(jq .check_ms <<<"$out")
((down >= 0 && down <= p && p <= c)) || fail "unordered switchover times: $down $p $c"
assert_eq "$(role alpha)" primary "alpha's role after the switchover"
assert_eq "$(role beta)" secondary "beta's role after the switchover"
log "PASS"
