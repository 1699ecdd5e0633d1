#!/usr/bin/env bash
# timeout: 480
# Resource-level fencing under Pacemaker, as DRBD's crm-fence-peer: the volume has fence-peer
# hak-crm-fence-peer and unfence-peer hak-crm-unfence-peer (so fencing resource-only), the pair
# runs under real Corosync + Pacemaker (pacemaker.sh; corosync on both paths, replication on
# path 1 only, stonith-enabled=false), an acknowledged-write ledger writes to the Primary P.
#   a. the replication link is cut while the cluster links live: P freezes its writes, runs
#      the handler, which places the constraint hak-fence-db (Promoted only on P) and exits 4;
#      the writes resume and go on (only P has them now);
#   b. the link heals: P resyncs S, and hakd's unfence-peer handler removes the constraint;
#   c. cut again: fenced again; then P loses power (every process SIGKILLed): Pacemaker does
#      NOT promote S for 20 s (the constraint), and S's disk does lack acknowledged writes,
#      which a promotion would have lost;
#   d. P comes back: Pacemaker promotes P (the only node allowed), P resyncs S, and P's
#      restarted hakd, which runs unfence-peer once in sync after every start, removes the
#      constraint; the ledger finds 0 missing on P and both copies end equal.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
# shellcheck source=tests/integration/ledger.sh
. "$(dirname "$0")/ledger.sh"
# shellcheck source=tests/integration/pacemaker.sh
. "$(dirname "$0")/pacemaker.sh"
require_hakd
require_cmd jq

mkdir -p "$WORK/handlers"
install -m 0755 "$REPO/packaging/ocf/hak-crm-fence-peer" "$REPO/packaging/ocf/hak-crm-unfence-peer" \
	"$WORK/handlers/"
PAIR_EXTRA="fence-peer $WORK/handlers/hak-crm-fence-peer
    unfence-peer $WORK/handlers/hak-crm-unfence-peer
    fence-timeout 5s" PAIR_BLANK=1 PAIR_NO_START=1 pair_setup sync 64M
pair_report_logs
pcmk_setup
pcmk_wait_online 90
pcmk_add_clone
pcmk_wait_promoted 90
wait_synced 30
assert_eq "$(repl "$P" fencing.policy)" resource-only "the fencing policy with a fence-peer handler"
log "Pacemaker promoted $P; $S is Unpromoted"

# p_cut / p_heal: the replication path (1) only; corosync keeps its second link on path 2.
p_cut() { ip -n "$NS_alpha" link set "ha1-$PAIR_SID" down; }
p_heal() { ip -n "$NS_alpha" link set "ha1-$PAIR_SID" up; }

# wait_fenced N: P's N-th freeze ended through the handler and the constraint names P.
wait_fenced() {
	wait_for "[[ \$(repl $P fencing.fences) == $1 && \$(repl $P fencing.frozen) == false ]]" 20 ||
		fail "P's freeze $1 did not end: $(hk "$P" status --json | jq -c .volumes[0].replication.fencing)"
	assert_contains "$(repl "$P" fencing.last_how)" "fence-peer handler (exit 4)" "how the freeze ended"
	# The handler wrote the constraint into P's CIB; S's copy follows over corosync, later
	# when corosync has just moved to its second link.
	local c
	wait_for "pcmk_constraint $S | grep -qF 'value=\"$P\"'" 15 || true
	c=$(pcmk_constraint "$S")
	assert_contains "$c" "value=\"$P\"" "the constraint in $S's CIB"
	assert_contains "$c" 'role="Promoted"' "the constraint"
	log "fence $1: $P froze for $(repl "$P" fencing.last_ms) ms; constraint: $(tr -s ' \n' ' ' <<<"$c")"
}

L=$WORK/storm.ledger
ledger_storm "$P" "$L" 1 300
wait_for "(( \$(ledger_records $L) > 1000 ))" 30 || fail "the ledger writer did not get going: $(cat "$L.err")"

