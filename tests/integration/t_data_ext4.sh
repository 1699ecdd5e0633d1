#!/usr/bin/env bash
# timeout: 240
# A real filesystem on the export: nbdfuse exposes it as a file, a loop device makes that a block
# device, and ext4 goes on top. 200 files of random data are written and their SHA-256 sums recorded;
# after umount, fsck.ext4 -fn must find the filesystem clean, and every file must read back with the
# same sum, first through NBD after a remount, then straight from the backing file after hakd stops.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_cmd nbdfuse fusermount3 losetup mkfs.ext4 fsck.ext4 sha256sum

MiB=$((1024 * 1024))
IMG=$WORK/vol.img
MNT=$WORK/mnt
NFILES=200
sparse_file "$IMG" $((256 * MiB))
hakd_start vol "$IMG"
fuse_attach "$HAKD_URI" "$WORK/fuse"
loop_attach "$FUSE_FILE"
log "export on $FUSE_FILE, loop device $LOOP_DEV"
mkfs.ext4 -q -F -b 4096 "$LOOP_DEV" || fail "mkfs.ext4 on $LOOP_DEV failed"
mount_dev "$LOOP_DEV" "$MNT"

# File sizes from 1 byte to ~512 KiB, some not multiples of the block size; ~50 MiB in total.
mkdir -p "$MNT/d1" "$MNT/d2"
for ((i = 0; i < NFILES; i++)); do
	sz=$(((RANDOM * 32768 + RANDOM) % (512 * 1024) + 1))
	head -c $sz /dev/urandom >"$MNT/d$((i % 2 + 1))/f$i"
done
(cd "$MNT" && find . -type f -name 'f*' | sort | xargs sha256sum) >"$WORK/sums"
assert_eq "$(wc -l <"$WORK/sums")" $NFILES "number of files written"
# syncfs of this filesystem only: a global sync would also wait for other tests' filesystems
sync -f "$MNT"
umount "$MNT"

out=$(fsck.ext4 -fn "$LOOP_DEV" 2>&1) || fail "fsck.ext4 -fn found problems: $out"
log "fsck clean: $(tail -n1 <<<"$out")"

mount "$LOOP_DEV" "$MNT" || fail "second mount of $LOOP_DEV failed"
# Drop the page cache so the sums come from the server, not from memory.
sync -f "$MNT"
# Only this test's caches (drop_caches would walk every filesystem of the machine): the loop
# device's buffers and the FUSE file's pages.
blockdev --flushbufs "$LOOP_DEV"
python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$FUSE_FILE" ||
	log "note: cannot drop the FUSE file's cached pages here"
(cd "$MNT" && sha256sum --quiet -c "$WORK/sums") || fail "file checksums differ after remount"
umount "$MNT"
losetup -d "$LOOP_DEV"
# the loop device lets go of the FUSE file a moment after losetup -d returns
wait_for "fusermount3 -u '$WORK/fuse' 2>/dev/null" 5 || fail "fusermount3 -u $WORK/fuse failed"
hakd_stop vol

# The backing file alone holds the filesystem.
out=$(fsck.ext4 -fn "$IMG" 2>&1) || fail "fsck.ext4 -fn of the backing file found problems: $out"
loop_attach "$IMG"
mount_dev "$LOOP_DEV" "$MNT"
(cd "$MNT" && sha256sum --quiet -c "$WORK/sums") || fail "file checksums differ in the backing file"
log "all $NFILES files verified through NBD and in the backing file"
