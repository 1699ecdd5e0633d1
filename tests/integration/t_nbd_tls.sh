#!/usr/bin/env bash
# timeout: 300
# NBD over TLS (NBD_OPT_STARTTLS) with real clients. A standalone hakd exports a volume on
# 127.0.0.1 (a port picked per run) with 'nbd-tls require', certificates made here with openssl:
#   1. certificates: nbdinfo (libnbd, GnuTLS) over nbds:// reports TLS; data written with nbdcopy
#      reads back through another connection and lies in the backing file (checksums); qemu-img
#      and qemu-io (tls-creds-x509) read and write; the UNIX socket still serves in the clear;
#   2. refusals: a client without TLS gets NBD_REP_ERR_TLS_REQD for every option (nbdinfo and
#      nbd-badclient) and nothing about the export; a client certificate from another CA, and no
#      client certificate, fail the handshake; garbage after STARTTLS and an option pipelined
#      behind it close the connection; a client that never speaks after STARTTLS is dropped at
#      nbd-handshake-timeout while another client is served meanwhile;
#   3. pre-shared keys: the same data reads back with nbdinfo/nbdcopy (tls-psk-file) and qemu
#      (tls-creds-psk); a wrong key and an unknown user are refused;
#   4. configuration mistakes stop hakd with a sentence that names them.
# shellcheck source=tests/integration/lib.sh
. "$(dirname "$0")/lib.sh"
require_hakd
require_cmd openssl nbdinfo nbdcopy qemu-img qemu-io sha256sum jq ss
BADCLIENT=$TOOLS/nbd-badclient
[[ -x $BADCLIENT ]] || fail "$BADCLIENT is not built (make BUILD=${HAK_BUILD#"$REPO"/} SAN=1 bins)"

MiB=$((1024 * 1024))
IMG=$WORK/vol.img
sparse_file "$IMG" $((64 * MiB))
HS_TIMEOUT=3

# free_port: a TCP port nothing listens on now, from a per-run random start (bounded tries).
free_port() {
	local p i
	for ((i = 0; i < 50; i++)); do
		p=$((20000 + (RANDOM + i) % 30000))
		if ! ss -Hltn "sport = :$p" | grep -q .; then
			echo "$p"
			return 0
		fi
	done
	fail "no free TCP port found in 50 tries"
}

# --- credentials --------------------------------------------------------------------------------
# make_ca DIR NAME: a CA key and self-signed certificate in DIR.
make_ca() {
	mkdir -p "$1"
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=$2" \
		-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=keyCertSign,cRLSign" \
		-keyout "$1/ca-key.pem" -out "$1/ca-cert.pem" 2>"$WORK/openssl.err" ||
		fail "openssl could not make CA $2: $(cat "$WORK/openssl.err")"
}

# make_cert CA_DIR OUT_PREFIX CN EXT: a key and a certificate signed by the CA in CA_DIR.
make_cert() {
	local ca=$1 out=$2
	printf '[srv]\nsubjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n[cli]\nextendedKeyUsage=clientAuth\n' >"$WORK/ext.cnf"
	openssl req -newkey rsa:2048 -nodes -subj "/CN=$3" -keyout "$out-key.pem" -out "$out.csr" \
		2>"$WORK/openssl.err" || fail "openssl could not make a key for $3: $(cat "$WORK/openssl.err")"
	openssl x509 -req -in "$out.csr" -CA "$ca/ca-cert.pem" -CAkey "$ca/ca-key.pem" \
		-CAcreateserial -days 2 -extfile "$WORK/ext.cnf" -extensions "$4" -out "$out-cert.pem" \
		2>"$WORK/openssl.err" || fail "openssl could not sign $3: $(cat "$WORK/openssl.err")"
}

# client_dir DIR CA_DIR [CERT_PREFIX]: a GnuTLS/qemu credentials directory.
client_dir() {
	mkdir -p "$1"
	cp "$2/ca-cert.pem" "$1/ca-cert.pem"
	if [[ -n ${3:-} ]]; then
		cp "$3-cert.pem" "$1/client-cert.pem"
		cp "$3-key.pem" "$1/client-key.pem"
	fi
}

make_ca "$WORK/ca" "hak test CA $RUN_ID"
make_ca "$WORK/evil" "another CA $RUN_ID"
make_cert "$WORK/ca" "$WORK/server" localhost srv
make_cert "$WORK/ca" "$WORK/client" "client $RUN_ID" cli
make_cert "$WORK/evil" "$WORK/stranger" "stranger $RUN_ID" cli
client_dir "$WORK/cli-good" "$WORK/ca" "$WORK/client"
client_dir "$WORK/cli-evil" "$WORK/ca" "$WORK/stranger"
client_dir "$WORK/cli-nocert" "$WORK/ca"
(
	umask 077
	echo "alice:$(openssl rand -hex 32)" >"$WORK/keys.psk"
	echo "alice:$(openssl rand -hex 32)" >"$WORK/wrong.psk"
	echo "bob:$(openssl rand -hex 32)" >"$WORK/bob.psk"
	mkdir -p "$WORK/qpsk" && cp "$WORK/keys.psk" "$WORK/qpsk/keys.psk"
)

