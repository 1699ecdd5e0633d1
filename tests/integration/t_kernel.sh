#!/usr/bin/env bash
# timeout: 900
# The tests that need kernel modules this machine's kernel lacks (nbd; later tls and rdma_rxe):
# one boot of a stock Debian kernel under QEMU (tests/guest/guest.sh, TCG) runs every
# tests/guest/k_*.sh in turn with the binaries built here, and this test fails if any of them
# does. Each k_*.sh is an ordinary integration test (it sources lib.sh) that only makes sense in
# the guest.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_cmd qemu-system-x86_64 busybox
ls /boot/vmlinuz-* >/dev/null 2>&1 || fail "no kernel in /boot: run scripts/deps.sh (linux-image-amd64)"

tests=("$REPO"/tests/guest/k_*.sh)
log "booting a guest for: ${tests[*]##*/}"
rc=0
"$REPO/tests/guest/guest.sh" --timeout 780 -- env HAK_BUILD="$HAK_BUILD" \
	HAK_IO_ENGINE="$HAK_IO_ENGINE" bash -c '
		rc=0
		for t in tests/guest/k_*.sh; do
			echo "=== $t"
			bash "$t" || { echo "=== FAILED: $t"; rc=1; }
		done
		exit $rc' >"$WORK/guest.out" 2>&1 || rc=$?
sed 's/^/    /' "$WORK/guest.out"
((rc == 0)) || fail "the guest run failed with status $rc"
n=$(grep -c '^\[.*\] PASS' "$WORK/guest.out" || true)
assert_eq "$n" "${#tests[@]}" "guest tests that passed"
log "PASS: ${#tests[@]} guest test(s) passed under $(grep -o 'kernel [^,]*' "$WORK/guest.out" | head -n 1)"
