#!/usr/bin/env bash
# timeout: 200
# Peer authentication on the replication port (transport/peerauth.h). With the real pair
# connected (alpha primary, some data written), tests/tools/hak-evilpeer connects to beta from
# alpha's namespace as:
#   1. an unauthenticated client that sends a perfect HELLO for alpha;
#   2. a client with another key;
#   3. a client replaying a recorded exchange (authenticated once, then the same answer to a new
#      challenge);
#   4. a client that connects and never speaks;
# then the key file is replaced: the connection stays, the next one uses the new key, and the old
# key is refused.
# each is refused with a log line naming the reason, while the pair stays Connected (no lost
# connection, no resync) and beta's data and generation IDs are unchanged.
#   5. a man-in-the-middle: alpha reaches beta through a proxy in beta's namespace that flips one
#      byte of the first connection's authentication exchange; beta refuses it, the next
#      connection (untouched) authenticates, and the pair resyncs to identical copies.
#   6. a node without a key (insecure-no-auth) cannot connect to a node with one, and says why.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/integration/pair.sh
. "$(dirname "$0")/pair.sh"
require_hakd
require_cmd sha256sum jq ss

EVILPEER=$TOOLS/hak-evilpeer
LEDGER=$TOOLS/hak-ledger
for t in "$EVILPEER" "$LEDGER"; do
	[[ -x $t ]] || fail "$t is not built (make BUILD=${HAK_BUILD#"$REPO"/} SAN=1 bins)"
done

PAIR_BLANK=1 pair_setup sync 64M
HAKD_LOGS[alpha]=$WORK/alpha.log
HAKD_LOGS[beta]=$WORK/beta.log
wait_synced 30
assert_eq "$(repl beta auth)/$(repl alpha auth)" "hmac-sha256/hmac-sha256" "auth in status"
hk alpha primary db >/dev/null || fail "promoting alpha failed"
"$LEDGER" write --uri "$(node_uri alpha)" --ledger "$WORK/l" --seconds 1 --blocks 4096 \
	>/dev/null || fail "the initial storm failed"
wait_synced 30

(umask 077 && head -c 32 /dev/urandom | base64 >"$WORK/other.key")
EVIL=(timeout 30 ip netns exec "$NS_alpha" "$EVILPEER" --connect 192.0.2.2:7789
	--bind 192.0.2.1 --node alpha --volume db --size 67108864 --uuid 00000000-0000-0000-0000-000000000000
	--gen 0000000000000000:0000000000000000:0000000000000000:0000000000000000 --timeout 5)

# gens NODE: the generation IDs in NODE's metadata.
gens() {
	"$HAKCTL" --config "$WORK/$1.conf" --node "$1" dump-md db | grep '^gen '
}
sha_b0=$(sha256sum <"$(backing beta)")
gen_b0=$(gens beta)
rs0=$(repl beta resyncs_completed)
refused0=$(repl beta auth_refused)

# attack NAME EXPECTED_RC WANT ARGS...: run hak-evilpeer, then check beta's log and the pair.
attack() {
	local name=$1 want_rc=$2 want=$3 rc=0 mark mark_a new
	shift 3
	mark=$(wc -l <"$WORK/beta.log")
	mark_a=$(wc -l <"$WORK/alpha.log")
	"${EVIL[@]}" "$@" >"$WORK/evil.out" 2>&1 || rc=$?
	sed 's/^/    /' "$WORK/evil.out"
	assert_eq "$rc" "$want_rc" "$name: hak-evilpeer exit status"
	wait_for "tail -n +$((mark + 1)) '$WORK/beta.log' | grep -qE \"$want\"" 8 ||
		fail "$name: beta's log has no line matching /$want/: $(tail -n +$((mark + 1)) "$WORK/beta.log")"
	new=$(tail -n +$((mark + 1)) "$WORK/beta.log")$(tail -n +$((mark_a + 1)) "$WORK/alpha.log")
	if grep -qE 'Lost the connection|Refusing the connection|peer reconnected' <<<"$new"; then
		fail "$name: the pair's link was disturbed: $(grep -hE 'Lost the connection|Refusing|reconnected' <<<"$new" | head -n 2)"
	fi
	assert_eq "$(repl alpha link)/$(repl beta link)" "Connected/Connected" "$name: the links"
	log "$name: refused; beta says: $(grep -E "$want" <<<"$new" | head -n 1 | cut -c1-260)"
}