# write_conf FILE PORT TLS_LINES...: a standalone volume "vol" on the UNIX socket and TCP PORT.
write_conf() {
	local f=$1 port=$2 line
	shift 2
	{
		printf 'global {\n\tcontrol-socket %s\n\tstate-dir %s\n}\n' "$WORK/ctl" "$WORK"
		printf 'volume vol {\n\tbacking %s\n\tnbd-socket %s\n\tnbd-listen 127.0.0.1:%s\n' \
			"$IMG" "$WORK/vol.sock" "$port"
		printf '\tnbd-handshake-timeout %ss\n' "$HS_TIMEOUT"
		for line in "$@"; do
			printf '\t%s\n' "$line"
		done
		printf '}\n'
	} >"$f"
}

# start_conf NAME CONF: hakd --config CONF, registered like hakd_start's (hakd_stop works).
start_conf() {
	local name=$1 logf=$WORK/$1.log pid
	rm -f "$WORK/ctl"
	"$HAKD" --config "$2" --foreground --log-level debug --io-engine "$HAK_IO_ENGINE" \
		</dev/null >"$logf" 2>&1 &
	pid=$!
	track_pid "$pid"
	HAKD_PIDS[$name]=$pid
	HAKD_LOGS[$name]=$logf
	HAKD_LAST=$name
	wait_for "[[ -S $WORK/ctl ]]" 10 || fail "hakd $name did not start: $(tail -n 5 "$logf")"
	log "started hakd $name (pid $pid): $(grep -o 'over NBD on .*' "$logf")"
}

# must_fail WHAT CMD...: CMD fails (its output is kept in $WORK/out).
must_fail() {
	local what=$1
	shift
	if "$@" >"$WORK/out" 2>&1; then
		cat "$WORK/out"
		fail "$what succeeded"
	fi
	log "refused as expected: $what: $(tail -n 1 "$WORK/out")"
}

# log_has NAME TEXT: hakd NAME's log gets a line containing TEXT within 5 s.
log_has() {
	wait_for "grep -qF -- '$2' '${HAKD_LOGS[$1]}'" 5 || fail "the log of $1 has no '$2'"
}

# === 1. certificates ============================================================================
PORT=$(free_port)
write_conf "$WORK/cert.conf" "$PORT" "nbd-tls require" \
	"nbd-tls-cert-file $WORK/server-cert.pem" "nbd-tls-key-file $WORK/server-key.pem" \
	"nbd-tls-ca-file $WORK/ca/ca-cert.pem"
start_conf cert "$WORK/cert.conf"
log_has cert "TLS on the UNIX socket: on; on TCP: require"
U="nbds://127.0.0.1:$PORT/vol?tls-certificates=$WORK/cli-good"

J=$(nbdinfo --json "$U") || fail "nbdinfo over TLS with a good client certificate failed"
assert_eq "$(jq -r '.TLS' <<<"$J")" true "nbdinfo's TLS"
assert_eq "$(jq -r '.exports[0]."export-size"' <<<"$J")" $((64 * MiB)) "export size over TLS"
log_has cert "switched to TLS: TLSv1.3"
log_has cert "client certificate /CN=client $RUN_ID"

# Data: 24 MiB at offset 8 MiB through one connection, read back through another.
head -c $((24 * MiB)) /dev/urandom >"$WORK/data.bin"
want=$(sha256sum <"$WORK/data.bin")
qemu-img create -q -f raw "$WORK/staging.img" $((64 * MiB))
dd if="$WORK/data.bin" of="$WORK/staging.img" bs=1M seek=8 conv=notrunc status=none
nbdcopy "$WORK/staging.img" "$U" || fail "nbdcopy into the TLS export failed"
nbdcopy "$U" "$WORK/back.img" || fail "nbdcopy out of the TLS export failed"
assert_eq "$(dd if="$WORK/back.img" bs=1M skip=8 count=24 status=none | sha256sum)" "$want" \
	"checksum of the data read back over TLS"
assert_eq "$(dd if="$IMG" bs=1M skip=8 count=24 status=none | sha256sum)" "$want" \
	"checksum of the data in the backing file"
log "24 MiB written and read back over TLS, checksums match"

