package runner

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"

	"avfs/vault"
	"avfs/wire"
)

// signaturePrefix marks a grant proof that is an Ed25519 signature; an
// approver-secret MAC is plain hex.
const signaturePrefix = "ed25519:"

// grantMessage is what a grant proof covers: the approval and the digest of
// the exact run it allows.
func grantMessage(approvalID, digest string) []byte {
	return []byte(approvalID + "\n" + digest)
}

// GrantMAC is the proof of a grant made with the approver secret.
func GrantMAC(key []byte, approvalID, digest string) string {
	m := hmac.New(sha256.New, key)
	m.Write(grantMessage(approvalID, digest))
	return hex.EncodeToString(m.Sum(nil))
}

// GrantSignature is the proof of a grant made with an approver's Ed25519
// private key.
func GrantSignature(key ed25519.PrivateKey, approvalID, digest string) string {
	return signaturePrefix + base64.StdEncoding.EncodeToString(ed25519.Sign(key, grantMessage(approvalID, digest)))
}

// VerifyGrantSignature reports whether proof is a signature of the grant by
// the private key of pub.
func VerifyGrantSignature(pub ed25519.PublicKey, approvalID, digest, proof string) bool {
	b64, ok := strings.CutPrefix(proof, signaturePrefix)
	if !ok {
		return false
	}
	sig, err := base64.StdEncoding.DecodeString(b64)
	return err == nil && len(pub) == ed25519.PublicKeySize && ed25519.Verify(pub, grantMessage(approvalID, digest), sig)
}

// checkGrant verifies a grant's proof when approvers are configured: a
// signature by the approvers' key, else a MAC with the approver secret.
func (r *Runner) checkGrant(a vault.Approval) error {
	switch {
	case r.ApproverPublicKey != nil:
		if !VerifyGrantSignature(r.ApproverPublicKey, a.ID, a.Digest, a.GrantMAC) {
			return wire.Errorf(wire.CodeApprovalRejected, "approval %s was not granted with the approvers' signing key", a.ID).With("approval", a.ID)
		}
	case len(r.ApproverKey) > 0:
		if !hmac.Equal([]byte(GrantMAC(r.ApproverKey, a.ID, a.Digest)), []byte(a.GrantMAC)) {
			return wire.Errorf(wire.CodeApprovalRejected, "approval %s was not granted with the approver secret", a.ID).With("approval", a.ID)
		}
	}
	return nil
}
