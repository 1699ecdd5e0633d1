#!/bin/bash
# Test certificates and keys for the TLS transport, made fresh into DIR (which must exist):
#   ca.crt                 the pair's CA (its key ca.key)
#   NAME.crt, NAME.key     for each NAME given (default: alpha beta), signed by ca, with
#                          subjectAltName DNS:NAME
#   other-ca.crt           another CA, and impostor-NAME.crt/.key: a certificate for the first
#                          NAME signed by it
#   psk, psk-wrong         two pre-shared key files (mode 0600)
# Usage: tests/tls-certs.sh DIR [NAME...]
set -euo pipefail
dir=$1
shift
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(alpha beta)
cd "$dir"
umask 077
ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)

ca() { # NAME
	openssl req -x509 "${ec[@]}" -keyout "$1.key" -out "$1.crt" -subj "/CN=hak test $1" \
		-days 2 -addext basicConstraints=critical,CA:TRUE \
		-addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
}

leaf() { # CA FILE NAME
	openssl req "${ec[@]}" -keyout "$2.key" -out "$2.csr" -subj "/CN=$3" 2>/dev/null
	printf 'basicConstraints=CA:FALSE\nsubjectAltName=DNS:%s\nextendedKeyUsage=serverAuth,clientAuth\n' \
		"$3" >"$2.ext"
	openssl x509 -req -in "$2.csr" -CA "$1.crt" -CAkey "$1.key" -CAcreateserial -days 2 \
		-extfile "$2.ext" -out "$2.crt" 2>/dev/null
	rm -f "$2.csr" "$2.ext"
}

ca ca
ca other-ca
for n in "${names[@]}"; do
	leaf ca "$n" "$n"
done
leaf other-ca "impostor-${names[0]}" "${names[0]}"
head -c 32 /dev/urandom | base64 >psk
head -c 32 /dev/urandom | base64 >psk-wrong
chmod 600 ./*.key psk psk-wrong
chmod 644 ./*.crt
