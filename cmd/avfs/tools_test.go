package main

// Real tools in the sandbox of `avfs proxy exec`, under the default policy
// where it allows the step: git, a Python venv, go build with its cache,
// npm, gcc and make, libtool. And the two ways a run goes without a
// sandbox: --sandbox none, and a kernel that refuses one.

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"avfs/wire"
)

// needTools fails the test in CI (CI=true) when a program is missing, and
// skips it elsewhere.
func needTools(t *testing.T, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is required in CI (see make deps): %v", name, err)
			}
			t.Skipf("no %s: %v", name, err)
		}
	}
}

// sandboxed checks that r ran in the sandbox's namespaces.
func sandboxed(t *testing.T, r proxyRun) {
	t.Helper()
	if r.env.Sandbox == nil || r.env.Sandbox.Mode != wire.SandboxNamespaces || r.env.Sandbox.Workspace != "/workspace" {
		t.Fatalf("avfs %q: not in the sandbox: %s", r.args, r.raw)
	}
}

// toolRun runs argv in the sandbox with flags, checks that it ran with
// decision and exited 0, and returns its stdout.
func (a *avfs) toolRun(t *testing.T, decision wire.Decision, flags []string, argv ...string) (proxyRun, string) {
	t.Helper()
	r := a.on(t).proxy(append([]string{"--sandbox", "namespaces"}, flags...), argv...)
	if r.code != 0 || r.env.Process == nil {
		t.Fatalf("avfs %q: exit %d\n%s\nstderr: %s", r.args, r.code, r.raw, r.stderr)
	}
	r.ok(t, decision)
	sandboxed(t, r)
	return r, r.stdout(t)
}

func TestToolsGit(t *testing.T) {
	t.Parallel()
	requireFUSE(t)
	needTools(t, "git")
	u := currentUser(t)
	// The user's ~/.gitconfig is shown in the sandbox and wins; without it
	// (home_files: []) git falls back to avfs's identity.
	hostName, _ := exec.Command("git", "config", "--global", "user.name").Output()
	hostEmail, _ := exec.Command("git", "config", "--global", "user.email").Output()
	fromHome := strings.TrimSpace(string(hostName)) + " <" + strings.TrimSpace(string(hostEmail)) + ">"
	if len(bytes.TrimSpace(hostEmail)) == 0 {
		fromHome = u + " <" + u + "@avfs.invalid>"
	}
	for _, c := range []struct {
		name, config, author string
	}{
		{"fallback identity", `{"sandbox": {"home_files": []}}`, u + " <" + u + "@avfs.invalid>"},
		{"user's gitconfig", `{}`, fromHome},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a := newProxyAVFS(t).on(t)
			if err := os.WriteFile(filepath.Join(a.home, "config.json"), []byte(c.config), 0o644); err != nil {
				t.Fatal(err)
			}
			r, _ := a.toolRun(t, wire.AllowWithCheckpoint, nil, "sh", "-c", "git init -q && echo x > a.txt && git add a.txt && git commit -q -m first")
			if !slices.Contains(changeLines(r.env.Changes), "added file /a.txt ->2 >0644") {
				t.Fatalf("changes %q", changeLines(r.env.Changes))
			}
			_, out := a.toolRun(t, wire.Allow, nil, "git", "log", "--format=%s|%an <%ae>")
			equal(t, "git log", out, "first|"+c.author+"\n")
			if head := a.cat("/.git/HEAD"); !strings.HasPrefix(head, "ref: refs/heads/") {
				t.Fatalf("HEAD: %q", head)
			}
		})
	}
}

func TestToolsPythonVenv(t *testing.T) {
	t.Parallel()
	requireFUSE(t)
	needTools(t, "python3")
	a := newProxyAVFS(t)
	m := []string{"--timeout", "120s"}
	_, out := a.toolRun(t, wire.AllowWithCheckpoint, m, "sh", "-c", "python3 -m venv .venv && .venv/bin/pip --version")
	if !strings.HasPrefix(out, "pip ") || !strings.Contains(out, " from /workspace/.venv/") {
		t.Fatalf("pip --version: %q", out)
	}
	// A new run: the venv's interpreter, found by the path recorded in it.
	_, out = a.toolRun(t, wire.AllowWithCheckpoint, m, ".venv/bin/python", "-c", "import sys; print(sys.prefix)")
	equal(t, "sys.prefix", out, "/workspace/.venv\n")
}

