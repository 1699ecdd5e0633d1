#!/usr/bin/env bash
# timeout: 300
# The Pacemaker resource agent ocf:hak:hak (packaging/ocf/hak) against a real pair: beta's
# hakd runs by itself, alpha's is started and stopped by the agent, in alpha's namespace.
#   1. meta-data validates against the OCF DTD; unknown actions are 3; validate-all refuses a
#      configuration with a cluster section and a volume that is not in the file (6);
#   2. resource-agents' ocf-tester passes (start, stop, promote, demote, notify, probes, the
#      second start and stop, the probe with every binary missing);
#   3. the exact exit codes: 7 stopped, 0 Secondary, 8 Primary (beta sees alpha Primary and
#      the data written through alpha is on beta), 7 again after stop; a promote of a
#      stopped resource is 7;
#   4. hakd without a cluster section never promotes by itself: alpha, killed with SIGKILL as
#      Primary and restarted, comes back Secondary; beta, with alpha gone, stays Secondary;
#   5. the crm shell commands of docs/pacemaker.md, run against a CIB file with the agent
#      installed in a private mount namespace, give a configuration crm_verify accepts.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
require_hakd
require_cmd ocf-tester xmllint jq crm_attribute crm crm_verify unshare

AGENT=$WORK/ocf/hak
mkdir -p "$WORK/ocf"
install -m 0755 "$REPO/packaging/ocf/hak" "$AGENT"
chmod 755 "$WORK"

PAIR_BLANK=1 PAIR_NO_START=1 pair_setup sync 16M
pair_report_logs
node_start beta

PARAMS=(config="$WORK/alpha.conf" volume=db node=alpha hakd="$HAKD" hakctl="$HAKCTL"
	log_file="$WORK/alpha.log" pidfile="$WORK/alpha.pid" connect_timeout=5)

# ra ACTION [VAR=VALUE...]: run the agent in alpha's namespace as Pacemaker would; prints the
# exit code (the agent's output goes to WORK/ra.log).
ra() {
	local action=$1 p env=(OCF_ROOT=/usr/lib/ocf OCF_RESOURCE_INSTANCE=hak-db
		OCF_RESKEY_CRM_meta_timeout=30000)
	shift
	for p in "${PARAMS[@]}"; do
		env+=("OCF_RESKEY_$p")
	done
	local rc=0
	ip netns exec "$NS_alpha" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin "${env[@]}" "$@" \
		"$AGENT" "$action" >>"$WORK/ra.log" 2>&1 || rc=$?
	echo "$rc"
}
defer "ra stop >/dev/null"
defer "[[ ! -f $WORK/alpha.pid ]] || kill -KILL \$(cat $WORK/alpha.pid) 2>/dev/null"

# ---- 1. meta-data, unknown actions, validation ---------------------------------------------
OCF_ROOT=/usr/lib/ocf "$AGENT" meta-data >"$WORK/meta.xml"
xmllint --noout --dtdvalid /usr/share/resource-agents/ra-api-1.dtd "$WORK/meta.xml" ||
	fail "the meta-data do not validate against ra-api-1.dtd"
for a in promote demote notify monitor start stop validate-all meta-data; do
	grep -q "<action name=\"$a\"" "$WORK/meta.xml" || fail "meta-data list no $a action"
done
assert_eq "$(ra frobnicate)" 3 "exit code of an unknown action"
assert_eq "$(ra validate-all)" 0 "validate-all of the good configuration"
cp "$WORK/alpha.conf" "$WORK/withcluster.conf"
printf 'cluster {\n    auth-key-file %s\n}\n' "$WORK/repl.key" >>"$WORK/withcluster.conf"
assert_eq "$(ra validate-all OCF_RESKEY_config="$WORK/withcluster.conf")" 6 \
	"validate-all with a cluster section"
assert_contains "$(cat "$WORK/ra.log")" "has a cluster section" "the agent's reason"
assert_eq "$(ra validate-all OCF_RESKEY_volume=nosuch)" 6 "validate-all of an unknown volume"
assert_eq "$(ra validate-all OCF_RESKEY_config="$WORK/nothing.conf")" 5 \
	"validate-all without the configuration file"
assert_eq "$(ra validate-all OCF_RESKEY_CRM_meta_clone_max=2)" 6 \
	"validate-all as a clone that is not promotable"
assert_eq "$(ra validate-all OCF_RESKEY_CRM_meta_clone_max=2 OCF_RESKEY_CRM_meta_promotable=true)" 0 \
	"validate-all as a promotable clone"
log "meta-data valid, validate-all answers 0/5/6 as it should"

# ---- 2. ocf-tester --------------------------------------------------------------------------
args=()
for p in "${PARAMS[@]}"; do
	args+=(-o "$p")
done
rc=0
ip netns exec "$NS_alpha" ocf-tester -v -n hak-db "${args[@]}" "$AGENT" >"$WORK/ocf-tester.log" 2>&1 ||
	rc=$?
tail -n 40 "$WORK/ocf-tester.log"
assert_eq "$rc" 0 "ocf-tester exit status"
assert_contains "$(cat "$WORK/ocf-tester.log")" "passed all tests" "ocf-tester's verdict"
log "ocf-tester: $(grep -m1 'passed all tests' "$WORK/ocf-tester.log")"

