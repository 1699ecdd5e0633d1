#!/usr/bin/env bash
# timeout: 240
# Two volumes (db and wal) in one service group fail over together: promote all or none. The
# cluster pair of cluster.sh with a second volume; the group's start checks that both volumes
# are primary before it writes its marker. The acknowledged-write ledger runs on each volume.
#   a. alpha primary for both, a write storm on each; alpha is killed: beta promotes both, its
#      group starts with both primary, and both ledgers are complete on beta's copies.
#   b. only wal's replication connection is cut (alpha, secondary now, disconnects it) while
#      beta cannot reach the witness: beta's wal writes freeze until alpha's heartbeat shows wal
#      not UpToDate (its bit in the stale mask), db's writes never freeze. beta is killed:
#      alpha has db UpToDate but wal Outdated and promotes neither. beta returns, alpha
#      reconnects wal; once wal's handshake says whose copy is current and alpha resynced, one
#      node serves both volumes; both ledgers are complete on alpha's copies.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
# shellcheck source=tests/integration/cluster.sh
. "$(dirname "$0")/cluster.sh"
require_hakd
require_cmd jq
# shellcheck source=tests/integration/ledger.sh
. "$(dirname "$0")/ledger.sh"

# The group's start: both volumes must already be primary when the group starts.
cat >"$WORK/allprimary.sh" <<EOS
#!/bin/sh
r=\$($HAKCTL --control $WORK/\$1.ctl status --json | jq -r '[.volumes[].role] | join(",")')
echo "\$r" >>$WORK/\$1.starts
[ "\$r" = primary,primary ] || exit 1
echo \$1 >$WORK/\$1.marker
EOS
chmod +x "$WORK/allprimary.sh"

_cluster_group() {
	cat <<EOG
group svc {
    volume db wal
    monitor-interval 200ms
    resource marker {
        type exec
        start "$WORK/allprimary.sh $1"
        stop "rm -f $WORK/$1.marker"
        monitor "test -f $WORK/$1.marker"
        timeout 10s
    }
}
EOG
}

roles() { hk "$1" status --json | jq -r '[.volumes[].role] | join(",")'; }
# storms NODE DB_LEDGER WAL_LEDGER ID SECONDS: a ledger storm on each volume of NODE (IDs ID and
# ID + 1), pids in S_DB and S_WAL, until both got writes acknowledged
storms() {
	ledger_storm "$1" "$2" "$4" "$5"
	S_DB=$STORM
	ledger_storm "$1" "$3" $(($4 + 1)) "$5" wal
	S_WAL=$STORM
	wait_for "(( \$(ledger_records $2) > 200 && \$(ledger_records $3) > 200 ))" 15 ||
		fail "the storms got no writes acknowledged: $(tail -n 2 "$2.err" "$3.err")"
}
promotions() { grep -c "Promoted to primary" "$WORK/$1.log" || true; }

PAIR_VOL2=wal PAIR_BLANK=1 cluster_setup sync 80M
pair_report_logs
wait_for "[[ -f $WORK/alpha.marker ]]" 15 || fail "alpha's group did not start: $(hk alpha status)"
assert_eq "$(roles alpha)" primary,primary "alpha's volumes"
assert_eq "$(tail -n 1 "$WORK/alpha.starts")" primary,primary "the volumes when alpha's group started"
hk beta unstandby >/dev/null
wait_synced 30
assert_eq "$(repl_v alpha 1 fencing.policy)" resource-only "wal's default fencing"

# ---- a. the primary dies: both volumes move ----
LA=$WORK/a-db.ledger
LW=$WORK/a-wal.ledger
storms alpha "$LA" "$LW" 1 30
node_kill9 alpha
t0=$(date +%s.%N)
wait "$S_DB" || true
wait "$S_WAL" || true
wait_for "[[ -f $WORK/beta.marker ]]" 20 || fail "beta's group did not start: $(hk beta status)"
log "a: beta serves both volumes $(elapsed_since "$t0") s after alpha's death"
assert_eq "$(roles beta)" primary,primary "beta's volumes"
assert_eq "$(tail -n 1 "$WORK/beta.starts")" primary,primary "the volumes when beta's group started"
ledger_clean "$LA" "$(backing beta)"
ledger_clean "$LW" "$(backing beta wal)"

# ---- b. one volume Outdated: the node promotes none ----
rm -f "$WORK/alpha.marker"
node_start alpha
wait_synced 40
assert_eq "$(roles alpha)" secondary,secondary "alpha back"
LB=$WORK/b-db.ledger
LBW=$WORK/b-wal.ledger
storms beta "$LB" "$LBW" 3 40
db_fences=$(repl_v beta 0 fencing.fences)
wal_fences=$(repl_v beta 1 fencing.fences)
# without the witness, the only confirmation is alpha's heartbeat (wal's stale bit)
witness_cut beta
wait_for "[[ \$(cl beta witness.reachable) == false ]]" 10 || fail "beta still reaches the witness"
hk alpha disconnect wal >/dev/null
wait_for "[[ \$(repl_v beta 1 fencing.fences) == $((wal_fences + 1)) && \$(repl_v beta 1 fencing.frozen) == false ]]" 10 ||
	fail "beta's wal did not freeze and resume: $(hk beta status --json | jq -c .volumes[1].replication.fencing)"
how=$(repl_v beta 1 fencing.last_how)
log "b: beta's wal froze $(repl_v beta 1 fencing.last_ms) ms ($how)"
[[ $how == *heartbeat* ]] || fail "wal's fence was confirmed by '$how', not alpha's heartbeat"
assert_eq "$(repl_v alpha 1 disk)" Outdated "alpha's wal after the outdate"
assert_eq "$(repl_v alpha 0 disk)" UpToDate "alpha's db (still connected)"
assert_eq "$(repl_v beta 0 fencing.fences)" "$db_fences" "db's fences (its connection stayed up)"
n=$(ledger_records "$LBW")
wait_for "(( \$(ledger_records $LBW) > $n + 100 ))" 10 || fail "wal's writes did not go on after the fence"
witness_heal beta
p0=$(promotions alpha)
node_kill9 beta
wait "$S_DB" || true
wait "$S_WAL" || true
sleep 3 # > deadtime + a takeover: alpha would have promoted by now
assert_eq "$(roles alpha)" secondary,secondary "alpha's volumes with beta dead and wal Outdated"
assert_eq "$(promotions alpha)" "$p0" "alpha's promotions while beta was dead"
log "b: alpha refuses: rule $(cl alpha rule): $(cl alpha reason)"
rm -f "$WORK/beta.marker"
node_start beta
# both sides secondary: the handshake of every volume says which copy is current, so nobody
# promotes before wal connects again
hk alpha connect wal >/dev/null
# either may be primary then (alpha is the preferred node once its resync made it UpToDate)
wait_for "[[ \$(roles beta) == primary,primary && -f $WORK/beta.marker ]] ||
	[[ \$(roles alpha) == primary,primary && -f $WORK/alpha.marker ]]" 20 ||
	fail "no node serves both volumes: $(hk beta status) $(hk alpha status)"
wait_synced 40
log "b: back: alpha $(roles alpha), beta $(roles beta)"
ledger_clean "$LB" "$(backing alpha)"
ledger_clean "$LBW" "$(backing alpha wal)"
node_stop alpha
node_stop beta
for v in db wal; do
	assert_eq "$(sha256sum <"$(backing alpha $v)")" "$(sha256sum <"$(backing beta $v)")" "both copies of $v"
done
log "PASS"
