#!/usr/bin/env bash
# Run a command under a stock Debian kernel booted in QEMU, for what this machine's kernel lacks
# (the nbd, tls and rdma_rxe modules). The guest shares this machine's / read-only over
# virtio-9p, so it runs the very binaries built here; /run, /tmp and /var/tmp are tmpfs in it.
#
#   tests/guest/guest.sh [--timeout S] [--keep] -- COMMAND [ARGS...]
#
# COMMAND runs as root in the guest, from the repository. Its output is printed when the guest
# is done; the exit status is COMMAND's, 124 when it ran out of time, 125 when the guest never
# reported (boot failure; the console log is printed). Needs qemu-system-x86, linux-image-amd64
# and busybox-static (scripts/deps.sh installs them).
#
# TCG only: this machine's /dev/kvm (kvm_pvm) cannot run a stock kernel. A guest reaches a shell
# in about 6 s. The initramfs (busybox and the 9p modules, about 2 MB) is cached in
# build/guest/ and rebuilt when the kernel or tests/guest/init.sh changes.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
timeout_s=300
keep=0
while (($#)); do
	case $1 in
	--timeout) timeout_s=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	--) shift; break ;;
	*) break ;;
	esac
done
(($#)) || { echo "usage: $0 [--timeout S] [--keep] -- COMMAND [ARGS...]" >&2; exit 2; }

for c in qemu-system-x86_64 busybox; do
	command -v "$c" >/dev/null || { echo "guest: $c is missing; run scripts/deps.sh" >&2; exit 2; }
done
kernel=$(ls -1 /boot/vmlinuz-* 2>/dev/null | sort -V | tail -n 1)
[[ -n $kernel ]] || { echo "guest: no /boot/vmlinuz-*; run scripts/deps.sh" >&2; exit 2; }
kver=${kernel#/boot/vmlinuz-}
moddir=/lib/modules/$kver
[[ -d $moddir ]] || { echo "guest: no $moddir for kernel $kver" >&2; exit 2; }

# ---- the initramfs ------------------------------------------------------------------------------
MODULES=(virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci
	9pnet 9pnet_virtio netfs fscache 9p)
cache=$REPO/build/guest
initrd=$cache/initramfs-$kver.cpio.gz
if [[ ! -s $initrd || $REPO/tests/guest/init.sh -nt $initrd ]]; then
	mkdir -p "$cache"
	stage=$(mktemp -d "$cache/stage.XXXXXX")
	mkdir -p "$stage/bin" "$stage/lib/modules"
	cp /bin/busybox "$stage/bin/busybox"
	cp "$REPO/tests/guest/init.sh" "$stage/init"
	chmod 755 "$stage/init"
	for m in "${MODULES[@]}"; do
		f=$(find "$moddir/kernel" -name "$m.ko*" | head -n 1)
		[[ -n $f ]] || { echo "guest: module $m not found under $moddir" >&2; rm -rf "$stage"; exit 2; }
		case $f in
		*.xz) xz -dc "$f" >"$stage/lib/modules/$m.ko" ;;
		*.zst) zstd -qdc "$f" >"$stage/lib/modules/$m.ko" ;;
		*) cp "$f" "$stage/lib/modules/$m.ko" ;;
		esac
		echo "$m" >>"$stage/modules.order"
	done
	(cd "$stage" && find . | busybox cpio -o -H newc 2>/dev/null | gzip -1) >"$initrd.tmp"
	mv "$initrd.tmp" "$initrd"
	rm -rf "$stage"
fi

# ---- one run ------------------------------------------------------------------------------------
out=$(mktemp -d /var/tmp/hak-guest.XXXXXX)
qpid=""
cleanup() {
	[[ -n $qpid ]] && kill "$qpid" 2>/dev/null || true
	((keep)) || rm -rf "$out"
}
trap cleanup EXIT
{
	printf 'set -u\n'
	printf '%q ' "$@"
	printf '\n'
} >"$out/cmd"
echo "$timeout_s" >"$out/timeout"
t0=$(date +%s.%N)
timeout $((timeout_s + 60)) qemu-system-x86_64 \
	-accel tcg,thread=multi -cpu max -smp 2 -m 2G \
	-nographic -no-reboot -serial "file:$out/console.log" -monitor none \
	-kernel "$kernel" -initrd "$initrd" \
	-append "console=ttyS0 panic=-1 quiet loglevel=3 hak.repo=$REPO" \
	-virtfs "local,path=/,mount_tag=root,security_model=none,readonly=on,multidevs=remap" \
	-virtfs "local,path=$out,mount_tag=out,security_model=none,multidevs=remap" \
	</dev/null >"$out/qemu.log" 2>&1 &
qpid=$!
wait "$qpid" || true
qpid=""
secs=$(echo "$(date +%s.%N) - $t0" | bc 2>/dev/null || echo "?")
[[ -f $out/output.log ]] && cat "$out/output.log"
if [[ ! -f $out/rc ]]; then
	echo "guest: the guest did not report after ${secs}s; console and QEMU said:" >&2
	tail -n 40 "$out/console.log" "$out/qemu.log" >&2 || true
	exit 125
fi
rc=$(cat "$out/rc")
echo "guest: exit status $rc after ${secs}s (kernel $kver, TCG)"
exit "$rc"
