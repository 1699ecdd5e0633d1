#!/usr/bin/env bash
# timeout: 360
# Replication over TLS 1.3 (transport tls), certificates made per run by tests/tls-certs.sh:
#  1. A pair with certificates connects; status shows transport tls, the cipher and ktls no. A
#     real NBD client (hak-ledger, libnbd) writes on alpha; both backing files end identical.
#  2. With the pair connected, third parties connect to beta's replication port from alpha's
#     namespace with openssl s_client: a certificate of alpha's name from another CA, one of the
#     pair's CA with another name (mallory), and none at all. Beta refuses each with one log line
#     naming 192.0.2.1:PORT and OpenSSL's reason, while the pair stays Connected (sampled the
#     whole time), loses no connection, runs no resync, and both backing files stay unchanged.
#  3. A man in the middle (a small python3 proxy in alpha's namespace, which alpha now takes for
#     beta) flips one ciphertext byte client to server after 256 KiB, well past the handshake,
#     while alpha writes. The connection drops with "bad record mac" and reconnects through the
#     proxy; after alpha is back on the direct path, the pair is in sync, both backing files are
#     identical and the ledger verifies on beta's.
#  4. The same pair with a pre-shared key (PAIR_TRANSPORT=tls-psk) replicates, and a client with
#     another key is refused.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
require_hakd
require_cmd sha256sum jq openssl python3

LEDGER=$TOOLS/hak-ledger
[[ -x $LEDGER ]] || fail "$LEDGER is not built (make BUILD=${HAK_BUILD#"$REPO"/} SAN=1 bins)"
L=$WORK/tls.ledger
T=$WORK/tls
problems=()

# storm SECONDS: hak-ledger writes on alpha, which must be primary.
storm() {
	"$LEDGER" write --uri "$(node_uri alpha)" --ledger "$L" --seconds "$1" --blocks 4096 \
		>"$WORK/storm.out" 2>&1 || fail "the storm failed: $(cat "$WORK/storm.out")"
	grep -q ' 0 failed' "$WORK/storm.out" || fail "the storm had failures: $(cat "$WORK/storm.out")"
}

# same_data WHAT: both backing files are identical (the pair is synced and idle).
same_data() {
	assert_eq "$(sha256sum <"$(backing alpha)")" "$(sha256sum <"$(backing beta)")" \
		"$1: sha256 of alpha's and beta's backing files"
}

# check_status NODE CIPHER_PREFIX: status JSON and hakctl status show the TLS link.
check_status() {
	local st
	st=$(hk "$1" status --json | jq -c '.volumes[0].replication')
	assert_eq "$(jq -r .transport <<<"$st")" tls "$1: replication.transport"
	# Kernel TLS needs the tls module (tests/guest/k_repl_ktls.sh runs where it exists); even
	# then OpenSSL 3.0 offloads TLS 1.3 only when sending, so the link is never kTLS both ways.
	local ulp=false
	grep -qw tls /proc/sys/net/ipv4/tcp_available_ulp 2>/dev/null && ulp=true
	assert_eq "$(jq -r .tls.ktls_tx <<<"$st")" "$ulp" "$1: replication.tls.ktls_tx (tls ULP: $ulp)"
	assert_eq "$(jq -r .tls.ktls <<<"$st")" false "$1: replication.tls.ktls"
	[[ $(jq -r .tls.cipher <<<"$st") == "$2"* ]] ||
		fail "$1: replication.tls.cipher is '$(jq -r .tls.cipher <<<"$st")', want $2*"
	assert_contains "$(hk "$1" status)" "transport tls: $2" "$1: hakctl status"
}

# ---- 1. certificates: a pair replicates ----------------------------------------------------
PAIR_TRANSPORT=tls PAIR_BLANK=1 pair_setup sync 64M
pair_report_logs
wait_synced 30
check_status alpha TLS_AES_
check_status beta TLS_AES_
hk alpha primary db >/dev/null || fail "promoting alpha failed"
storm 2
wait_synced 30
same_data "after the first storm"
log "certificates: $(grep -o 'ledger: [0-9]* writes.*' "$WORK/storm.out" | head -n 1); cipher $(repl alpha tls.cipher)"

