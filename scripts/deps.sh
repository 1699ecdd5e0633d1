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
	# t_metrics checks the metrics endpoint's output with promtool, which Debian ships only in
	# the prometheus server's package (about 100 MB; on a systemd host it enables
	# prometheus.service, which listens on :9090)
	curl prometheus
	# hakd's Type=notify and watchdog (sd_notify), and t_systemd: a real systemd booted in a
	# container of this host's tree (systemd-nspawn)
	libsystemd-dev systemd systemd-container
	# make deb / make rpm and t_package: dpkg-buildpackage with debhelper (compat 13), lintian,
	# Debian's rpmbuild; libsystemd-dev is in the package's Build-Depends; bash-completion
	# for t_completion's _filedir and the completion file's home
	debhelper dpkg-dev fakeroot lintian rpm bash-completion
	# the Pacemaker resource agent (packaging/ocf/hak): ocf-tester and the OCF shell functions
	# (resource-agents), a real Corosync + Pacemaker cluster on two namespaces (t_pacemaker),
	# crm_attribute/cibadmin/crm_mon (pacemaker-cli-utils), xmllint for the meta-data's DTD,
	# the crm shell whose commands docs/pacemaker.md gives (t_ocf_agent runs them)
	resource-agents pacemaker corosync pacemaker-cli-utils libxml2-utils crmsh
	# the RDMA transport (librdmacm, libibverbs; rxe's user-space provider) and the tools that
	# set up and check Soft-RoCE devices in the guest test (rdma from iproute2, rping)
	librdmacm-dev libibverbs-dev ibverbs-providers rdmacm-utils ibverbs-utils
	# bench/rdma_design.sh: SEND against RDMA WRITE on the guest's rxe device (ib_send_lat,
	# ib_write_lat, ib_send_bw, ib_write_bw), the measurements behind the RDMA data path
	perftest
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
# Some of these packages are servers the tests only borrow programs from (promtool) or run in
# their own namespaces (corosync, pacemaker, PostgreSQL): none of them may start on this host
# while installing (a policy-rc.d that says no, unless one is there already), and the services
# of those installed now stay disabled.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\n# scripts/deps.sh of hak, while it installs packages\nexit 101\n' >"$policy"
	chmod 755 "$policy"
	trap 'rm -f "$policy"' EXIT
fi
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
for p in "${missing[@]}"; do
	case $p in
	corosync | pacemaker | prometheus | postgresql)
		if command -v systemctl >/dev/null; then
			systemctl disable "$p.service" >/dev/null 2>&1 || true
		fi
		;;
	esac
done
