#!/usr/bin/env bash
# Runs inside the guest (tests/integration/t_kernel.sh boots it): replication over TLS 1.3 with
# the kernel's tls module loaded. OpenSSL 3.0 hands the sending side of a TLS 1.3 connection to
# the kernel (kTLS TX); receiving stays in OpenSSL. A pair with certificates connects, both
# nodes report ktls_tx, a real NBD client writes on alpha while the kernel makes the records,
# and both backing files end identical; the ledger verifies on beta's copy.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/../integration/pair.sh"
require_hakd
require_cmd sha256sum jq openssl
LEDGER=$TOOLS/hak-ledger
[[ -x $LEDGER ]] || fail "$LEDGER is not built"
modprobe tls || fail "modprobe tls failed: this kernel has no tls module"
grep -qw tls /proc/sys/net/ipv4/tcp_available_ulp || fail "the tls ULP is not available after modprobe"

PAIR_TRANSPORT=tls PAIR_EXTRA="tls-kernel yes" PAIR_BLANK=1 pair_setup sync 64M
pair_report_logs
wait_synced 60
for n in alpha beta; do
	st=$(hk "$n" status --json | jq -c '.volumes[0].replication.tls')
	log "$n: $st"
	assert_eq "$(jq -r .ktls_tx <<<"$st")" true "$n: kernel TLS for sending"
	assert_contains "$(hk "$n" status)" "ktls sending only" "$n: hakctl status"
done
hk alpha primary db >/dev/null || fail "promoting alpha failed"
"$LEDGER" write --uri "$(node_uri alpha)" --ledger "$WORK/l" --seconds 4 --blocks 4096 \
	>"$WORK/storm.out" 2>&1 || fail "the storm failed: $(cat "$WORK/storm.out")"
grep -q ' 0 failed' "$WORK/storm.out" || fail "the storm had failures: $(cat "$WORK/storm.out")"
log "storm: $(grep -m1 'acknowledged' "$WORK/storm.out")"
wait_synced 60
hk alpha secondary db >/dev/null || fail "demoting alpha failed"
node_stop alpha
node_stop beta
assert_eq "$(sha256sum <"$(backing alpha)")" "$(sha256sum <"$(backing beta)")" "the two copies"
"$LEDGER" verify --file "$(backing beta)" --ledger "$WORK/l" >"$WORK/verify.out" 2>&1 ||
	fail "the ledger does not verify on beta: $(tail -n 3 "$WORK/verify.out")"
log "PASS: TLS 1.3 with the kernel making the records it sends; copies identical, ledger verified"
