#!/bin/bash
# make demo: a standalone hakd export with ext4 on it, watched through hakctl.
# (The two-node failover demo replaces this once replication and the cluster manager land.)
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=${HAK_BUILD:-build/rel}
RUN_ID="$$-$RANDOM"
WORK="/var/tmp/hak-demo.$RUN_ID"
SOCK="$WORK/db.nbd"
CTL="$WORK/hakd.sock"
HAKD_PID="" FUSE_PID="" LOOP="" MNT="$WORK/mnt"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

cleanup() {
	set +e
	mountpoint -q "$MNT" && umount "$MNT"
	[ -n "$LOOP" ] && losetup -d "$LOOP"
	if [ -n "$FUSE_PID" ]; then
		fusermount3 -u "$WORK/fuse" 2>/dev/null
		kill "$FUSE_PID" 2>/dev/null
		wait "$FUSE_PID" 2>/dev/null
	fi
	if [ -n "$HAKD_PID" ] && kill -0 "$HAKD_PID" 2>/dev/null; then
		kill -TERM "$HAKD_PID"
		wait "$HAKD_PID"
	fi
	rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

wait_for() { # CMD... — up to 10 s
	for _ in $(seq 100); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
	echo "demo: timed out waiting for: $*" >&2
	return 1
}

mkdir -p "$WORK/fuse" "$MNT"
step "Create a 512 MiB sparse backing file and serve it with hakd"
truncate -s 512M "$WORK/db.img"
"$BUILD/hakd" --export "$WORK/db.img" --socket "$SOCK" --name db --control "$CTL" \
	--foreground 2> >(sed 's/^/  hakd: /' >&2) &
HAKD_PID=$!
wait_for test -S "$SOCK"
nbdinfo "nbd+unix:///db?socket=$SOCK" | sed 's/^/  /'

step "Attach it as a block device (nbdfuse + loop) and make ext4 on it"
nbdfuse "$WORK/fuse/disk" "nbd+unix:///db?socket=$SOCK" &
FUSE_PID=$!
wait_for test -e "$WORK/fuse/disk"
LOOP=$(losetup --show -f "$WORK/fuse/disk")
echo "  block device: $LOOP"
mkfs.ext4 -q -F "$LOOP"
mount "$LOOP" "$MNT"

step "Write a small 'database': 100 files, remember their checksums"
for i in $(seq 100); do head -c $((RANDOM * 8)) /dev/urandom > "$MNT/row$i"; done
(cd "$MNT" && sha256sum row* > "$WORK/sums")
sync
"$BUILD/hakctl" --control "$CTL" status | sed 's/^/  /'

step "Unmount, check the filesystem, mount again and verify every file"
umount "$MNT"
fsck.ext4 -fn "$LOOP" | sed 's/^/  /'
mount "$LOOP" "$MNT"
(cd "$MNT" && sha256sum --quiet -c "$WORK/sums") && echo "  all 100 files verified"
umount "$MNT"
losetup -d "$LOOP"; LOOP=""

step "Allocation map of the volume as NBD clients see it (first lines)"
nbdinfo --map "nbd+unix:///db?socket=$SOCK" | head -8 | sed 's/^/  /'

step "Stop hakd with SIGTERM: it answers what is in flight, flushes, exits 0"
fusermount3 -u "$WORK/fuse"; wait "$FUSE_PID" || true; FUSE_PID=""
kill -TERM "$HAKD_PID"; wait "$HAKD_PID"; echo "  hakd exited with status $?"; HAKD_PID=""
echo
echo "Demo finished. Replication and failover arrive in the next releases."
