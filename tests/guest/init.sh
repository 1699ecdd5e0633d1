#!/bin/busybox sh
# /init of the guest's initramfs (tests/guest/guest.sh builds it): mount this machine's / over
# virtio-9p read-only, writable tmpfs where tests write, the output directory read-write, then
# switch_root into it and run tests/guest/inside.sh from the repository.
bb=/bin/busybox
$bb mkdir -p /proc /sys /dev /newroot
$bb mount -t proc proc /proc
$bb mount -t sysfs sys /sys
$bb mount -t devtmpfs dev /dev
for m in $($bb cat /modules.order); do
	$bb insmod "/lib/modules/$m.ko" || echo "guest init: insmod $m failed"
done
opts=trans=virtio,version=9p2000.L,msize=512000,cache=loose
$bb mount -t 9p -o "ro,$opts" root /newroot || {
	echo "guest init: cannot mount the host's / over 9p"
	$bb poweroff -f
}
for d in run tmp var/tmp; do
	$bb mount -t tmpfs -o mode=1777 tmpfs "/newroot/$d"
done
$bb mkdir -p /newroot/run/hak-guest /newroot/run/hak-host
$bb mount -t 9p -o "rw,$opts" out /newroot/run/hak-guest
repo=$($bb sed -n 's/.*hak\.repo=\([^ ]*\).*/\1/p' /proc/cmdline)
# A repository under one of those tmpfs (a CI clone in /var/tmp) is hidden by them: show the
# host's copy at the same path again.
case $repo in
/run/* | /tmp/* | /var/tmp/*)
	$bb mount --bind /newroot /newroot/run/hak-host # the 9p root alone, not the tmpfs on it
	$bb mkdir -p "/newroot$repo"
	$bb mount --bind "/newroot/run/hak-host$repo" "/newroot$repo"
	;;
esac
for d in proc sys dev; do
	$bb mount --move "/$d" "/newroot/$d"
done
exec $bb switch_root /newroot /bin/bash "$repo/tests/guest/inside.sh" "$repo"
