package runner

import (
	"bytes"
	"strings"
	"testing"
)

func TestEncode(t *testing.T) {
	for _, tc := range []struct {
		name string
		out  []byte
		want string
	}{
		{"text", []byte("hello\n\tworld\r\n"), "utf-8"},
		{"colours", []byte(strings.Repeat("\x1b[32mPASS\x1b[0m test_x\n", 50)), "utf-8"},
		{"some control characters", []byte("a\x00bcdefgh"), "utf-8"},
		{"NULs", bytes.Repeat([]byte{0}, 4096), "base64"},
		{"mostly control characters", []byte(strings.Repeat("\x01\x02x", 100)), "base64"},
		{"not UTF-8", []byte("\xff\xfe"), "base64"},
		{"empty", nil, "utf-8"},
	} {
		text, enc, _ := encode(Output{Head: tc.out, Total: int64(len(tc.out))})
		if enc != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, enc, tc.want)
		}
		if enc == "utf-8" && text != string(tc.out) {
			t.Errorf("%s: text %q", tc.name, text)
		}
	}
	// Cut output: both ends must read as text.
	if _, enc, at := encode(Output{Head: []byte("ok\n"), Tail: bytes.Repeat([]byte{0}, 64), Total: 1000, Truncated: true}); enc != "base64" || at != 3 {
		t.Errorf("cut output with a NUL tail: %s at %d", enc, at)
	}
}
