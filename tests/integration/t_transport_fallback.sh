#!/usr/bin/env bash
# timeout: 120
# transport rdma,tcp where RDMA has no path (this host has no RDMA device, and the pair runs in
# two network namespaces anyway): the pair connects over TCP, status says tcp with rdma,tcp
# configured and the RDMA retries running, a ledger storm on alpha reaches beta (sha256 of both
# copies equal after the stop, the ledger verifies on both), and each node logs the fallback
# exactly once although alpha keeps trying RDMA (its debug log shows the retries) and beta keeps
# trying to listen for it.
# A hakd built without rdma-core: the same pair replicates over TCP, and each node says once
# that its build has no RDMA (so the test runs, and asserts, in both builds).
# The move back onto RDMA needs a device: tests/guest/k_repl_rdma_fallback.sh.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
require_hakd
require_cmd sha256sum jq
# shellcheck source=tests/integration/ledger.sh
. "$(dirname "$0")/ledger.sh"

# Which build is this: check-config refuses plain rdma only where RDMA was left out.
cat >"$WORK/probe.conf" <<EOF
node alpha {
    address 127.0.0.1:7789
}
node beta {
    address 127.0.0.2:7789
}
volume db {
    backing $WORK/probe.img
    nbd-socket $WORK/probe.nbd
    insecure-no-auth yes
    transport rdma
}
EOF
have_rdma=1
out=$("$HAKCTL" check-config "$WORK/probe.conf" 2>&1) || have_rdma=0
if ((have_rdma == 0)); then
	assert_contains "$out" "this build has no RDMA" "check-config of transport rdma"
fi
sed -i 's/transport rdma$/transport rdma,tcp/' "$WORK/probe.conf"
out=$("$HAKCTL" check-config "$WORK/probe.conf" 2>&1) ||
	fail "check-config refuses transport rdma,tcp: $out"
log "this hakd has RDMA: $have_rdma; check-config accepts rdma,tcp"

PAIR_TRANSPORT=rdma,tcp PAIR_LOG_LEVEL=debug PAIR_BLANK=1 pair_setup sync 64M
HAKD_LOGS[alpha]=$WORK/alpha.log
HAKD_LOGS[beta]=$WORK/beta.log
wait_synced 30
for n in alpha beta; do
	assert_eq "$(repl $n transport)" tcp "transport of $n's connection"
	assert_eq "$(repl $n transport_configured)" "rdma,tcp" "configured transport of $n"
	assert_eq "$(repl $n transport_switches)" 0 "in-place moves on $n"
	assert_eq "$(repl $n connections)" 1 "connections of $n"
	assert_eq "$(repl $n transport_retrying)" "$([[ $have_rdma == 1 ]] && echo true || echo false)" \
		"$n retrying RDMA"
done
text=$(hk alpha status)
if ((have_rdma)); then
	assert_contains "$text" "link Connected over tcp (rdma preferred, retrying)" "hakctl status"
fi

hk alpha primary db >/dev/null || fail "promoting alpha failed"
wait_repl beta peer_role primary 10
"$LEDGER" write --uri "$(node_uri alpha)" --ledger "$WORK/l" --qd 8 --blocks 4096 \
	--seconds 5 >"$WORK/w.out" 2>"$WORK/w.err" || fail "the storm failed: $(cat "$WORK/w.err")"
sum=$(grep '^ledger:' "$WORK/w.out") || fail "the writer printed no summary"
assert_eq "$(field_before "$sum" failed)" 0 "failed writes ($sum)"
((acked = $(field_before "$sum" "writes acknowledged"), acked > 0)) || fail "nothing written: $sum"
log "storm over the fallback: $sum"
wait_synced 30

if ((have_rdma)); then
	# The storm took 5 s: alpha tried RDMA every 2 s meanwhile, and beta its listener.
	tries=$(grep -c "No RDMA path to beta at 192.0.2.2:7789 yet" "$WORK/alpha.log" || true)
	((tries >= 2)) || fail "alpha tried RDMA $tries times while connected over TCP, want >= 2"
	for n in alpha beta; do
		said=$(grep -c "replicating over TCP\." "$WORK/$n.log" || true)
		assert_eq "$said" 1 "fallback lines in $n's log: $(grep 'replicating over TCP' "$WORK/$n.log")"
	done
	assert_contains "$(grep 'replicating over TCP' "$WORK/alpha.log")" \
		"Volume db: no RDMA path to beta at 192.0.2.2:7789: " "alpha's fallback line"
	assert_eq "$(grep -c 'No RDMA listener at 192.0.2.2:7789' "$WORK/beta.log")" 1 \
		"beta's lines about its RDMA listener"
	log "alpha retried RDMA $tries times, each node said once that it replicates over TCP"
else
	for n in alpha beta; do
		assert_eq "$(grep -c 'this build has no RDMA' "$WORK/$n.log")" 1 "no-RDMA lines of $n"
	done
fi
assert_eq "$(repl alpha connections)/$(repl beta connections)" 1/1 "connections after the storm"

hk alpha secondary db >/dev/null || fail "demoting alpha failed"
wait_repl beta peer_role secondary 10
node_stop alpha
node_stop beta
assert_eq "$(sha256sum <"$(backing alpha)")" "$(sha256sum <"$(backing beta)")" "the two copies"
ledger_verify "$WORK/l" --file "$(backing alpha)"
ledger_verify "$WORK/l" --file "$(backing beta)"
log "PASS: transport rdma,tcp without an RDMA path replicates over TCP, logged once per node"