// goCompiles matches the compiler's command line in `go build -x` output.
var goCompiles = regexp.MustCompile(`(?m)pkg/tool/[^/ ]+/compile `)

// filesWith lists the regular files under dir changed since start that
// hold s.
func filesWith(t *testing.T, dir string, start time.Time, s string) []string {
	t.Helper()
	var found []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if info, err := d.Info(); err != nil || info.ModTime().Before(start) {
			return nil
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, []byte(s)) {
			found = append(found, p)
		}
		return nil
	})
	return found
}

func TestToolsGoBuild(t *testing.T) {
	t.Parallel()
	requireFUSE(t)
	needTools(t, "go")
	a := newProxyAVFS(t)
	tok := "hello from go " + marker()
	a.write("module hello\n\ngo 1.22\n", "-p", "/hello/go.mod")
	a.write("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\""+tok+"\") }\n", "/hello/main.go")
	hostCache, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Second) // mtimes may be coarser than the clock
	m := []string{"--cwd", "/hello", "--timeout", "300s"}

	r, out := a.toolRun(t, wire.AllowWithCheckpoint, m, "sh", "-c", "go build -x ./... 2>&1 && ./hello")
	if !goCompiles.MatchString(out) || !strings.HasSuffix(out, tok+"\n") {
		t.Fatalf("go build: no compile, or no output %q:\n%s", tok, out)
	}
	for _, c := range r.env.Changes {
		if strings.Contains(c.Path, ".cache") || strings.Contains(c.Path, "go-build") {
			t.Errorf("the build cache reached the vault: %s", changeLine(c))
		}
	}
	if slices.Contains(a.ls("/"), ".cache") {
		t.Errorf("the vault has a .cache: %q", a.ls("/"))
	}
	// The cache is the vault's, in AVFS_HOME, and holds this build (its
	// compiled main package has the string); the host's is untouched.
	cache := filepath.Join(a.home, "cache", "default", "go-build")
	if len(filesWith(t, cache, start, tok)) == 0 {
		t.Fatalf("%s does not hold the build", cache)
	}
	if got := filesWith(t, strings.TrimSpace(string(hostCache)), start, tok); len(got) > 0 {
		t.Fatalf("the build reached the host's cache: %q", got)
	}

	// A new run: nothing to compile, the cache was kept.
	_, out = a.toolRun(t, wire.AllowWithCheckpoint, m, "sh", "-c", "go build -x ./... 2>&1 && ./hello")
	if goCompiles.MatchString(out) || !strings.HasSuffix(out, tok+"\n") {
		t.Fatalf("the second go build compiled again:\n%s", out)
	}
}

func TestToolsNpm(t *testing.T) {
	t.Parallel()
	requireFUSE(t)
	needTools(t, "node", "npm")
	a := newProxyAVFS(t)
	a.write(`{"name": "t", "version": "1.0.0", "scripts": {"hello": "node -e \"console.log('hi')\""}}`+"\n", "/package.json")
	_, out := a.toolRun(t, wire.AllowWithCheckpoint, []string{"--timeout", "120s"}, "npm", "run", "hello")
	if !strings.HasSuffix(out, "\nhi\n") {
		t.Fatalf("npm run hello: %q", out)
	}
}

func TestToolsMake(t *testing.T) {
	t.Parallel()
	requireFUSE(t)
	needTools(t, "gcc", "make")
	a := newProxyAVFS(t)
	a.write("#include <stdio.h>\nint main(void) { puts(\"hello from c\"); return 0; }\n", "/hello.c")
	a.write("hello: hello.c\n\tgcc -o hello hello.c\n", "/Makefile")
	r, out := a.toolRun(t, wire.AllowWithCheckpoint, []string{"--timeout", "120s"}, "sh", "-c", "make && ./hello")
	equal(t, "make && ./hello", out, "gcc -o hello hello.c\nhello from c\n")
	if lines := changeLines(r.env.Changes); len(lines) != 1 || !strings.HasPrefix(lines[0], "added file /hello ") {
		t.Fatalf("changes %q", lines)
	}
}

