#!/usr/bin/env bash
# Runs inside the guest (tests/integration/t_kernel.sh boots it): the kernel's own NBD client on
# a hakd volume. hak-attach binds /dev/nbdN to hakd over the NBD netlink API with two
# connections; ext4 is made, mounted and filled. Then hakd is killed with SIGKILL while a write
# is in flight in the page cache, a new hakd serves the same file, and `hak-attach --reconfigure`
# hands the device new sockets: the pending write completes, both files read back with their
# checksums after the caches are dropped, no I/O error reached the kernel log, and e2fsck finds
# the file system clean.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"
require_hakd
require_cmd mkfs.ext4 e2fsck sha256sum dmesg
ATTACH=$HAK_BUILD/hak-attach
[[ -x $ATTACH ]] || fail "$ATTACH is not built"
[[ -e /sys/module/nbd ]] || modprobe nbd nbds_max=8 || fail "modprobe nbd failed: no nbd module"

img=$WORK/vol.img
truncate -s 256M "$img"
hakd_start v1 "$img" --name vol
dev=$("$ATTACH" --socket "$HAKD_SOCK" --export vol --connections 2) || fail "hak-attach failed"
[[ $dev =~ ^/dev/nbd[0-9]+$ ]] || fail "hak-attach printed '$dev', not a device"
defer "$ATTACH --detach $dev >/dev/null 2>&1 || true"
log "attached $dev: $(cat "/sys/block/${dev#/dev/}/size") sectors, backend $(cat "/sys/block/${dev#/dev/}/backend" 2>/dev/null)"
dmesg -C
mkfs.ext4 -q "$dev" || fail "mkfs.ext4 on $dev failed"
mnt=$WORK/mnt
mkdir -p "$mnt"
mount "$dev" "$mnt" || fail "mounting $dev failed"
defer "umount $mnt 2>/dev/null || true"
head -c $((24 << 20)) /dev/urandom >"$WORK/a"
head -c $((8 << 20)) /dev/urandom >"$WORK/b"
cp "$WORK/a" "$mnt/a"
sync -f "$mnt" || fail "sync of the first file failed"

# hakd dies; a write waits in the page cache for the device's next socket.
kill -KILL "$HAKD_PID"
wait "$HAKD_PID" 2>/dev/null || true
cp "$WORK/b" "$mnt/b"
(sync -f "$mnt") &
syncer=$!
track_pid "$syncer"
sleep 1
pid_alive "$syncer" || fail "the sync returned while no hakd was serving $dev"
hakd_start v2 "$img" --name vol
"$ATTACH" --reconfigure "$dev" --socket "$HAKD_SOCK" --export vol --connections 2 >/dev/null ||
	fail "hak-attach --reconfigure failed"
for ((i = 0; i < 300; i++)); do
	pid_alive "$syncer" || break
	sleep 0.1
done
pid_alive "$syncer" && fail "the pending write did not complete 30 s after the reconfigure"
wait "$syncer" || fail "the sync pending across the restart failed"
echo 3 >/proc/sys/vm/drop_caches
for f in a b; do
	assert_eq "$(sha256sum <"$mnt/$f")" "$(sha256sum <"$WORK/$f")" "file $f read back from $dev"
done
errs=$(dmesg | grep -iE 'I/O error|EXT4-fs error|Buffer I/O' || true)
[[ -z $errs ]] || fail "the kernel logged errors: $errs"
log "kernel: $(dmesg | grep -i "${dev#/dev/}" | tr '\n' ' ' | cut -c1-300)"
umount "$mnt"
e2fsck -fn "$dev" >"$WORK/fsck.out" 2>&1 || fail "e2fsck found problems: $(tail -n 5 "$WORK/fsck.out")"
"$ATTACH" --detach "$dev" >/dev/null || fail "hak-attach --detach failed"
hakd_stop v2
log "PASS: ext4 on $dev through hak-attach survived a SIGKILL of hakd and a reconfigure; no I/O error, fsck clean"
