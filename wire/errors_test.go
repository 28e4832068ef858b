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