# ---- 2. third parties are refused, the pair stays up --------------------------------------
# intruder LABEL WANT ARGS...: s_client from alpha's namespace with ARGS; beta must log a
# refusal matching WANT (extended regex) and the pair must stay Connected throughout.
intruder() {
	local label=$1 want=$2 mark mark_a pid down="" i l n new line
	shift 2
	mark=$(wc -l <"$WORK/beta.log")
	mark_a=$(wc -l <"$WORK/alpha.log")
	ip netns exec "$NS_alpha" timeout 10 openssl s_client -connect 192.0.2.2:7789 -tls1_3 \
		-ign_eof "$@" </dev/null >"$WORK/intruder.out" 2>&1 &
	pid=$!
	track_pid "$pid"
	for ((i = 0; i < 30; i++)); do
		for n in alpha beta; do
			l=$(repl "$n" link)
			[[ $l == Connected ]] || down+=" $n:$l"
		done
		pid_alive "$pid" || ((i < 10)) || break
		sleep 0.1
	done
	wait "$pid" || true
	[[ -z $down ]] || problems+=("$label: the pair left Connected:$down")
	wait_for "tail -n +$((mark + 1)) '$WORK/beta.log' | grep -qE 'Refused the replication connection from 192\.0\.2\.1:[0-9]+: .*($want)'" 3 ||
		problems+=("$label: beta's log has no refusal matching /$want/:$(tail -n +$((mark + 1)) "$WORK/beta.log" | sed 's/^/ | /' | tr -d '\n' | cut -c1-600)")
	new=$(tail -n +$((mark + 1)) "$WORK/beta.log")$(tail -n +$((mark_a + 1)) "$WORK/alpha.log")
	if grep -q 'Lost the connection' <<<"$new"; then
		problems+=("$label: the pair's link went: $(grep -h 'Lost the connection' <<<"$new" | head -n 1)")
	fi
	line=$(tail -n +$((mark + 1)) "$WORK/beta.log" | grep -E 'Refused the replication' | head -n 1)
	log "$label: beta says: ${line:0:300}"
}

sha_a=$(sha256sum <"$(backing alpha)")
sha_b=$(sha256sum <"$(backing beta)")
rs0=$(repl alpha resyncs_completed)/$(repl beta resyncs_completed)
intruder "another CA" "unable to get local issuer certificate" \
	-CAfile "$T/ca.crt" -cert "$T/impostor-alpha.crt" -key "$T/impostor-alpha.key"
intruder "wrong name" "hostname mismatch" \
	-CAfile "$T/ca.crt" -cert "$T/mallory.crt" -key "$T/mallory.key"
intruder "no certificate" "did not return a certificate|certificate required" -CAfile "$T/ca.crt"
assert_eq "$(repl alpha link)/$(repl beta link)" Connected/Connected "links after the intruders"
assert_eq "$(repl alpha resyncs_completed)/$(repl beta resyncs_completed)" "$rs0" \
	"resyncs_completed (alpha/beta) after the intruders"
assert_eq "$(sha256sum <"$(backing alpha)")" "$sha_a" "alpha's backing file after the intruders"
assert_eq "$(sha256sum <"$(backing beta)")" "$sha_b" "beta's backing file after the intruders"

# ---- 3. a man in the middle flips one byte ------------------------------------------------
cat >"$WORK/mitm.py" <<'PY'
# A TCP proxy: LISTEN -> UPSTREAM (leaving from BIND). In the client-to-server direction it
# parses TLS records and, once, flips the first ciphertext byte of an application-data record
# that starts after THRESHOLD bytes of that connection, then writes FLAG.
import socket, sys, threading

listen, upstream, bind, threshold, flag = sys.argv[1:6]
threshold = int(threshold)
lock = threading.Lock()
done = [False]


def flip(buf, st):
    i = 0
    while i < len(buf):
        if st["left"] == 0:
            take = min(5 - len(st["hdr"]), len(buf) - i)
            st["hdr"] += bytes(buf[i:i + take])
            i += take
            if len(st["hdr"]) == 5:
                st["type"], st["left"] = st["hdr"][0], int.from_bytes(st["hdr"][3:5], "big")
                st["start"] = st["seen"] + i
                st["hdr"] = b""
            continue
        with lock:
            if not done[0] and st["type"] == 23 and st["start"] >= threshold:
                buf[i] ^= 0x01
                done[0] = True
                open(flag, "w").write("flipped at byte %d\n" % (st["seen"] + i))
        n = min(st["left"], len(buf) - i)
        st["left"] -= n
        i += n