# ---- 3. exact exit codes and the data path ---------------------------------------------------
assert_eq "$(ra monitor OCF_RESKEY_CRM_meta_interval=0)" 7 "probe of the stopped resource"
assert_eq "$(ra promote)" 7 "promote of a stopped resource"
assert_eq "$(ra start)" 0 "start"
wait_repl beta link Connected 20
assert_eq "$(repl alpha role)" secondary "alpha's role after start"
assert_eq "$(ra monitor)" 0 "monitor of the Secondary"
assert_eq "$(ra promote)" 0 "promote"
assert_eq "$(ra monitor)" 8 "monitor of the Primary"
assert_eq "$(hk alpha status --json | jq -r .volumes[0].role)" primary "alpha's role"
wait_repl beta peer_role primary 10
head -c 4M /dev/urandom >"$WORK/data"
nbdcopy "$WORK/data" "$(node_uri alpha)" || fail "writing through alpha failed"
sum_a=$(sha256sum <"$WORK/data" | cut -d' ' -f1)
assert_eq "$(ra demote)" 0 "demote"
assert_eq "$(ra monitor)" 0 "monitor after demote"
wait_synced 20
sum_b=$(head -c 4M "$(backing beta)" | sha256sum | cut -d' ' -f1)
assert_eq "$sum_b" "$sum_a" "sha256 of the 4 MiB written through alpha, on beta's disk"
log "monitor 7/0/8/0 through start, promote and demote; beta holds what alpha acknowledged"

# ---- 4. no promotion by itself ----------------------------------------------------------------
assert_eq "$(ra promote)" 0 "promote again"
pid=$(cat "$WORK/alpha.pid")
kill -KILL "$pid"
wait_for "! pid_alive $pid" 10 || fail "alpha's hakd survived SIGKILL"
log "alpha's hakd (pid $pid) killed as Primary"
assert_eq "$(ra monitor)" 7 "monitor after hakd died"
sleep 3
assert_eq "$(repl beta role)" secondary "beta's role 3 s after its Primary died (no cluster section)"
ip netns exec "$NS_alpha" "$HAKD" --config "$WORK/alpha.conf" --node alpha --foreground \
	--pidfile "$WORK/alpha.pid" </dev/null >>"$WORK/alpha.log" 2>&1 &
track_pid $!
wait_for "hk alpha status >/dev/null" 20 || fail "alpha's hakd did not come back"
wait_repl alpha link Connected 20
sleep 2
assert_eq "$(repl alpha role)" secondary "alpha's role after a restart from Primary"
assert_eq "$(repl beta role)" secondary "beta's role"
assert_eq "$(ra monitor)" 0 "monitor of the restarted Secondary"
grep -q "was Primary at start" "$WORK/ra.log" && fail "the agent had to demote a restarted hakd"
log "neither node promoted itself: both Secondary after the Primary's crash and restart"
assert_eq "$(ra stop)" 0 "stop"
assert_eq "$(ra stop)" 0 "stop of a stopped resource"
assert_eq "$(ra monitor)" 7 "monitor after stop"

# ---- 5. docs/pacemaker.md's crm commands ---------------------------------------------------
# The commands are taken from the document itself, so the two cannot drift apart.
awk '/^crm configure/ {cmd = $0; while (cmd ~ /\\$/ && (getline l) > 0) {sub(/\\$/, "", cmd); cmd = cmd l}
	print cmd}' "$REPO/docs/pacemaker.md" >"$WORK/crm-cmds"
assert_eq "$(wc -l <"$WORK/crm-cmds")" 4 "crm commands in docs/pacemaker.md"
mkdir -p "$WORK/crm-ocf/heartbeat" "$WORK/crm-ocf/pacemaker" "$WORK/crm-ocf/hak"
cp "$AGENT" "$WORK/crm-ocf/hak/hak"
cibadmin --empty >"$WORK/cib.xml"
cat >"$WORK/crm.sh" <<EOS
set -e
mount --bind /usr/lib/ocf/resource.d/heartbeat $WORK/crm-ocf/heartbeat
mount --bind /usr/lib/ocf/resource.d/pacemaker $WORK/crm-ocf/pacemaker
mount --rbind $WORK/crm-ocf /usr/lib/ocf/resource.d
export CIB_file=$WORK/cib.xml
crm_attribute -t crm_config -n stonith-enabled -v false
# the file system of the colocation example
crm configure primitive fs-db ocf:heartbeat:Dummy
while read -r c; do timeout 60 \$c; done <$WORK/crm-cmds
crm_verify -x $WORK/cib.xml
EOS
unshare -m --propagation private bash "$WORK/crm.sh" >"$WORK/crm.log" 2>&1 ||
	fail "the crm commands of docs/pacemaker.md failed: $(tail -n 20 "$WORK/crm.log")"
cib=$(CIB_file=$WORK/cib.xml cibadmin -Q -o configuration)
assert_contains "$cib" '<primitive id="hak-db" class="ocf" provider="hak" type="hak">' "the CIB"
assert_contains "$cib" 'name="promotable" value="true"' "the CIB"
assert_contains "$cib" 'with-rsc="hak-db-clone" with-rsc-role="Promoted"' "the CIB"
assert_contains "$cib" 'first="hak-db-clone" first-action="promote"' "the CIB"
log "docs/pacemaker.md's crm commands give a configuration crm_verify accepts"
log "PASS"
