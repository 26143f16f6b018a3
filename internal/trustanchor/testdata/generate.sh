#!/bin/sh
# Regenerates the PKCS#12 fixtures: one self-signed CA certificate (ca.pem)
# packed by OpenSSL 3 and Java keytool the ways operators' tooling packs it.
# The certificate-only bundles are what go-pkcs12's DecodeTrustStore and
# DecodeChain cannot open. Every protected bundle uses the password in
# password.txt. The key is a throwaway generated here; it is written only
# into withkey.p12 and deleted.
set -eu
cd "$(dirname "$0")"
pw=$(cat password.txt)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
	-keyout "$tmp/ca.key" -out ca.pem -subj "/O=MailFathom fixtures/CN=MailFathom fixture CA" -days 36500 2>/dev/null
x() { openssl pkcs12 -export -nokeys -in ca.pem "$@"; }
x -out openssl-aes256.p12 -passout "pass:$pw"
x -out openssl-empty-password.p12 -passout pass:
x -out openssl-nomac-unencrypted.p12 -passout pass: -nomac -certpbe NONE
x -out openssl-legacy-rc2-40.p12 -passout "pass:$pw" -legacy
x -out openssl-rc2-128.p12 -passout "pass:$pw" -legacy -certpbe PBE-SHA1-RC2-128
x -out openssl-3des-sha1mac.p12 -passout "pass:$pw" -certpbe PBE-SHA1-3DES -macalg sha1
x -out openssl-2des.p12 -passout "pass:$pw" -legacy -certpbe PBE-SHA1-2DES
x -out openssl-pbes2-des3-sha512mac.p12 -passout "pass:$pw" -certpbe DES-EDE3-CBC -macalg sha512
x -out openssl-aes128-sha384mac.p12 -passout "pass:$pw" -certpbe AES-128-CBC -macalg sha384
openssl pkcs12 -export -in ca.pem -inkey "$tmp/ca.key" -out openssl-withkey.p12 -passout "pass:$pw"
rm -f keytool.p12
keytool -importcert -noprompt -alias ca -file ca.pem -keystore keytool.p12 \
	-storetype PKCS12 -storepass "$pw" >/dev/null 2>&1