func TestToolsLibtool(t *testing.T) {
	t.Parallel()
	requireFUSE(t)
	needTools(t, "libtool", "gcc")
	a := newProxyAVFS(t)
	a.write("#include <stdio.h>\nvoid foo(void) { puts(\"hello from libfoo\"); }\n", "/foo.c")
	a.write("void foo(void);\nint main(void) { foo(); return 0; }\n", "/main.c")
	// The default policy denies the link step: -rpath /usr/local/lib is a
	// path outside the vault (avfs.deny.outside_vault), though libtool only
	// records it. So the build runs under the allow-all bundle.
	m := []string{"--timeout", "120s"}
	_, out := a.toolRun(t, wire.Allow, append(allowAllFlags(t, "allow-all", "namespaces"), m...), "sh", "-c",
		"libtool --mode=compile gcc -c foo.c && libtool --mode=link gcc -o libfoo.la foo.lo -rpath /usr/local/lib && "+
			"libtool --mode=link gcc -o prog main.c libfoo.la")
	if !strings.Contains(out, "libtool: link: ") {
		t.Fatalf("libtool: %q", out)
	}
	// A new run: the wrapper script finds the library in .libs.
	_, out = a.toolRun(t, wire.AllowWithCheckpoint, m, "./prog")
	equal(t, "./prog", out, "hello from libfoo\n")
}

func TestToolsSandboxNone(t *testing.T) {
	t.Parallel()
	requireFUSE(t)
	a := newProxyAVFS(t)
	r := a.proxy([]string{"--sandbox", "none"}, "printenv", "HOME")
	r.ok(t, wire.Allow)
	sb, dir := r.env.Sandbox, r.env.Mount.Dir
	if sb == nil || sb.Mode != wire.SandboxNone || sb.Reason != "--sandbox none" || sb.Workspace != dir || sb.Home != dir ||
		sb.Network != wire.NetworkHost || sb.Landlock != 0 {
		t.Fatalf("sandbox: %s", r.raw)
	}
	equal(t, "HOME", r.stdout(t), dir+"\n")
	if !strings.HasPrefix(dir, a.runDir()+"/exec-") {
		t.Fatalf("mount dir %s", dir)
	}
}

// userNamespaceDepth is how deep user namespaces nest: the kernel refuses
// a new one inside that many.
const userNamespaceDepth = 33

// nested is cmd run inside userNamespaceDepth nested user namespaces, where
// the sandbox's clone(CLONE_NEWUSER) fails.
func nested(t *testing.T, cmd *exec.Cmd) *exec.Cmd {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatal(err)
	}
	var args []string
	for range userNamespaceDepth {
		args = append(args, "unshare", "--user", "--map-root-user")
	}
	cmd.Path, cmd.Args = unshare, append(args, cmd.Args...)
	cmd.Args[0] = unshare
	return cmd
}

func TestToolsSandboxUnavailable(t *testing.T) {
	t.Parallel()
	needTools(t, "unshare")
	// The place is right: one more user namespace is refused there.
	if out, err := nested(t, exec.Command("unshare", "--user", "true")).CombinedOutput(); err == nil {
		t.Fatalf("a user namespace inside %d nested ones was made: the kernel's limit is higher", userNamespaceDepth)
	} else if !strings.Contains(string(out), "unshare failed") {
		t.Fatalf("nesting %d user namespaces: %v %s", userNamespaceDepth, err, out)
	}
	a := newProxyAVFS(t)
	run := func(mode string) proxyRun {
		t.Helper()
		args := proxyArgs([]string{"--mount-mode", "materialize", "--sandbox", mode}, "printenv", "HOME")
		cmd := nested(t, a.command(args...))
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		return decodeProxyRun(t, args, exitCode(cmd.Run()), out.Bytes(), errb.Bytes())
	}

	r := run("namespaces")
	if r.code != wire.ExitAvfsFailed || r.env.Error == nil || r.env.Error.Code != wire.CodeSandbox || r.env.Process != nil || r.env.Mount != nil {
		t.Fatalf("--sandbox namespaces where the kernel refuses: exit %d, want 125 sandbox_unavailable, nothing run\n%s", r.code, r.raw)
	}
	if step, _ := r.doc["error"].(map[string]any)["step"].(string); step == "" {
		t.Errorf("sandbox_unavailable without the step the kernel refused: %s", r.raw)
	}

	r = run("auto")
	r.ok(t, wire.Allow)
	sb := r.env.Sandbox
	if sb == nil || sb.Mode != wire.SandboxNone || !strings.Contains(sb.Reason, "refused") || sb.Home != r.env.Mount.Dir {
		t.Fatalf("--sandbox auto where the kernel refuses: %s", r.raw)
	}
	equal(t, "HOME", r.stdout(t), r.env.Mount.Dir+"\n")
}
