#!/bin/bash
# Runs in the guest as its init, after switch_root into the host's / (tests/guest/init.sh):
# a few mounts a test expects, loopback up, then the command tests/guest/guest.sh left in
# /run/hak-guest/cmd; its output and exit status go back through that shared directory. The
# guest then powers off at once.
repo=$1
out=/run/hak-guest
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
mount -t devpts devpts /dev/pts -o mode=620 2>/dev/null || mkdir -p /dev/pts
mount -t devpts devpts /dev/pts 2>/dev/null
mkdir -p /dev/shm && mount -t tmpfs tmpfs /dev/shm
mount -t cgroup2 none /sys/fs/cgroup 2>/dev/null
mount -t tmpfs tmpfs /mnt 2>/dev/null
# devtmpfs has no /dev/fd and no init made one: bash's process substitution (<(...), used by
# the benches and tests run here) needs it.
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
ip link set lo up
hostname hak-guest
echo "guest: kernel $(uname -r), $(nproc) CPUs, up $(cut -d' ' -f1 /proc/uptime) s" >"$out/output.log"
rc=125
if cd "$repo"; then
	timeout "$(cat "$out/timeout")" bash "$out/cmd" >>"$out/output.log" 2>&1
	rc=$?
fi
echo "$rc" >"$out/rc"
sync -f "$out/rc" 2>/dev/null || sync "$out/rc"
echo o >/proc/sysrq-trigger
sleep 10
