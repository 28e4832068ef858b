#!/bin/sh
# Rebuilds the bundle tarballs of this directory with the OPA CLI pinned in
# go.mod, exactly as a user would (run from anywhere; needs the module).
# keys/es256.pem is a throwaway key for these tests only.
set -e
cd "$(dirname "$0")/ext"
go tool opa build -b . -o ../ext.tar.gz
go tool opa build -b . --signing-key ../keys/es256.pem --signing-alg ES256 -o ../ext-signed.tar.gz
# A directory signed in place, as docs/policy.md shows (opa sign writes
# .signatures.json into the current directory).
cd ../ext-signed-dir
cp ../ext/.manifest ../ext/acme.rego .
go tool opa sign --signing-key ../keys/es256.pem --signing-alg ES256 --bundle .
