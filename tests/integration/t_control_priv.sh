#!/usr/bin/env bash
# timeout: 180
# Control socket privilege levels with real users. A per-run group and two per-run system users,
# one in the group (as a supplementary group) and one outside it; a standalone hakd with
# control-group set to that group and its control socket in a root-only directory. Asserts: hakd
# gives the socket (0660) and its directory to the group; root runs status and an admin command
# (group start); the member runs status and events and gets the exact refusal for admin commands
# (group stop, primary) while the group stays started; the outsider cannot connect and hakctl
# says who may, and with the directory and socket opened to everyone by mistake hakd itself
# refuses it. Then a control-group the host does not have: the socket stays 0600, hakd starts
# and logs one warning naming the key; without the key, the same for the default group hak when
# this host has none.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_hakd
require_cmd groupadd groupdel useradd userdel setpriv jq stat getent

(($(id -u) == 0)) || {
	log "SKIP: needs root to create users and a group"
	exit 77
}

# Names stay under 32 characters and start with a letter; the suffix is this run's.
SFX=$$
GRP=hakctl$SFX
U_IN=hakin$SFX
U_OUT=hakout$SFX
# Cleanup runs even after a failure: users first (each takes its own user group with it when
# useradd made one), then whatever of those groups and the control group is left.
defer "getent group $GRP >/dev/null && groupdel $GRP"
defer "getent group $U_OUT >/dev/null && groupdel $U_OUT"
defer "getent group $U_IN >/dev/null && groupdel $U_IN"
defer "getent passwd $U_OUT >/dev/null && userdel $U_OUT"
defer "getent passwd $U_IN >/dev/null && userdel $U_IN"
groupadd --system "$GRP"
useradd --system --no-create-home --shell /usr/sbin/nologin -G "$GRP" "$U_IN"
useradd --system --no-create-home --shell /usr/sbin/nologin "$U_OUT"
UID_IN=$(id -u "$U_IN")
UID_OUT=$(id -u "$U_OUT")
log "group $GRP, member $U_IN (uid $UID_IN), outsider $U_OUT (uid $UID_OUT)"

# The users must reach the binaries and the work dir; the socket's own directory is root-only
# on purpose: hakd must open it to the group.
chmod 0711 "$WORK"
RUN=$WORK/run
mkdir -m 0700 "$RUN"
CTL=$RUN/hakd.sock
sparse_file "$WORK/vol.img" $((16 * 1024 * 1024))

# write_conf [CONTROL-GROUP LINE]
write_conf() {
	cat >"$WORK/hak.conf" <<CONF
global {
	control-socket $CTL
	state-dir $WORK
	$1
}
volume v {
	backing $WORK/vol.img
	nbd-socket $WORK/v.nbd
}
group g {
	volume v
	monitor-interval 200ms
	resource app {
		type exec
		start "touch $WORK/app.up"
		monitor "test -f $WORK/app.up"
		stop "rm -f $WORK/app.up"
		timeout 10s
	}
}
CONF
}

HPID=
# start_hakd LOG: hakd on $WORK/hak.conf, logging to LOG (checked for sanitizer reports).
start_hakd() {
	"$HAKD" --config "$WORK/hak.conf" --foreground </dev/null >"$1" 2>&1 &
	HPID=$!
	track_pid "$HPID"
	HAKD_LOGS[$(basename "$1" .log)]=$1
	# The socket's modes are final once hakd says it started.
	wait_for "[[ -S $CTL ]] && grep -q 'started with' '$1'" 10 ||
		fail "hakd did not start: $(tail -n 5 "$1")"
}
stop_hakd() {
	kill -TERM "$HPID"
	wait_for "! pid_alive $HPID" 15 || fail "hakd did not exit on SIGTERM"
	wait "$HPID" || fail "hakd exited with status $?"
}
hk() { timeout 10 "$HAKCTL" --control "$CTL" "$@"; }
# as USER CMD...: run CMD as USER with its groups from the databases.
as() {
	local u=$1
	shift
	setpriv --reuid="$u" --regid="$(id -g "$u")" --init-groups "$@"
}
gstate() { hk status --json | jq -r '.groups[0].state'; }

write_conf "control-group $GRP"
start_hakd "$WORK/hakd.log"
grep -q "stays root-only" "$WORK/hakd.log" && fail "hakd warned about an existing group: $(cat "$WORK/hakd.log")"
assert_eq "$(stat -c '%a %U %G' "$CTL")" "660 root $GRP" "mode, owner and group of the control socket"
assert_eq "$(stat -c '%a %G' "$RUN")" "710 $GRP" "mode and group of the socket's directory"

# Root: a read and an admin command.
hk status >"$WORK/root-status.out" || fail "root: hakctl status failed"
assert_contains "$(cat "$WORK/root-status.out")" "volume v"
hk group start g >/dev/null || fail "root: hakctl group start g failed"
wait_for "[[ \$(gstate) == started ]]" 20 || fail "group g did not start: $(hk status)"
[[ -f $WORK/app.up ]] || fail "group g is started but its resource did not run"

# The member: read commands work, admin commands are refused with the exact sentence, and
# nothing changes.
as "$U_IN" "$HAKCTL" --control "$CTL" status >"$WORK/in-status.out" 2>&1 ||
	fail "member: hakctl status failed: $(cat "$WORK/in-status.out")"
