#!/usr/bin/env bash
# timeout: 420
# hak under real Corosync + Pacemaker (Debian's packages): two nodes, each its network, mount
# and UTS namespaces (pacemaker.sh), corosync over knet on the pair's two paths with two_node,
# and a promotable clone of ocf:hak:hak managing a sync volume whose configuration has no
# cluster section (hakd's own manager off). stonith-enabled=false: there is no fence device
# between two namespaces, and the dead node is dead for real here (every one of its processes
# killed), which is what a fence would have ensured.
#   1. Pacemaker starts hakd on both nodes and promotes exactly one (its choice, the scores
#      being equal); hak agrees (one Primary, Connected, both UpToDate);
#   2. an acknowledged-write ledger writes to the Primary's volume; then that node loses power:
#      corosync, every Pacemaker daemon and hakd killed with SIGKILL, its links down;
#   3. Pacemaker promotes the other node within 30 s (the time is printed), hak says Primary;
#   4. the ledger finds every acknowledged write on the new Primary: 0 missing, 0 corrupt;
#   5. the dead node comes back (links up, corosync and Pacemaker started): Pacemaker starts
#      it Unpromoted, hak resyncs it from the new Primary, and both copies end equal (sha256).
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
# shellcheck source=tests/integration/ledger.sh
. "$(dirname "$0")/ledger.sh"
# shellcheck source=tests/integration/pacemaker.sh
. "$(dirname "$0")/pacemaker.sh"
require_hakd
require_cmd jq nbdcopy

PAIR_BLANK=1 PAIR_NO_START=1 pair_setup sync 64M
pair_report_logs
grep -q '^cluster' "$WORK/alpha.conf" && fail "the test's configuration has a cluster section"
pcmk_setup
pcmk_wait_online 90
log "Pacemaker: $(px alpha crm_mon -1 | grep -E 'Current DC|Online')"

# ---- 1. the promotable clone ---------------------------------------------------------------
pcmk_add_clone
pcmk_wait_promoted 90
wait_for "[[ \$(pcmk_promoted beta) == $P ]]" 30 ||
	fail "beta's Pacemaker does not show $P promoted: $(px beta crm_mon -1 2>&1)"
wait_for "[[ \$(px alpha crm_mon -1) == *'Unpromoted: [ $S ]'* ]]" 30 ||
	fail "$S is not Unpromoted: $(px alpha crm_mon -1)"
assert_eq "$(repl "$P" role)" primary "hak's role on $P"
assert_eq "$(repl "$S" role)" secondary "hak's role on $S"
wait_synced 30
log "Pacemaker promoted $P: $(px alpha crm_mon -1 | grep -E 'Promoted|Unpromoted' | tr -s ' ' | tr '\n' ';')"
scores=$(px "$S" crm_attribute --promotion=hak-db -N "$S" -G -q 2>&1 || true)
log "promotion scores: $P $(px "$P" crm_attribute --promotion=hak-db -N "$P" -G -q 2>&1), $S $scores"
assert_eq "$scores" 10000 "the Unpromoted node's promotion score (UpToDate, Connected)"

# ---- 2. writes, then the Primary loses power ------------------------------------------------
L=$WORK/storm.ledger
ledger_storm "$P" "$L" 1 60
wait_for "(( \$(ledger_records $L) > 2000 ))" 30 || fail "the ledger writer did not get going: $(cat "$L.err")"
sleep 1
hk "$S" status --json | jq -e '.volumes[0].replication.link == "Connected"' >/dev/null ||
	fail "$S lost the link under the storm"
t0=$(date +%s.%N)
pcmk_kill "$P"
ns=NS_$P
ip -n "${!ns}" link set "h${P:0:1}1-$PAIR_SID" down
ip -n "${!ns}" link set "h${P:0:1}2-$PAIR_SID" down
log "$P lost power: corosync, Pacemaker and hakd killed with SIGKILL, both links down"
ledger_stop "$L"

# ---- 3. Pacemaker promotes the survivor -----------------------------------------------------
wait_for "[[ \$(pcmk_promoted $S) == $S && \$(repl $S role) == primary ]]" 60 ||
	fail "$S was not promoted within 60 s: $(px "$S" crm_mon -1 2>&1); hak: $(hk "$S" status)"
t_promote=$(elapsed_since "$t0")
log "Pacemaker promoted $S ${t_promote}s after $P died"
assert_le "${t_promote%.*}" 29 "promotion of $S within 30 s"
grep -q "promoted: role primary" "$WORK/pcmk-$S/var-log-pacemaker/pacemaker.log" ||
	log "note: the agent's promote line is not in $S's pacemaker.log"

# ---- 4. nothing acknowledged is missing ----------------------------------------------------
out=$("$LEDGER" verify --ledger "$L" --uri "$(node_uri "$S")" 2>&1) || fail "ledger verify through $S: $out"
log "ledger through $S's NBD export: $(grep '^verify:' <<<"$out")"
[[ $out =~ \ 0\ missing,\ 0\ corrupt ]] || [[ $out =~ \ 0\ missing ]] || fail "missing writes: $out"
[[ $out =~ \ 0\ corrupt ]] || fail "corrupt writes: $out"
acked=$(sed -nE 's/.* ([0-9]+) writes acknowledged.*/\1/p' "$L.out")
log "$acked writes were acknowledged by $P before it died"
((acked > 2000)) || fail "only $acked writes acknowledged: the test proves little"

# ---- 5. the dead node comes back -----------------------------------------------------------
ip -n "${!ns}" link set "h${P:0:1}1-$PAIR_SID" up
ip -n "${!ns}" link set "h${P:0:1}2-$PAIR_SID" up
rm -f "$WORK/pcmk-$P/ready"
pcmk_start "$P"
wait_for "[[ \$(px $S crm_mon -1) == *'Unpromoted: [ $P ]'* ]]" 120 ||
	fail "$P did not rejoin as Unpromoted: $(px "$S" crm_mon -1 2>&1)"
assert_eq "$(pcmk_promoted "$S")" "$S" "the promoted node after $P's return"
wait_synced 60
assert_eq "$(repl "$P" role)" secondary "hak's role on the returned $P"
assert_eq "$(repl "$S" role)" primary "hak's role on $S"
sum_p=$(sha256sum <"$(backing "$P")" | cut -d' ' -f1)
sum_s=$(sha256sum <"$(backing "$S")" | cut -d' ' -f1)
assert_eq "$sum_p" "$sum_s" "sha256 of the two copies after the resync"
"$LEDGER" verify --ledger "$L" --file "$(backing "$P")" >/dev/null ||
	fail "the resynced $P lacks acknowledged writes"
log "$P back as Unpromoted and resynced; copies equal ($sum_s)"
log "PASS"
