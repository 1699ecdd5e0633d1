#!/bin/bash
# Install the Debian packages hak needs to build, test, benchmark and run the demo.
# Does nothing (and needs no network) when everything is already installed.
set -euo pipefail

PACKAGES=(
	# build
	build-essential pkg-config clang clang-format libclang-rt-14-dev
	libev-dev liburing-dev libssl-dev libjansson-dev
	libnl-3-dev libnl-genl-3-dev libnl-route-3-dev check libnbd-dev
	# the TLS tests: certificates (openssl), a man in the middle (python3)
	openssl python3
	# tests, bench and demo: real NBD clients (libnbd-bin has nbdinfo, nbdcopy, nbdfuse),
	# filesystems, namespaces
	libnbd-bin nbdkit qemu-utils fio fuse3 e2fsprogs
	iproute2 iputils-ping util-linux procps psmisc jq kmod
	# t_nbd_tls makes its certificates and keys per run
	openssl
	# the database of the service-group tests and the demo
	postgresql postgresql-client python3-psycopg2
	# bench/pgbench.sh: QEMU's mirror to compare with (qemu-storage-daemon) and its chart
	qemu-system-common gnuplot-nox
	# tests/guest/guest.sh: a stock kernel booted in QEMU, for the modules this machine's kernel
	# may lack (nbd, tls, rdma_rxe): t_kernel
	qemu-system-x86 linux-image-amd64 busybox-static
	# the RDMA transport (librdmacm, libibverbs; rxe's user-space provider) and the tools that
	# set up and check Soft-RoCE devices in the guest test (rdma from iproute2, rping)
	librdmacm-dev libibverbs-dev ibverbs-providers rdmacm-utils ibverbs-utils
)

missing=()
for p in "${PACKAGES[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done

if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing packages: ${missing[*]}" >&2
	echo "deps: run 'make deps' as root (or: apt-get install ${missing[*]})." >&2
	exit 1
fi

echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