assert_contains "$(cat "$WORK/in-status.out")" "volume v"
as "$U_IN" "$HAKCTL" --control "$CTL" version >/dev/null 2>&1 || fail "member: hakctl version failed"
as "$U_IN" timeout 20 "$HAKCTL" --control "$CTL" events --count 1 --timeout 15 >"$WORK/in-events.out" 2>&1 &
EV=$!
track_pid "$EV"
sleep 0.5 # let the subscription reach hakd before the event it waits for
refusal() {
	echo "hakctl: hakd refused: Command '$1' changes hakd's state and needs root; uid $UID_IN may" \
		"run only the read-only commands (status, version, events)."
}
rc=0
as "$U_IN" "$HAKCTL" --control "$CTL" group stop g >"$WORK/in-stop.out" 2>&1 || rc=$?
assert_eq "$rc" 3 "member: exit status of hakctl group stop g"
assert_eq "$(cat "$WORK/in-stop.out")" "$(refusal group)" "member: hakctl group stop g"
rc=0
as "$U_IN" "$HAKCTL" --control "$CTL" primary v --force >"$WORK/in-primary.out" 2>&1 || rc=$?
assert_eq "$rc" 3 "member: exit status of hakctl primary v --force"
assert_eq "$(cat "$WORK/in-primary.out")" "$(refusal primary)" "member: hakctl primary v --force"
sleep 0.5
assert_eq "$(gstate)" started "group state after the member's refused stop"
[[ -f $WORK/app.up ]] || fail "the member's refused stop stopped the resource"

# The outsider: the socket's directory (0710, the group's) keeps it out, and hakctl says who may
# connect, naming the directory's group as it cannot see the socket.
rc=0
as "$U_OUT" "$HAKCTL" --control "$CTL" status >"$WORK/out-status.out" 2>&1 || rc=$?
assert_eq "$rc" 2 "outsider: exit status of hakctl status"
assert_eq "$(cat "$WORK/out-status.out")" "hakctl: permission denied on hakd's control socket $CTL for uid \
$UID_OUT: run hakctl as root, or as a member of group $GRP for the read-only commands (status, events, version)." \
	"outsider: hakctl status"
# With the directory open to all, the socket's mode (0660) still keeps it out; with both opened up
# by mistake, hakd itself turns the outsider away.
chmod 0711 "$RUN"
rc=0
as "$U_OUT" "$HAKCTL" --control "$CTL" status >"$WORK/out-status1.out" 2>&1 || rc=$?
assert_eq "$rc" 2 "outsider through an open directory: exit status of hakctl status"
assert_contains "$(cat "$WORK/out-status1.out")" "permission denied on hakd's control socket $CTL for uid $UID_OUT: run hakctl as root, or as a member of group $GRP"
grep -q "Refused control client uid $UID_OUT" "$WORK/hakd.log" &&
	fail "hakd saw the outsider: the socket mode should have kept it out"
chmod 0666 "$CTL"
rc=0
as "$U_OUT" "$HAKCTL" --control "$CTL" status >"$WORK/out-status2.out" 2>&1 || rc=$?
rc_ev=0
as "$U_OUT" timeout 10 "$HAKCTL" --control "$CTL" events --count 1 --timeout 5 >"$WORK/out-events.out" 2>&1 || rc_ev=$?
chmod 0660 "$CTL"
chmod 0710 "$RUN"
assert_eq "$rc_ev" 3 "outsider on a 0666 socket: exit status of hakctl events"
assert_contains "$(cat "$WORK/out-events.out")" "hakctl: hakd refused: uid $UID_OUT may not use hakd's control socket"
assert_eq "$rc" 3 "outsider on a 0666 socket: exit status of hakctl status"
assert_eq "$(cat "$WORK/out-status2.out")" "hakctl: hakd refused: uid $UID_OUT may not use hakd's control \
socket: only root may, and the members of group '$GRP' for the read-only commands." \
	"outsider on a 0666 socket: hakctl status"
grep -q "Refused control client uid $UID_OUT" "$WORK/hakd.log" || fail "hakd did not log the refused outsider"

# Root's admin command is still served; the member's event stream sees its effect.
hk group stop g >/dev/null || fail "root: hakctl group stop g failed"
wait_for "[[ \$(gstate) == stopped ]]" 20 || fail "group g did not stop: $(hk status)"
wait "$EV" || fail "member: hakctl events failed: $(cat "$WORK/in-events.out")"
assert_contains "$(cat "$WORK/in-events.out")" "group time:"
stop_hakd
[[ ! -e $CTL ]] || fail "hakd left its control socket behind"

# A configured group the host does not have: hakd starts, the socket stays root-only, and one
# warning names the key and the fix.
NOGRP=haknone$SFX
getent group "$NOGRP" >/dev/null && fail "group $NOGRP exists; cannot test a missing group"
write_conf "control-group $NOGRP"
start_hakd "$WORK/hakd2.log"
assert_eq "$(stat -c '%a %U %G' "$CTL")" "600 root root" "control socket with a missing control-group"
assert_eq "$(grep -c "stays root-only" "$WORK/hakd2.log")" 1 "warnings about the missing group"
assert_contains "$(cat "$WORK/hakd2.log")" "Group '$NOGRP' set by control-group does not exist, so control socket $CTL stays root-only; create it (groupadd $NOGRP) or fix control-group"
hk status >/dev/null || fail "root: hakctl status failed with a root-only socket"
rc=0
as "$U_IN" "$HAKCTL" --control "$CTL" status >/dev/null 2>&1 || rc=$?
assert_eq "$rc" 2 "member: exit status of hakctl status on a root-only socket"
stop_hakd

# The default group, when this host has no group hak.
if getent group hak >/dev/null; then
	log "this host has a group hak; the default-group warning is not checked"
else
	write_conf ""
	start_hakd "$WORK/hakd3.log"
	assert_eq "$(stat -c '%a' "$CTL")" 600 "control socket mode without group hak"
	assert_contains "$(cat "$WORK/hakd3.log")" "Group 'hak' does not exist, so control socket $CTL stays root-only; create it (groupadd hak)"
	stop_hakd
fi
log "all checks passed"