# qemu: tls-creds-x509 (qemu checks the server certificate against 127.0.0.1 too).
QX=(--object "tls-creds-x509,id=tls0,dir=$WORK/cli-good,endpoint=client")
QOPTS="driver=nbd,host=127.0.0.1,port=$PORT,export=vol,tls-creds=tls0"
qemu-img info "${QX[@]}" --image-opts "$QOPTS" >"$WORK/qinfo" 2>&1 ||
	{ cat "$WORK/qinfo"; fail "qemu-img info over TLS failed"; }
assert_contains "$(cat "$WORK/qinfo")" "virtual size: 64 MiB" "qemu-img info over TLS"
qemu-io "${QX[@]}" --image-opts "driver=raw,file.${QOPTS//,/,file.}" \
	-c 'write -P 0x5a 40M 1M' -c 'read -P 0x5a 40M 1M' -c 'read -P 0 48M 1M' >"$WORK/qio" 2>&1 ||
	{ cat "$WORK/qio"; fail "qemu-io over TLS failed"; }
assert_not_contains "$(cat "$WORK/qio")" "Pattern verification failed" "qemu-io over TLS"
assert_eq "$(dd if="$IMG" bs=1M skip=40 count=1 status=none | sha256sum)" \
	"$(head -c $MiB /dev/zero | tr '\0' '\132' | sha256sum)" "qemu-io's write in the backing file"
# TLS 1.2 is accepted, older versions are not (GnuTLS priority strings through qemu).
qemu-img info --object "tls-creds-x509,id=tls0,dir=$WORK/cli-good,endpoint=client,priority=NORMAL:-VERS-TLS1.3" \
	--image-opts "$QOPTS" >"$WORK/q12" 2>&1 || { cat "$WORK/q12"; fail "qemu-img info over TLS 1.2 failed"; }
log_has cert "switched to TLS: TLSv1.2"
must_fail "a TLS 1.1 client" qemu-img info --object \
	"tls-creds-x509,id=tls0,dir=$WORK/cli-good,endpoint=client,priority=NORMAL:-VERS-TLS-ALL:+VERS-TLS1.1:+VERS-TLS1.0" \
	--image-opts "$QOPTS"
log_has cert "unsupported protocol"

# The UNIX socket offers TLS but does not require it.
nbdinfo --size "$(nbd_uri "$WORK/vol.sock" vol)" >/dev/null ||
	fail "the UNIX socket refused a client in the clear"
nbdinfo --size "nbds+unix:///vol?socket=$WORK/vol.sock&tls-certificates=$WORK/cli-good" \
	>/dev/null || fail "TLS over the UNIX socket failed"

# === 2. refusals ================================================================================
LIBNBD_DEBUG=1 nbdinfo "nbd://127.0.0.1:$PORT/vol" >"$WORK/plain.out" 2>&1 &&
	fail "a client without TLS was served"
assert_contains "$(cat "$WORK/plain.out")" "This server requires TLS" "libnbd's debug output"
assert_not_contains "$(cat "$WORK/plain.out")" "export-size" "the clear-text client's output"
"$BADCLIENT" tls-required "127.0.0.1:$PORT" --pid "${HAKD_PIDS[cert]}" ||
	fail "nbd-badclient tls-required failed"
must_fail "a client certificate from another CA" nbdinfo --size \
	"nbds://127.0.0.1:$PORT/vol?tls-certificates=$WORK/cli-evil"
log_has cert "TLS handshake with client 127.0.0.1"
must_fail "a client without a certificate" nbdinfo --size \
	"nbds://127.0.0.1:$PORT/vol?tls-certificates=$WORK/cli-nocert"
assert_contains "$(grep 'TLS handshake with client' "${HAKD_LOGS[cert]}")" "certificate" \
	"the reason in hakd's log"
for c in starttls-garbage starttls-inject; do
	"$BADCLIENT" "$c" "127.0.0.1:$PORT" --pid "${HAKD_PIDS[cert]}" || fail "nbd-badclient $c failed"
done
# A silent client after STARTTLS: dropped at the timeout; others are served meanwhile.
"$BADCLIENT" starttls-stall "127.0.0.1:$PORT" --close-within-s $((HS_TIMEOUT + 5)) \
	>"$WORK/stall.out" 2>&1 &
STALL=$!
track_pid "$STALL"
sleep 1
nbdinfo --size "$U" >/dev/null || fail "hakd did not serve a TLS client while another stalled"
wait "$STALL" || fail "nbd-badclient starttls-stall failed: $(cat "$WORK/stall.out")"
cat "$WORK/stall.out"
log_has cert "did not finish within $HS_TIMEOUT.0 s"
hakd_alive cert
nbdinfo --size "$U" >/dev/null || fail "hakd stopped serving after the misbehaving clients"
S=$(timeout 10 "$HAKCTL" --control "$WORK/ctl" status --json) || fail "hakctl status failed"
assert_eq "$(jq -r '.volumes[0].tcp_tls' <<<"$S")" require "tcp_tls in hakctl status"
(($(jq '.volumes[0].tls_sessions' <<<"$S") >= 5)) || fail "tls_sessions in hakctl status: $S"
(($(jq '.volumes[0].tls_failures' <<<"$S") >= 3)) || fail "tls_failures in hakctl status: $S"
assert_contains "$(timeout 10 "$HAKCTL" --control "$WORK/ctl" status)" "(TLS require)" \
	"hakctl status"
