#!/usr/bin/env bash
# timeout: 180
# Service groups with real resources: an ext4 filesystem on a loop device (mount) and an
# application process (exec) on it. Asserts the start order, an in-place restart of a crashed
# application that leaves the mount alone, a stop blocked by a busy mount (the group says
# blocked and the filesystem stays mounted: never success while still mounted), clear after the
# operator freed it, force-unmount killing the process that keeps it busy, and a clear config
# error for a mount resource without a directory.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_hakd
require_cmd mkfs.ext4 losetup mountpoint jq fuser

MNT=$WORK/mnt
mkdir -p "$MNT"
sparse_file "$WORK/fs.img" $((64 * 1024 * 1024))
mkfs.ext4 -q -F "$WORK/fs.img"
loop_attach "$WORK/fs.img"
defer "! mountpoint -q '$MNT' || umount '$MNT' || umount -l '$MNT'"
sparse_file "$WORK/vol.img" $((16 * 1024 * 1024))
APP_PID=$WORK/app.pid

# write_conf FORCE_UNMOUNT
write_conf() {
	cat >"$WORK/hak.conf" <<CONF
global {
	control-socket $WORK/ctl
	state-dir $WORK
}
volume v {
	backing $WORK/vol.img
	nbd-socket $WORK/v.nbd
}
group g {
	volume v
	monitor-interval 200ms
	max-restarts 2
	restart-window 60s
	resource fs {
		type mount
		device $LOOP_DEV
		directory $MNT
		fstype ext4
		force-unmount $1
	}
	resource app {
		type exec
		start "echo started >>$MNT/app.log && setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo \$! >$APP_PID"
		monitor "kill -0 \$(cat $APP_PID)"
		# A stop must succeed when the app is already gone (it may have crashed).
		stop "p=\$(cat $APP_PID 2>/dev/null) || exit 0; kill \$p 2>/dev/null || ! kill -0 \$p 2>/dev/null || exit 1; rm -f $APP_PID"
		timeout 10s
	}
}
CONF
}

HPID=
start_hakd() {
	"$HAKD" --config "$WORK/hak.conf" --foreground </dev/null >>"$WORK/hakd.log" 2>&1 &
	HPID=$!
	track_pid "$HPID"
	wait_for "[[ -S $WORK/ctl ]]" 10 || fail "hakd did not start: $(tail -n 5 "$WORK/hakd.log")"
}
stop_hakd() {
	kill -TERM "$HPID"
	wait_for "! pid_alive $HPID" 15 || fail "hakd did not exit on SIGTERM"
	wait "$HPID" || fail "hakd exited with status $?"
	rm -f "$WORK/ctl"
}
hk() { timeout 10 "$HAKCTL" --control "$WORK/ctl" "$@"; }
gstate() { hk status --json | jq -r '.groups[0].state'; }
res_field() { hk status --json | jq -r ".groups[0].resources[] | select(.name == \"$1\") | .$2"; }
app_pid() { cat "$APP_PID" 2>/dev/null || echo none; }
kill_app() {
	local p
	p=$(app_pid)
	[[ $p != none ]] && kill "$p" 2>/dev/null || true
}
defer kill_app

write_conf no
start_hakd
assert_eq "$(gstate)" stopped "group state before start"
hk group start g >/dev/null
wait_for "[[ \$(gstate) == started ]]" 20 || fail "group did not start: $(hk status)"
mountpoint -q "$MNT" || fail "$MNT is not mounted after the group started"
assert_eq "$(cat "$MNT/app.log")" started "the app ran on the mounted filesystem"
pid1=$(app_pid)
kill -0 "$pid1" || fail "the app process $pid1 is not running"

# The app crashes: restarted in place, the filesystem stays mounted all along.
mounts_before=$(grep -c "start of resource fs" "$WORK/hakd.log" || true)
kill "$pid1"
wait_for "[[ \$(res_field app restarts) == 1 && \$(gstate) == started ]]" 20 ||
	fail "the app was not restarted in place: $(hk status)"
pid2=$(app_pid)
[[ $pid2 != "$pid1" ]] && kill -0 "$pid2" || fail "no new app process after the restart ($pid1 -> $pid2)"
assert_eq "$(res_field fs restarts)" 0 "restarts of the mount"
assert_eq "$(grep -c "start of resource fs" "$WORK/hakd.log" || true)" "$mounts_before" \
	"mount starts during the app restart"
assert_eq "$(sed -n '$=' "$MNT/app.log")" 2 "app starts logged on the filesystem"
mountpoint -q "$MNT" || fail "$MNT was unmounted by an app restart"

# A process keeps the filesystem busy and force-unmount is off: the stop must block.
(cd "$MNT" && exec sleep 1000) </dev/null >/dev/null 2>&1 &
HOLDER=$!
track_pid "$HOLDER"
hk group stop g >/dev/null
wait_for "[[ \$(gstate) == blocked ]]" 20 || fail "a busy mount did not block the stop: $(hk status)"
mountpoint -q "$MNT" || fail "blocked, yet $MNT is not mounted"
hk status | grep -q "group g (volume v): blocked; stop of resource fs failed" ||
	fail "hakctl status does not say why the group is blocked: $(hk status)"
assert_eq "$(res_field app state)" down "the app was stopped before the mount"
if hk group start g >"$WORK/start.out" 2>&1; then
	fail "a blocked group accepted a start"
fi
assert_contains "$(cat "$WORK/start.out")" "blocked"

# The operator frees the filesystem and clears the block.
kill "$HOLDER"
wait "$HOLDER" 2>/dev/null || true
hk group clear g >/dev/null
wait_for "[[ \$(gstate) == stopped ]]" 20 || fail "clear did not stop the group: $(hk status)"
! mountpoint -q "$MNT" || fail "$MNT is still mounted after the group stopped"
stop_hakd

# force-unmount yes: the busy filesystem is freed by killing its user.
write_conf yes
start_hakd
hk group start g >/dev/null
wait_for "[[ \$(gstate) == started ]]" 20 || fail "group did not start again: $(hk status)"
(cd "$MNT" && exec sleep 1000) </dev/null >/dev/null 2>&1 &
HOLDER=$!
track_pid "$HOLDER"
hk group stop g >/dev/null
wait_for "[[ \$(gstate) == stopped ]]" 30 || fail "force-unmount did not stop the group: $(hk status)"
! mountpoint -q "$MNT" || fail "$MNT is still mounted"
wait_for "! pid_alive $HOLDER" 10 || fail "the process keeping $MNT busy was not killed"
stop_hakd

# A mount without a directory is a config error with its position.
sed -i "/directory $(printf '%s' "$MNT" | sed 's|/|\\/|g')/d" "$WORK/hak.conf"
if "$HAKD" --config "$WORK/hak.conf" --foreground >"$WORK/bad.out" 2>&1; then
	fail "hakd accepted a mount resource without a directory"
fi
assert_contains "$(cat "$WORK/bad.out")" "Resource 'fs' of type mount needs the key 'directory'."
log "group: start order, in-place restart, blocked stop, clear, force-unmount, config error all as expected"
