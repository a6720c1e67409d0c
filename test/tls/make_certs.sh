#!/bin/bash
# test/tls/make_certs.sh DIR: a throwaway PKI for the TLS tests and benches.
#
# Writes into DIR (created if missing), all PEM, keys unencrypted PKCS#8,
# EC P-256:
#   ca.pem, ca.key             the test CA (trust it with tls_ca / curl --cacert)
#   other_ca.pem, other_ca.key an unrelated CA (a wrong tls_ca)
#   server.pem, server.key     signed by ca; SAN DNS:localhost, IP:127.0.0.1, IP:::1
#   expired.pem, expired.key   signed by ca, same SANs, valid 2020-01-01..2020-12-31
#   wrong_host.pem, .key       signed by ca; SAN DNS:elsewhere.invalid, IP:127.0.0.9 only
#   client_ca.pem, .key        the CA the mTLS listener trusts for client certificates
#   client.pem, client.key     client cert (extendedKeyUsage clientAuth) signed by client_ca
#   stranger.pem, .key         client cert (clientAuth) signed by other_ca (refused by mTLS)
# Idempotent: when DIR/.complete exists (written last) it does nothing; else
# it (re)generates everything.  No prompts; needs only openssl (3.0).
# Files are mode 644 (keys too: throwaway test keys, read by whichever user
# runs nginx / the tests).  Exit status 0 on success.
set -eu
dir=${1:?usage: make_certs.sh DIR}
mkdir -p "$dir"
[ -f "$dir/.complete" ] && exit 0
cd "$dir"
work=$(mktemp -d "$PWD/.work.XXXXXX")
trap 'rm -rf "$work"' EXIT

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# ca NAME SUBJECT-CN
ca() {
	key "$1.key"
	openssl req -x509 -new -key "$1.key" -subj "/CN=$2" -days 3650 -sha256 \
		-addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign" \
		-addext "subjectKeyIdentifier=hash" -out "$1.pem"
}

# leaf NAME CA CN EXTENSIONS
leaf() {
	key "$1.key"
	openssl req -new -key "$1.key" -subj "/CN=$3" -out "$work/$1.csr"
	printf '%s\n' "$4" >"$work/$1.ext"
	openssl x509 -req -in "$work/$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial \
		-CAserial "$work/$2.srl" -days 3650 -sha256 -extfile "$work/$1.ext" -out "$1.pem" 2>/dev/null
}

server_ext='basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1'
client_ext='basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth'

ca ca "webhook_ingest test CA"
ca other_ca "unrelated test CA"
ca client_ca "webhook_ingest test client CA"
leaf server ca localhost "$server_ext"
leaf wrong_host ca elsewhere.invalid 'basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=DNS:elsewhere.invalid,IP:127.0.0.9'
leaf client client_ca webhook-client "$client_ext"
leaf stranger other_ca stranger-client "$client_ext"

# expired: `openssl ca` is the one that takes an explicit start and end date.
mkdir -p "$work/ca"
: >"$work/ca/index.txt"
echo 1000 >"$work/ca/serial"
cat >"$work/ca.cnf" <<CNF
[ca]
default_ca = test
[test]
dir = $work/ca
database = \$dir/index.txt
serial = \$dir/serial
new_certs_dir = \$dir
default_md = sha256
policy = anything
unique_subject = no
copy_extensions = none
x509_extensions = ext
[anything]
commonName = supplied
[ext]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost,IP:127.0.0.1,IP:::1
CNF
key expired.key
openssl req -new -key expired.key -subj "/CN=localhost" -out "$work/expired.csr"
openssl ca -batch -notext -config "$work/ca.cnf" -cert ca.pem -keyfile ca.key \
	-startdate 20200101000000Z -enddate 20201231235959Z \
	-in "$work/expired.csr" -out expired.pem 2>/dev/null

chmod 644 ./*.pem ./*.key
touch .complete
