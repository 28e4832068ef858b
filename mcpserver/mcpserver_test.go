package mcpserver

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"avfs/runner"
	"avfs/wire"
)

func TestCheckListen(t *testing.T) {
	for _, c := range []struct {
		addr, token string
		ok          bool
	}{
		{"127.0.0.1:0", "", true},
		{"[::1]:8080", "", true},
		{"localhost:8080", "", true},
		{"0.0.0.0:8080", "", false},
		{"[::]:8080", "", false},
		{"example.com:8080", "", false},
		{"192.168.1.2:8080", "", false},
		{"0.0.0.0:8080", "tok", true},
		{"127.0.0.1", "", false}, // no port
	} {
		err := CheckListen(c.addr, c.token)
		if (err == nil) != c.ok {
			t.Errorf("CheckListen(%q, %q) = %v, want ok %v", c.addr, c.token, err, c.ok)
		}
		if err != nil && wire.CodeOf(err) != wire.CodeUsage {
			t.Errorf("CheckListen(%q): code %s, want usage", c.addr, wire.CodeOf(err))
		}
	}
}

func TestHTTPHandlerToken(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "t"}, nil)
	h := HTTPHandler(s, "s3cret")
	for _, c := range []struct {
		auth string
		want int
	}{
		{"", http.StatusUnauthorized},
		{"Bearer wrong", http.StatusUnauthorized},
		{"s3cret", http.StatusUnauthorized},
		{"Bearer s3cret", 0}, // reaches the MCP handler, which answers as it does
	} {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{}`))
		if c.auth != "" {
			r.Header.Set("Authorization", c.auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if c.want != 0 && w.Code != c.want || c.want == 0 && w.Code == http.StatusUnauthorized {
			t.Errorf("Authorization %q: status %d, want %d", c.auth, w.Code, c.want)
		}
	}
}

func TestRequestState(t *testing.T) {
	h := &handlers{stateKey: []byte("k1")}
	env := &wire.Envelope{Vault: "default", Decision: wire.RequireApproval, Command: wire.CommandReport{Argv: []string{"touch", "a"}, Cwd: "/"},
		Approval: &wire.ApprovalRef{ID: "ap-1", Status: "pending"}}
	state, err := h.sealState(env)
	if err != nil {
		t.Fatal(err)
	}
	same := runner.Request{Vault: "default", Argv: []string{"touch", "a"}}
	if got, err := h.openState(state, same); err != nil || got.Approval.ID != "ap-1" {
		t.Fatalf("openState: %v %v", got, err)
	}
	body, sig, _ := strings.Cut(state, ".")
	other := &handlers{stateKey: []byte("k2")}
	for name, c := range map[string]struct {
		h     *handlers
		state string
		req   runner.Request
	}{
		"another command":     {h, state, runner.Request{Vault: "default", Argv: []string{"touch", "b"}}},
		"another vault":       {h, state, runner.Request{Vault: "work", Argv: []string{"touch", "a"}}},
		"a shell script":      {h, state, runner.Request{Vault: "default", Shell: "touch a"}},
		"another server":      {other, state, same},
		"tampered":            {h, body + "x." + sig, same},
		"no signature":        {h, body, same},
		"not base64":          {h, "!!.!!", same},
		"signature of itself": {h, body + "." + body, same},
	} {
		if _, err := c.h.openState(c.state, c.req); err == nil || wire.CodeOf(err) != wire.CodeInvalidInput {
			t.Errorf("%s: %v, want invalid_input", name, err)
		}
	}
}

func TestRequestDefaults(t *testing.T) {
	h := &handlers{cfg: Config{Vault: "v"}}
	r, err := h.request(ExecInput{Argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Vault != "v" || r.Cwd != "/" || r.Timeout != runner.DefaultTimeout || r.MaxOutput != maxOutput || r.ApprovalTTL != runner.DefaultTTL {
		t.Fatalf("defaults: %+v", r)
	}
	for _, in := range []ExecInput{{}, {Argv: []string{"a"}, Shell: "b"}, {Shell: "x", TimeoutSeconds: -1}} {
		if _, err := h.request(in); wire.CodeOf(err) != wire.CodeUsage {
			t.Errorf("request(%+v): %v, want usage", in, err)
		}
	}
	if r, _ := h.request(ExecInput{Shell: "x", TimeoutSeconds: 1.5, Vault: "w"}); r.Timeout.Seconds() != 1.5 || r.Vault != "w" {
		t.Errorf("timeout, vault: %+v", r)
	}
}

func TestCallsDrain(t *testing.T) {
	var c calls
	ctx, done, err := c.start(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cause := errors.New("shutting down")
	ended := make(chan struct{})
	go func() {
		<-ctx.Done() // a call that ends when cancelled
		if context.Cause(ctx) != cause {
			t.Errorf("cause %v", context.Cause(ctx))
		}
		done()
		close(ended)
	}()
	if err := c.drain(context.Background(), cause); err != nil {
		t.Fatal(err)
	}
	<-ended
	if _, _, err := c.start(context.Background()); err == nil {
		t.Fatal("a call started while draining")
	}

	// A call that does not end makes drain give up when its context does.
	var stuck calls
	if _, _, err := stuck.start(context.Background()); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := stuck.drain(short, cause); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("drain of a stuck call: %v", err)
	}
}
