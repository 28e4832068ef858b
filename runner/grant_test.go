package runner

import (
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"

	"avfs/vault"
	"avfs/wire"
)

func TestGrantProofs(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	otherPub, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	sig := GrantSignature(priv, "ap-1", "d1")
	secret := []byte("s3cret")
	mac := GrantMAC(secret, "ap-1", "d1")
	for _, tc := range []struct {
		name  string
		r     Runner
		proof string
		ok    bool
	}{
		{"no approvers", Runner{}, "", true},
		{"signature", Runner{ApproverPublicKey: pub}, sig, true},
		{"signature by another key", Runner{ApproverPublicKey: pub}, GrantSignature(otherPriv, "ap-1", "d1"), false},
		{"signature of another digest", Runner{ApproverPublicKey: pub}, GrantSignature(priv, "ap-1", "d2"), false},
		{"signature of another approval", Runner{ApproverPublicKey: pub}, GrantSignature(priv, "ap-2", "d1"), false},
		{"signature, other public key", Runner{ApproverPublicKey: otherPub}, sig, false},
		{"no proof", Runner{ApproverPublicKey: pub}, "", false},
		{"MAC where a signature is needed", Runner{ApproverPublicKey: pub, ApproverKey: secret}, mac, false},
		{"bad base64", Runner{ApproverPublicKey: pub}, "ed25519:!!", false},
		{"truncated signature", Runner{ApproverPublicKey: pub}, sig[:len(sig)-8], false},
		{"MAC", Runner{ApproverKey: secret}, mac, true},
		{"MAC with another secret", Runner{ApproverKey: []byte("other")}, mac, false},
		{"signature where a MAC is needed", Runner{ApproverKey: secret}, sig, false},
	} {
		err := tc.r.checkGrant(vault.Approval{ID: "ap-1", Digest: "d1", GrantMAC: tc.proof})
		if (err == nil) != tc.ok || (err != nil && !wire.HasCode(err, wire.CodeApprovalRejected)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if !strings.HasPrefix(sig, "ed25519:") {
		t.Errorf("signature %q", sig)
	}
}
