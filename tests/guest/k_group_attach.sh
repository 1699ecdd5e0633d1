#!/usr/bin/env bash
# Runs inside the guest (tests/integration/t_kernel.sh boots it): a service group's attach
# resource where the kernel has its NBD driver. The group (attach -> mount ext4 -> exec) binds
# the volume with hak-attach, not nbdfuse: the link points at a /dev/nbdN tagged with the
# group's identifier. hakd is then killed with SIGKILL while a write waits in the page cache; a
# new hakd and `hakctl group start` find the device by its identifier and give it new sockets
# (the mount, already there, is left alone): the write completes, both files read back with
# their checksums after the caches are dropped, and no I/O error reached the kernel log. The
# group's stop unmounts and detaches the device, and e2fsck finds the file system clean.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"
require_hakd
require_cmd mkfs.ext4 e2fsck sha256sum dmesg jq findmnt
[[ -e /sys/module/nbd ]] || modprobe nbd nbds_max=8 || fail "modprobe nbd failed: no nbd module"

img=$WORK/vol.img
truncate -s 128M "$img"
mkfs.ext4 -q -F "$img"
MNT=$WORK/mnt
LINK=$WORK/vol.dev
defer "! mountpoint -q '$MNT' || umount '$MNT' || umount -l '$MNT'"
defer "d=\$(readlink '$LINK' 2>/dev/null) && '$HAK_BUILD/hak-attach' --detach \"\$d\" >/dev/null 2>&1 || true"
cat >"$WORK/hak.conf" <<CONF
global {
	control-socket $WORK/ctl
	state-dir $WORK
}
volume db {
	backing $img
	nbd-socket $WORK/db.nbd
}
group svc {
	volume db
	monitor-interval 500ms
	resource disk {
		type attach
		directory $WORK/fuse
		link $LINK
	}
	resource fs {
		type mount
		device $LINK
		directory $MNT
		fstype ext4
	}
	resource marker {
		type exec
		start "touch $MNT/marker"
		stop "true"
		monitor "test -f $MNT/marker"
	}
}
CONF
HPID=
HAKD_LOGS[hakd]=$WORK/hakd.log
start_hakd() {
	rm -f "$WORK/ctl"
	"$HAKD" --config "$WORK/hak.conf" --foreground </dev/null >>"$WORK/hakd.log" 2>&1 &
	HPID=$!
	track_pid "$HPID"
	wait_for "[[ -S $WORK/ctl ]]" 20 || fail "hakd did not start: $(tail -n 5 "$WORK/hakd.log")"
}
hk() { timeout 30 "$HAKCTL" --control "$WORK/ctl" "$@"; }
gstate() { hk status --json | jq -r '.groups[0].state'; }
wait_group() {
	wait_for "[[ \$(gstate) =~ ^($1|failed|blocked)\$ ]]" "$2" || true
	[[ $(gstate) == "$1" ]] || fail "the group is not $1: $(hk status); kernel: $(dmesg | tail -n 8)"
}

start_hakd
hk group start svc >/dev/null
wait_group started 60
dev=$(readlink "$LINK")
[[ $dev =~ ^/dev/nbd[0-9]+$ ]] || fail "the attach resource made $LINK -> '$dev', not a kernel NBD device"
n=${dev#/dev/}
assert_eq "$(cat "/sys/block/$n/backend")" "hak:svc/disk" "the device's identifier"
[[ ! -d $WORK/fuse ]] || ! mountpoint -q "$WORK/fuse" || fail "nbdfuse ran although nbd exists"
assert_eq "$(findmnt -n -o SOURCE --mountpoint "$MNT")" "$dev" "what is mounted on $MNT"
log "group started on $dev (backend $(cat "/sys/block/$n/backend"))"
dmesg -C
head -c $((16 << 20)) /dev/urandom >"$WORK/a"
head -c $((8 << 20)) /dev/urandom >"$WORK/b"
cp "$WORK/a" "$MNT/a"
sync -f "$MNT" || fail "sync of the first file failed"

# hakd dies under the running group; a write waits for the device's next socket.
kill -KILL "$HPID"
wait "$HPID" 2>/dev/null || true
cp "$WORK/b" "$MNT/b"
(sync -f "$MNT") &
syncer=$!
track_pid "$syncer"
sleep 1
pid_alive "$syncer" || fail "the sync returned while no hakd was serving $dev"
start_hakd
hk group start svc >/dev/null
wait_group started 60
assert_eq "$(readlink "$LINK")" "$dev" "the device after the restart (the same one, new sockets)"
for ((i = 0; i < 300; i++)); do
	pid_alive "$syncer" || break
	sleep 0.1
done
pid_alive "$syncer" && fail "the pending write did not complete 30 s after the group start"
wait "$syncer" || fail "the sync pending across the restart failed"
echo 3 >/proc/sys/vm/drop_caches
for f in a b; do
	assert_eq "$(sha256sum <"$MNT/$f")" "$(sha256sum <"$WORK/$f")" "file $f read back from $dev"
done
errs=$(dmesg | grep -iE 'I/O error|EXT4-fs error|Buffer I/O' || true)
[[ -z $errs ]] || fail "the kernel logged errors: $errs"

hk group stop svc >/dev/null
wait_group stopped 60
! mountpoint -q "$MNT" || fail "$MNT is still mounted after the stop"
[[ ! -e $LINK ]] || fail "$LINK is still there after the stop"
[[ ! -e /sys/block/$n/pid ]] || fail "$dev is still connected after the stop"
kill -TERM "$HPID"
wait_for "! pid_alive $HPID" 20 || fail "hakd did not exit on SIGTERM"
e2fsck -fn "$img" >"$WORK/fsck.out" 2>&1 || fail "e2fsck: $(tail -n 5 "$WORK/fsck.out")"
log "PASS: the group attached with hak-attach, survived a SIGKILL of hakd, stopped clean"
