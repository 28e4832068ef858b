package wire

import (
	"encoding/base64"
	"unicode/utf8"
)

// Vault paths and names are bytes: a file made through the mount may have
// a name that is not valid UTF-8 ("\xff\xfe.txt"). JSON strings are text,
// and encoding/json writes such bytes as U+FFFD, which loses them: two
// names that differ only in invalid bytes would print the same.
//
// So every field of a wire document that holds a vault path or name (path,
// name, target, root, ...) has a companion field named with the suffix
// _b64 (path_b64, name_b64, ...) that holds the standard base64, with
// padding, of the raw bytes when they are not valid UTF-8, and is omitted
// when they are. The plain field stays the human-readable form (invalid
// bytes as U+FFFD); a client that needs the exact name reads the _b64
// field when present, else the plain one. Input goes the other way:
// `avfs --path-b64` takes vault path arguments as base64 (docs/envelope.md,
// "Names that are not UTF-8").

// B64 is the companion of the vault path or name s: the standard base64 of
// its bytes when s is not valid UTF-8, else "" (a field tagged omitempty
// then leaves it out). It never fails.
func B64(s string) string {
	if utf8.ValidString(s) {
		return ""
	}
	return base64.StdEncoding.EncodeToString([]byte(s))
}

// DecodeB64 returns the bytes that the standard base64 s (padding
// required, as B64 writes it) encodes, as a string. what names the value
// in the error, which is invalid_input when s is not standard base64. It
// does not check that the result is a valid path.
func DecodeB64(what, s string) (string, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return "", Errorf(CodeInvalidInput, "%s %q is not standard base64: %v", what, s, err)
	}
	return string(b), nil
}
