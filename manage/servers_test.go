package manage

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
)

// nginxBin is the nginx the tests serve bundles with (`make deps`).
const nginxBin = "/usr/sbin/nginx"

// nginx is an nginx serving the files of root on loopback.
type nginx struct {
	root      string // the document root
	url       string // http://127.0.0.1:PORT
	accessLog string
	cmd       *exec.Cmd
}

// startNginx starts nginx in the foreground, everything it writes in a
// temporary directory, and stops it when the test ends. Without nginx the
// test is skipped, except under CI=true, where it fails.
func startNginx(t *testing.T) *nginx {
	t.Helper()
	if _, err := os.Stat(nginxBin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("nginx is required in CI (make deps): %v", err)
		}
		t.Skipf("nginx not available: %v", err)
	}
	dir := t.TempDir()
	n := &nginx{root: filepath.Join(dir, "www"), accessLog: filepath.Join(dir, "access.log")}
	for _, d := range []string{n.root, filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	n.url = "http://" + addr
	conf := filepath.Join(dir, "nginx.conf")
	tmp := filepath.Join(dir, "tmp")
	text := fmt.Sprintf(`daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 64; }
http {
  access_log %[2]s;
  client_body_temp_path %[3]s/body;
  proxy_temp_path %[3]s/proxy;
  fastcgi_temp_path %[3]s/fastcgi;
  uwsgi_temp_path %[3]s/uwsgi;
  scgi_temp_path %[3]s/scgi;
  server {
    listen %[4]s;
    root %[5]s;
    etag on;
    types { application/gzip gz; }
  }
}
`, dir, n.accessLog, tmp, addr, n.root)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	n.cmd = exec.Command(nginxBin, "-p", dir, "-c", conf, "-e", filepath.Join(dir, "error.log"))
	n.cmd.Stdout, n.cmd.Stderr = os.Stderr, os.Stderr
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.stop)
	poll(t, 10*time.Second, "nginx listening on "+addr, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return n
}

// stop stops nginx (it may already have been stopped).
func (n *nginx) stop() {
	if n.cmd.Process != nil && n.cmd.ProcessState == nil {
		_ = n.cmd.Process.Kill()
		_ = n.cmd.Wait()
	}
}

// requests are the status codes nginx answered for GET path, in order.
func (n *nginx) requests(t *testing.T, path string) []string {
	t.Helper()
	bs, err := os.ReadFile(n.accessLog)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var codes []string
	for _, line := range strings.Split(string(bs), "\n") {
		// combined: … "GET /path HTTP/1.1" 200 …
		_, rest, ok := strings.Cut(line, `"GET `+path+` `)
		if !ok {
			continue
		}
		if _, after, ok := strings.Cut(rest, `" `); ok {
			codes = append(codes, strings.Fields(after)[0])
		}
	}
	return codes
}

// testBundle is one bundle the tests publish.
type testBundle struct {
	revision string
	roots    []string
	rego     string // the module, in package extensions.remote unless roots say otherwise
	key      string // the HMAC secret it is signed with ("": not signed)
	tamper   bool   // change the module after signing
}

// publish writes b as an `opa build` tarball at root/rel, as OPA's
// bundle writer writes it and signed as `opa sign` signs it.
func publish(t *testing.T, root, rel string, tb testBundle) {
	t.Helper()
	roots := tb.roots
	if roots == nil {
		roots = []string{"extensions/remote"}
	}
	raw := []byte(tb.rego)
	parsed, err := ast.ParseModuleWithOpts("/remote.rego", tb.rego, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		t.Fatal(err)
	}
	b := bundle.Bundle{
		Manifest: bundle.Manifest{Revision: tb.revision, Roots: &roots},
		Data:     map[string]any{},
		Modules:  []bundle.ModuleFile{{URL: "/remote.rego", Path: "/remote.rego", Raw: raw, Parsed: parsed}},
	}
	if tb.key != "" {
		if err := b.GenerateSignature(bundle.NewSigningConfig(tb.key, "HS256", ""), "k", false); err != nil {
			t.Fatal(err)
		}
	}
	if tb.tamper {
		b.Modules[0].Raw = []byte(strings.Replace(tb.rego, `"deny"`, `"allow"`, 1))
		if b.Modules[0].Parsed, err = ast.ParseModuleWithOpts("/remote.rego", string(b.Modules[0].Raw), ast.ParserOptions{RegoVersion: ast.RegoV1}); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := bundle.NewWriter(&buf).Write(b); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	serve(t, path, buf.Bytes())
}

// denyModule is a module of revision rev that denies every command with
// the reason remote.REV.
func denyModule(rev string) string {
	return fmt.Sprintf(`package extensions.remote

reasons contains {"id": "remote.%s", "message": "revision %s says no", "decision": "deny"}
`, rev, rev)
}

// report is what the tests read of a report of OPA's status plugin
// (status.UpdateRequestV1, whose bundle errors are Go errors).
type report struct {
	Labels  map[string]string `json:"labels"`
	Bundles map[string]struct {
		ActiveRevision string   `json:"active_revision"`
		Code           string   `json:"code"`
		Message        string   `json:"message"`
		Errors         []string `json:"errors"`
	} `json:"bundles"`
	Plugins map[string]struct {
		State   string `json:"state"`
		Message string `json:"message"`
	} `json:"plugins"`
}

// statusReceiver is an HTTP status service: it keeps the reports OPA's
// status plugin sends.
type statusReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	reports []report
}

func startStatusReceiver(t *testing.T) *statusReceiver {
	t.Helper()
	r := &statusReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			gz, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = gz
		}
		var u report
		if err := json.NewDecoder(body).Decode(&u); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.reports = append(r.reports, u)
		r.mu.Unlock()
	}))
	t.Cleanup(r.Close)
	return r
}

// last is the last report received, or nil.
func (r *statusReceiver) last() report {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reports) == 0 {
		return report{}
	}
	return r.reports[len(r.reports)-1]
}

// any reports whether a report received satisfies ok.
func (r *statusReceiver) any(ok func(report) bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, u := range r.reports {
		if ok(u) {
			return true
		}
	}
	return false
}

// poll calls cond until it holds, failing the test after timeout.
func poll(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