hakd_stop cert

# === 3. pre-shared keys =========================================================================
PORT=$(free_port)
write_conf "$WORK/psk.conf" "$PORT" "nbd-tls require" "nbd-tls-psk-file $WORK/keys.psk"
start_conf psk "$WORK/psk.conf"
P="nbds://alice@127.0.0.1:$PORT/vol"
J=$(nbdinfo --json "$P?tls-psk-file=$WORK/keys.psk") || fail "nbdinfo with the PSK failed"
assert_eq "$(jq -r '.TLS' <<<"$J")" true "nbdinfo's TLS with a PSK"
log_has psk "PSK user alice"
nbdcopy "$P?tls-psk-file=$WORK/keys.psk" "$WORK/back2.img" || fail "nbdcopy with the PSK failed"
assert_eq "$(dd if="$WORK/back2.img" bs=1M skip=8 count=24 status=none | sha256sum)" "$want" \
	"checksum of the data read back with the PSK"
qemu-img info --object "tls-creds-psk,id=tls0,dir=$WORK/qpsk,endpoint=client,username=alice" \
	--image-opts "driver=nbd,host=127.0.0.1,port=$PORT,export=vol,tls-creds=tls0" \
	>"$WORK/qinfo2" 2>&1 || { cat "$WORK/qinfo2"; fail "qemu-img info with tls-creds-psk failed"; }
qemu-img info --object "tls-creds-psk,id=tls0,dir=$WORK/qpsk,endpoint=client,username=alice,priority=NORMAL:-VERS-TLS1.3:+ECDHE-PSK:+PSK" \
	--image-opts "driver=nbd,host=127.0.0.1,port=$PORT,export=vol,tls-creds=tls0" \
	>"$WORK/qinfo3" 2>&1 || { cat "$WORK/qinfo3"; fail "qemu-img info with a PSK over TLS 1.2 failed"; }
log_has psk "switched to TLS: TLSv1.2"
must_fail "a wrong PSK" nbdinfo --size "$P?tls-psk-file=$WORK/wrong.psk"
must_fail "an unknown PSK user" nbdinfo --size "nbds://bob@127.0.0.1:$PORT/vol?tls-psk-file=$WORK/bob.psk"
must_fail "a client without TLS" nbdinfo --size "nbd://127.0.0.1:$PORT/vol"
nbdinfo --size "$P?tls-psk-file=$WORK/keys.psk" >/dev/null || fail "the PSK stopped working"
hakd_stop psk

# === 4. configuration mistakes ==================================================================
# bad_conf WHAT WANT TLS_LINES...: hakd refuses to start and says WANT.
bad_conf() {
	local what=$1 want=$2
	shift 2
	write_conf "$WORK/bad.conf" "$(free_port)" "$@"
	if timeout 20 "$HAKD" --config "$WORK/bad.conf" --foreground >"$WORK/bad.out" 2>&1; then
		fail "hakd started with $what"
	fi
	sanitizer_check "$WORK/bad.out" || fail "sanitizer report with $what"
	assert_contains "$(cat "$WORK/bad.out")" "$want" "hakd's output with $what"
	log "hakd refused $what: $(grep -F -- "$want" "$WORK/bad.out" | head -n 1)"
}
bad_conf "nbd-listen without nbd-tls" "without saying whether NBD clients use TLS"
bad_conf "a missing certificate" "Cannot read the NBD TLS file $WORK/nope.pem" "nbd-tls require" \
	"nbd-tls-cert-file $WORK/nope.pem" "nbd-tls-key-file $WORK/server-key.pem"
bad_conf "a key of another certificate" "is not a PEM private key of the certificate" \
	"nbd-tls require" "nbd-tls-cert-file $WORK/server-cert.pem" "nbd-tls-key-file $WORK/client-key.pem"
cp "$WORK/server-key.pem" "$WORK/open-key.pem"
chmod 644 "$WORK/open-key.pem"
bad_conf "a private key others may read" "must not be accessible to others" "nbd-tls require" \
	"nbd-tls-cert-file $WORK/server-cert.pem" "nbd-tls-key-file $WORK/open-key.pem"
chmod 644 "$WORK/wrong.psk"
bad_conf "a PSK file others may read" "readable by its owner only" "nbd-tls on" \
	"nbd-tls-psk-file $WORK/wrong.psk"
bad_conf "TLS without credentials" "has nbd-tls on but no credentials" "nbd-tls on"
log "all checks passed"