def pump(src, dst, tamper):
    st = {"hdr": b"", "left": 0, "type": 0, "start": 0, "seen": 0}
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            buf = bytearray(data)
            if tamper:
                flip(buf, st)
            st["seen"] += len(buf)
            dst.sendall(buf)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def addr(s):
    h, p = s.rsplit(":", 1)
    return h, int(p)


ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(addr(listen))
ls.listen(16)
while True:
    c, _ = ls.accept()
    u = socket.socket()
    u.bind((bind, 0))
    try:
        u.connect(addr(upstream))
    except OSError:
        c.close()
        continue
    threading.Thread(target=pump, args=(c, u, True), daemon=True).start()
    threading.Thread(target=pump, args=(u, c, False), daemon=True).start()
PY
hk alpha secondary db >/dev/null || fail "demoting alpha before the proxy failed"
wait_synced 30
node_stop alpha
cp "$WORK/alpha.conf" "$WORK/alpha.conf.direct"
sed -i 's/address 192\.0\.2\.2:7789/address 192.0.2.129:7790/' "$WORK/alpha.conf"
grep -q 192.0.2.129:7790 "$WORK/alpha.conf" || fail "pointing alpha at the proxy failed"
ip netns exec "$NS_alpha" python3 "$WORK/mitm.py" 192.0.2.129:7790 192.0.2.2:7789 192.0.2.1 \
	262144 "$WORK/mitm.flipped" >"$WORK/mitm.log" 2>&1 &
MITM=$!
track_pid "$MITM"
mark=$(wc -l <"$WORK/beta.log")
mark_a=$(wc -l <"$WORK/alpha.log")
node_start alpha
wait_synced 30
hk alpha primary db >/dev/null || fail "promoting alpha behind the proxy failed"
storm 3
[[ -f $WORK/mitm.flipped ]] || fail "the proxy flipped no byte: $(cat "$WORK/mitm.log")"
log "proxy: $(cat "$WORK/mitm.flipped")"
wait_for "tail -n +$((mark + 1)) '$WORK/beta.log' | grep -q 'bad record mac'" 5 ||
	problems+=("mitm: beta's log does not say 'bad record mac':$(tail -n +$((mark + 1)) "$WORK/beta.log" | sed 's/^/ | /' | tr -d '\n' | cut -c1-800)")
log "mitm: beta says: $(tail -n +$((mark + 1)) "$WORK/beta.log" | grep -m1 'bad record mac' | cut -c1-300)"
log "mitm: alpha says: $(tail -n +$((mark_a + 1)) "$WORK/alpha.log" | grep -m1 'Lost the connection' | cut -c1-300)"
wait_synced 30
hk alpha secondary db >/dev/null || fail "demoting alpha behind the proxy failed"
wait_repl beta peer_role secondary 10
node_stop alpha
kill_own "$MITM"
cp "$WORK/alpha.conf.direct" "$WORK/alpha.conf"
node_start alpha
wait_synced 30
check_status alpha TLS_AES_
same_data "after the man in the middle"
out=$("$LEDGER" verify --ledger "$L" --file "$(backing beta)" 2>&1) ||
	fail "the ledger does not verify on beta's file: $out"
log "mitm: the link dropped and came back, data identical: $(grep '^verify:' <<<"$out")"

# ---- 4. a pre-shared key ---------------------------------------------------------------------
node_stop alpha
node_stop beta
PAIR_TRANSPORT=tls-psk
_pair_config alpha
_pair_config beta
node_start alpha
node_start beta
wait_synced 30
check_status alpha TLS_AES_256_GCM_SHA384
hk alpha primary db >/dev/null || fail "promoting alpha with the PSK failed"
storm 1
wait_synced 30
same_data "with the pre-shared key"
intruder "another PSK" "." -psk_identity hak-repl -psk "$(head -c 48 /dev/urandom | od -An -tx1 | tr -d ' \n')" \
	-ciphersuites TLS_AES_256_GCM_SHA384
hk alpha secondary db >/dev/null || fail "demoting alpha failed"
wait_repl beta peer_role secondary 10
node_stop alpha
node_stop beta
same_data "at the end"
out=$("$LEDGER" verify --ledger "$L" --file "$(backing beta)" 2>&1) ||
	fail "the ledger does not verify on beta's file at the end: $out"

if ((${#problems[@]})); then
	for p in "${problems[@]}"; do
		log "PROBLEM: $p"
	done
	fail "${#problems[@]} checks failed"
fi
log "all checks passed"