# ---- a. link cut, cluster alive: fenced by the handler, writes go on -----------------------
p_cut
wait_fenced 1
n0=$(ledger_records "$L")
sleep 2
n1=$(ledger_records "$L")
((n1 > n0 + 100)) || fail "the writes did not resume after the fence: $n0 then $n1 records"
log "writes go on alone on $P: $((n1 - n0)) acknowledged in 2 s"
assert_eq "$(pcmk_promoted "$S")" "$P" "the promoted node with the link cut"

# ---- b. heal: resync, then hakd's unfence-peer lifts the constraint ------------------------
p_heal
wait_for "[[ -z \$(pcmk_constraint $S) ]]" 40 ||
	fail "the constraint is still there after the heal: $(pcmk_constraint "$S"); $(hk "$P" status --json | jq -c .volumes[0].replication)"
grep -q "unfence-peer handler ended with exit status 0" "$WORK/$P.log" ||
	fail "hakd's unfence-peer handler did not remove the constraint: $(grep -i unfence "$WORK/$P.log")"
log "healed: $S resynced, hakd's unfence-peer removed the constraint"

# ---- c. cut again, then P dies: S must not be promoted -----------------------------------
wait_synced 40
p_cut
wait_fenced 2
sleep 2
pcmk_kill "$P"
ns=NS_$P
ip -n "${!ns}" link set "h${P:0:1}2-$PAIR_SID" down
ledger_stop "$L"
log "$P lost power 2 s after the second fence"
for ((i = 0; i < 20; i++)); do
	[[ $(pcmk_promoted "$S") != "$S" ]] || fail "$S was promoted despite the constraint: $(px "$S" crm_mon -1)"
	[[ $(repl "$S" role) == secondary ]] || fail "hak on $S is $(repl "$S" role)"
	sleep 1
done
log "$S stayed unpromoted for 20 s: $(px "$S" crm_mon -1 | grep -E 'hak-db|Unpromoted|Stopped' | tr -s ' \n' ' ')"
rc=0
out=$("$LEDGER" verify --ledger "$L" --file "$(backing "$S")" 2>&1) || rc=$?
log "$S's copy against the ledger: $(grep '^verify:' <<<"$out")"
[[ $rc != 0 && ! $out =~ \ 0\ missing ]] ||
	fail "$S's copy holds every acknowledged write: the cut let nothing through, the case proves nothing"

# ---- d. P back: promoted, resynced, constraint lifted, nothing lost ------------------------
ip -n "${!ns}" link set "h${P:0:1}2-$PAIR_SID" up
p_heal
pcmk_start "$P"
wait_for "[[ \$(pcmk_promoted $S) == $P && \$(repl $P role) == primary ]]" 120 ||
	fail "$P was not promoted after its return: $(px "$S" crm_mon -1 2>&1)"
wait_synced 60
wait_for "[[ -z \$(pcmk_constraint $S) ]]" 30 ||
	fail "the constraint outlived the resync: $(pcmk_constraint "$S")"
# hakd runs unfence-peer once in sync after each start (nothing to lift the first time), after
# the heal of b, and after this restart, which lifted the constraint of c
assert_eq "$(grep -c "unfence-peer handler ended with exit status 0" "$WORK/$P.log")" 3 \
	"unfence-peer runs of $P's hakd (first sync, the heal, the sync after its restart)"
out=$("$LEDGER" verify --ledger "$L" --uri "$(node_uri "$P")" 2>&1) || fail "ledger verify on $P: $out"
log "ledger through $P's export: $(grep '^verify:' <<<"$out")"
[[ $out =~ \ 0\ missing,\ 0\ corrupt ]] || [[ $out =~ \ 0\ missing ]] || fail "missing writes: $out"
sum_p=$(sha256sum <"$(backing "$P")" | cut -d' ' -f1)
sum_s=$(sha256sum <"$(backing "$S")" | cut -d' ' -f1)
assert_eq "$sum_s" "$sum_p" "sha256 of the two copies"
"$LEDGER" verify --ledger "$L" --file "$(backing "$S")" >/dev/null || fail "$S still lacks writes after the resync"
log "$P promoted again, $S resynced, constraint gone, 0 acknowledged writes missing"
log "PASS"
