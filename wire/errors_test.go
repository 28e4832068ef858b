package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

func TestErrorBodyDetails(t *testing.T) {
	err := fmt.Errorf("proxy exec: %w", Errorf(CodeBundleInvalid, "bad rego").With("file", "x.rego").With("row", 4))
	b := NewErrorBody(err)
	if b.Code != CodeBundleInvalid || b.Message != "proxy exec: bad rego" || b.Details["file"] != "x.rego" {
		t.Fatalf("NewErrorBody: %+v", b)
	}
	data, jerr := json.Marshal(b)
	if jerr != nil {
		t.Fatal(jerr)
	}
	if want := `{"code":"bundle_invalid","file":"x.rego","message":"proxy exec: bad rego","row":4}`; string(data) != want {
		t.Fatalf("JSON %s, want %s", data, want)
	}
	var back ErrorBody
	if err := json.Unmarshal(data, &back); err != nil || back.Code != b.Code || back.Message != b.Message ||
		back.Details["file"] != "x.rego" || back.Details["row"] != float64(4) {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	// Without details there is nothing beside code and message.
	if b := NewErrorBody(errors.New("boom")); b.Code != CodeInternal || b.Details != nil {
		t.Fatalf("plain error: %+v", b)
	}
	// A detail never overrides code or message.
	data, _ = json.Marshal(ErrorBody{Code: CodeInternal, Message: "m", Details: map[string]any{"code": "x"}})
	if string(data) != `{"code":"internal","message":"m"}` {
		t.Fatalf("override: %s", data)
	}
}

// An error made from a format that wraps several errors unwraps to all of
// them.
func TestErrorfWrapsSeveral(t *testing.T) {
	first, second := errors.New("first"), errors.New("second")
	e := Errorf(CodeHostIO, "op (%w): %w", first, second)
	if !errors.Is(e, first) || !errors.Is(e, second) || e.Message != "op (first): second" || e.Code != CodeHostIO {
		t.Errorf("%+v", e)
	}
	if one := Errorf(CodeInternal, "op: %w", first); !errors.Is(one, first) || one.Unwrap() != first {
		t.Errorf("one cause: %+v", one)
	}
}

// A string detail that is not UTF-8 (a vault path) comes with its bytes in
// KEY_b64; UTF-8 ones, and other values, do not.
func TestErrorObjectB64(t *testing.T) {
	err := Errorf(CodeNotFound, "%q: no such file or directory", "/\xff\xfe.txt").With("path", "/\xff\xfe.txt").With("n", 1).With("ok", "/a")
	got, _ := json.Marshal(ErrorDocument{Error: ErrorObject(err)})
	want := `{"error":{"code":"not_found","message":"\"/\\xff\\xfe.txt\": no such file or directory","n":1,"ok":"/a","path":"/\ufffd\ufffd.txt","path_b64":"L//+LnR4dA=="}}`
	if string(got) != want {
		t.Errorf("error document:\n got %s\nwant %s", got, want)
	}
	body, _ := json.Marshal(NewErrorBody(err))
	var back ErrorBody
	if err := json.Unmarshal(body, &back); err != nil || back.Details["path_b64"] != "L//+LnR4dA==" {
		t.Errorf("envelope error %s: %v %v", body, back.Details, err)
	}
}

func TestB64(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"/a.txt", ""}, {"/ünï/日本", ""}, {"", ""},
		{"/\xff\xfe.txt", "L//+LnR4dA=="}, {"/\xfe\xff.txt", "L/7/LnR4dA=="}, {"\xc3\x28", "wyg="},
	} {
		if got := B64(c.in); got != c.want {
			t.Errorf("B64(%q) = %q, want %q", c.in, got, c.want)
		}
		if c.want == "" {
			continue
		}
		if back, err := DecodeB64("path", c.want); err != nil || back != c.in {
			t.Errorf("DecodeB64(%q) = %q, %v", c.want, back, err)
		}
	}
	for _, bad := range []string{"L//+LnR4dA", "L//+LnR4dA=", "not base64!", "L_-_LnR4dA=="} {
		if _, err := DecodeB64("path", bad); !HasCode(err, CodeInvalidInput) {
			t.Errorf("DecodeB64(%q): %v, want invalid_input", bad, err)
		}
	}
}
