package bundles

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"testing"
)

func pemPublic(t *testing.T, pub any) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// TestAlgorithm: the signer's declared algorithm is only followed within the
// family of the key, so a token cannot turn a public key into an HMAC secret.
func TestAlgorithm(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	rs, _ := rsa.GenerateKey(rand.Reader, 1024) //nolint:gosec // test key
	ed, _, _ := ed25519.GenerateKey(rand.Reader)
	ecPEM, rsaPEM, edPEM := pemPublic(t, &ec.PublicKey), pemPublic(t, &rs.PublicKey), pemPublic(t, ed)
	tests := []struct {
		key      []byte
		declared string
		want     string
	}{
		{[]byte("secret"), "HS512", "HS512"},
		{[]byte("secret"), "RS256", "HS256"},
		{[]byte("secret"), "", "HS256"},
		{rsaPEM, "PS384", "PS384"},
		{rsaPEM, "HS256", "RS256"},
		{ecPEM, "ES384", "ES384"},
		{ecPEM, "ES256", "ES384"},
		{ecPEM, "HS256", "ES384"},
		{edPEM, "HS256", "EdDSA"},
	}
	for _, tt := range tests {
		got, err := algorithm(tt.key, tt.declared)
		if err != nil || got != tt.want {
			t.Errorf("algorithm(%.20q, %q) = %q, %v; want %q", tt.key, tt.declared, got, err, tt.want)
		}
	}
	priv := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte{1}})
	if _, err := algorithm(priv, "ES256"); err == nil {
		t.Error("a private key was accepted as verification key")
	}
}