# 1. No key: a HELLO as the first frame.
attack unauthenticated 1 \
	"from 192\.0\.2\.1:[0-9]+ failed to authenticate: it sent a frame of type HELLO where the authentication exchange expects its challenge" \
	--scenario handshake-only
assert_contains "$(cat "$WORK/evil.out")" "no HELLO back" "unauthenticated: hak-evilpeer's view"
# 2. Another key.
attack wrong-key 1 \
	"from 192\.0\.2\.1:[0-9]+ failed to authenticate: its answer does not prove it is node 'alpha' holding this volume's auth key" \
	--scenario handshake-only --key "$WORK/other.key"
# 3. A replayed exchange.
attack replay 0 \
	"from 192\.0\.2\.1:[0-9]+ failed to authenticate: its answer does not prove it is node 'alpha'" \
	--scenario replay --key "$WORK/repl.key"
assert_contains "$(cat "$WORK/evil.out")" "result: replay: the server dropped the connection" "replay"
# 4. Silence: closed after the handshake limit (2 s with connect-interval 200ms).
mark=$(wc -l <"$WORK/beta.log")
# shellcheck disable=SC2016 # expanded by the inner bash
out=$(ip netns exec "$NS_alpha" bash -c 'exec 3<>/dev/tcp/192.0.2.2/7789 || exit 3
	t0=$(date +%s%N); rc=0; timeout 15 cat <&3 >/dev/null || rc=$?
	echo "rc=$rc after $((($(date +%s%N) - t0) / 1000000)) ms"')
log "silent: $out"
[[ $out =~ ^rc=0\ after\ (1[5-9][0-9][0-9]|2[0-9][0-9][0-9])\ ms$ ]] ||
	fail "silent: the connection was not closed after about 2 s: $out"
wait_for "tail -n +$((mark + 1)) '$WORK/beta.log' | grep -q 'did not complete the exchange within 2.0 s'" 3 ||
	fail "silent: no log line"
assert_eq "$(repl alpha link)/$(repl beta link)" "Connected/Connected" "silent: the links"

refused=$(repl beta auth_refused)
((refused - refused0 >= 4)) || fail "beta's auth_refused went from $refused0 to $refused, want +4 or more"
assert_eq "$(repl beta resyncs_completed)" "$rs0" "resyncs during the attacks"
assert_eq "$(sha256sum <"$(backing beta)")" "$sha_b0" "beta's data after the attacks"
assert_eq "$(gens beta)" "$gen_b0" "beta's generation IDs after the attacks"
log "1-4: every stranger refused ($((refused - refused0)) refusals), the pair stayed Connected, beta unchanged"

# Rotation: a new key file (both nodes read the same path here) leaves the connection alone; the
# next connection authenticates with the new key, and the old key no longer opens one.
cp "$WORK/repl.key" "$WORK/old.key"
(umask 077 && head -c 32 /dev/urandom | base64 >"$WORK/repl.key.new")
mv "$WORK/repl.key.new" "$WORK/repl.key"
sleep 0.5
assert_eq "$(repl alpha link)/$(repl beta link)" "Connected/Connected" "rotation: the links after the new key"
mark=$(wc -l <"$WORK/beta.log")
hk alpha disconnect db >/dev/null || fail "disconnect on alpha failed"
hk alpha connect db >/dev/null || fail "connect on alpha failed"
wait_synced 30
tail -n +$((mark + 1)) "$WORK/beta.log" | grep -q 'the replication key file .* changed; new connections authenticate with the new key' ||
	fail "rotation: beta did not log the new key"
attack old-key 1 "failed to authenticate: its answer does not prove it is node 'alpha'" \
	--scenario handshake-only --key "$WORK/old.key"
log "rotation: the pair reconnected with the new key; the old one is refused"

# 5. A man in the middle that flips one byte of the first connection's exchange: alpha (the
# connector) reaches beta at 192.0.2.3, where a proxy forwards to 192.0.2.2.
hk alpha secondary db >/dev/null || fail "demoting alpha failed"
node_stop alpha
ip -n "$NS_beta" addr add 192.0.2.3/25 dev "hb1-$PAIR_SID"
sed -i 's/address 192\.0\.2\.2:7789/address 192.0.2.3:7789/' "$WORK/alpha.conf"
cat >"$WORK/flip.py" <<'EOF'
import socket, sys, threading, time
# Forward 192.0.2.3:7789 to 192.0.2.2:7789; in the first connection's client-to-server bytes,
# flip byte FLIP (inside the challenge's nonce). Exits after 120 s.
FLIP = int(sys.argv[1])
ls = socket.socket(); ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.bind(("192.0.2.3", 7789)); ls.listen(16)
print("listening", flush=True)
first = [True]
def pipe(a, b, flip):
    n = 0
    try:
        while True:
            d = a.recv(65536)
            if not d: break
            if flip is not None and n <= flip < n + len(d):
                d = bytearray(d); d[flip - n] ^= 0x40; d = bytes(d)
                print("flipped byte", flip, flush=True)
            n += len(d); b.sendall(d)
    except OSError: pass
    for s in (a, b):
        try: s.shutdown(socket.SHUT_RDWR)
        except OSError: pass
def serve():
    while True:
        c, _ = ls.accept()
        u = socket.create_connection(("192.0.2.2", 7789))
        flip = FLIP if first[0] else None
        first[0] = False
        threading.Thread(target=pipe, args=(c, u, flip), daemon=True).start()
        threading.Thread(target=pipe, args=(u, c, None), daemon=True).start()
threading.Thread(target=serve, daemon=True).start()
time.sleep(120)
EOF
ip netns exec "$NS_beta" /usr/bin/python3 "$WORK/flip.py" 20 >"$WORK/flip.out" 2>&1 &
track_pid $!
wait_for "grep -q listening '$WORK/flip.out'" 5 || fail "the proxy did not start: $(cat "$WORK/flip.out")"
mark=$(wc -l <"$WORK/beta.log")
node_start alpha
wait_synced 30
grep -q 'flipped byte 20' "$WORK/flip.out" || fail "the proxy flipped nothing: $(cat "$WORK/flip.out")"
tail -n +$((mark + 1)) "$WORK/beta.log" | grep -q "failed to authenticate: its answer does not prove" ||
	fail "mitm: beta did not refuse the tampered exchange: $(tail -n +$((mark + 1)) "$WORK/beta.log")"
log "mitm: the tampered connection was refused, the next one authenticated; pair in sync"

# 6. A node configured without a key cannot join one with a key.
node_stop alpha
sed -i -e "s|auth-key-file $WORK/repl.key|insecure-no-auth yes|" \
	-e 's/address 192\.0\.2\.3:7789/address 192.0.2.2:7789/' "$WORK/alpha.conf"
mark=$(wc -l <"$WORK/beta.log")
node_start alpha
grep -q 'is not authenticated (insecure-no-auth)' "$WORK/alpha.log" ||
	fail "alpha did not warn that its replication is unauthenticated"
wait_for "tail -n +$((mark + 1)) '$WORK/beta.log' | grep -q 'it sent a frame of type HELLO where the authentication exchange expects its challenge (is it set to insecure-no-auth?)'" 8 ||
	fail "no-key: beta did not say why: $(tail -n +$((mark + 1)) "$WORK/beta.log")"
assert_eq "$(repl alpha auth)" none "alpha's auth in status"
assert_contains "$(hk alpha status)" "NOT AUTHENTICATED (insecure-no-auth)" "alpha's hakctl status"
assert_contains "$(hk beta status)" "peer authentication: " "beta's hakctl status"
[[ $(repl beta link) != Connected ]] || fail "no-key: beta connected to an unauthenticated alpha"
node_stop alpha
node_stop beta
assert_eq "$(sha256sum <"$(backing alpha)")" "$(sha256sum <"$(backing beta)")" "the two copies"
log "PASS: strangers, a wrong key, a replay, silence and a tampered exchange were refused; no-key alpha told why"
