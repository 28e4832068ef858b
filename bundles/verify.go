package bundles

import (
	"archive/tar"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/keys"

	"avfs/wire"
)

// keyID names the one verification key in OPA's verification config.
const keyID = "avfs"

// signature is what peekSignature learns from a bundle's .signatures.json
// before OPA verifies it: the algorithm and scope the signer declared.
type signature struct {
	present bool
	alg     string
	scope   string
}

// readKey returns the verification key: the contents of the file k when it
// exists, else k itself (an HMAC secret), as `opa run --verification-key`.
func readKey(k string) ([]byte, error) {
	bs, err := os.ReadFile(k)
	switch {
	case err == nil:
		return bs, nil
	case errors.Is(err, os.ErrNotExist):
		return []byte(k), nil
	default:
		return nil, wire.Errorf(wire.CodeSignatureInvalid, "read verification key: %w", err)
	}
}

// verification builds OPA's verification config for one bundle. The
// algorithm follows the signer's JWT header only within the family of the
// key: an RSA key verifies RS*/PS*, an ECDSA key ES*, an Ed25519 key EdDSA,
// anything that is not a PEM public key is an HMAC secret (HS*). So a token
// cannot make avfs use a public key as an HMAC secret.
func verification(key []byte, sig signature) (*bundle.VerificationConfig, error) {
	alg, err := algorithm(key, sig.alg)
	if err != nil {
		return nil, err
	}
	kc := &keys.Config{Key: string(key), Algorithm: alg}
	return bundle.NewVerificationConfig(map[string]*bundle.KeyConfig{keyID: kc}, keyID, sig.scope, nil), nil
}

func algorithm(key []byte, declared string) (string, error) {
	pick := func(allowed []string, def string) string {
		if slices.Contains(allowed, declared) {
			return declared
		}
		return def
	}
	block, _ := pem.Decode(key)
	if block == nil {
		return pick([]string{"HS256", "HS384", "HS512"}, "HS256"), nil
	}
	var pub any
	var err error
	switch block.Type {
	case "PUBLIC KEY":
		pub, err = x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		pub, err = x509.ParsePKCS1PublicKey(block.Bytes)
	case "CERTIFICATE":
		var cert *x509.Certificate
		if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
			pub = cert.PublicKey
		}
	default:
		return "", fmt.Errorf("verification key is a PEM %q block; want a public key or a certificate", block.Type)
	}
	if err != nil {
		return "", fmt.Errorf("parse verification key: %w", err)
	}
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return pick([]string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}, "RS256"), nil
	case *ecdsa.PublicKey:
		def := map[int]string{256: "ES256", 384: "ES384", 521: "ES512"}[k.Curve.Params().BitSize]
		return pick([]string{def}, def), nil
	case ed25519.PublicKey:
		return "EdDSA", nil
	default:
		return "", fmt.Errorf("unsupported verification key type %T", pub)
	}
}

// peekSignature reads the JWT header and scope of the bundle's
// .signatures.json, if it has one. Nothing here is trusted: OPA verifies.
func peekSignature(path string) (signature, error) {
	raw, err := signaturesFile(path)
	if err != nil || raw == nil {
		return signature{}, err
	}
	sig := signature{present: true}
	var sc bundle.SignaturesConfig
	if err := json.Unmarshal(raw, &sc); err != nil || len(sc.Signatures) == 0 {
		return sig, nil // OPA reports it
	}
	parts := strings.Split(sc.Signatures[0], ".")
	if len(parts) != 3 {
		return sig, nil
	}
	var hdr struct {
		Alg string `json:"alg"`
	}
	if bs, err := base64.RawURLEncoding.DecodeString(parts[0]); err == nil {
		_ = json.Unmarshal(bs, &hdr)
	}
	var payload struct {
		Scope string `json:"scope"`
	}
	if bs, err := base64.RawURLEncoding.DecodeString(parts[1]); err == nil {
		_ = json.Unmarshal(bs, &payload)
	}
	sig.alg, sig.scope = hdr.Alg, payload.Scope
	return sig, nil
}

// signaturesFile returns the contents of .signatures.json at the root of
// the bundle directory or tarball at path, or nil when there is none.
func signaturesFile(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		bs, err := os.ReadFile(filepath.Join(path, ".signatures.json"))
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return bs, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("not a bundle directory nor a gzipped tarball: %w", err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read tarball: %w", err)
		}
		if bundle.IsSignaturesFile(h.Name) {
			return io.ReadAll(io.LimitReader(tr, 1<<20))
		}
	}
}
