package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"avfs/wire"
)

// avfsBin is the binary under test: $AVFS_BIN, else built once by TestMain.
var avfsBin string

func TestMain(m *testing.M) {
	avfsBin = os.Getenv("AVFS_BIN")
	var tmp string
	if avfsBin == "" {
		var err error
		tmp, err = os.MkdirTemp("", "avfs-cli-test")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Chmod(tmp, 0o755) // TestSandboxUnprivileged runs it as another user
		avfsBin = filepath.Join(tmp, "avfs")
		out, err := exec.Command("go", "build", "-o", avfsBin, ".").CombinedOutput()
		if err == nil { // avfs-replicate beside it (replicate_cli.go)
			out, err = exec.Command("go", "build", "-tags", "avfs_replicator", "-o", filepath.Join(tmp, "avfs-replicate"), ".").CombinedOutput()
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "build avfs: %v\n%s", err, out)
			os.RemoveAll(tmp)
			os.Exit(1)
		}
	}
	code := m.Run()
	if tmp != "" {
		os.RemoveAll(tmp)
	}
	os.Exit(code)
}

// avfs runs the binary with its own state directory.
type avfs struct {
	t    *testing.T
	home string
	env  []string // more KEY=VALUE for every run
}

func newAVFS(t *testing.T) *avfs {
	t.Helper()
	return &avfs{t: t, home: t.TempDir()}
}

// result is one run of the binary.
type result struct {
	code           int
	stdout, stderr []byte
	doc            map[string]any // the JSON document on stdout (with --json)
	raw            json.RawMessage
}

// exec runs avfs with args (no --json added) and stdin.
func (a *avfs) exec(stdin []byte, args ...string) result {
	a.t.Helper()
	cmd := exec.Command(avfsBin, args...)
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AVFS_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(append(env, "AVFS_HOME="+a.home), a.env...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.Bytes(), stderr: errb.Bytes()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		a.t.Fatalf("run avfs %q: %v", args, err)
	}
	return r
}

// json runs avfs --json and parses the single JSON document it must print.
func (a *avfs) json(stdin []byte, args ...string) result {
	a.t.Helper()
	r := a.exec(stdin, append(args, "--json")...)
	dec := json.NewDecoder(bytes.NewReader(r.stdout))
	if err := dec.Decode(&r.raw); err != nil {
		a.t.Fatalf("avfs %q: stdout is not a JSON document (%v): %q stderr %q", args, err, r.stdout, r.stderr)
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err != io.EOF {
		a.t.Fatalf("avfs %q: more than one JSON document on stdout: %q", args, r.stdout)
	}
	var v any
	if err := json.Unmarshal(r.raw, &v); err != nil {
		a.t.Fatal(err)
	}
	r.doc, _ = v.(map[string]any)
	if r.code == 0 && r.doc != nil && r.doc["error"] != nil {
		a.t.Fatalf("avfs %q: exit 0 with an error document: %s", args, r.raw)
	}
	return r
}

// ok runs avfs --json and fails the test unless it exits 0.
func (a *avfs) ok(args ...string) map[string]any {
	a.t.Helper()
	return a.okIn(nil, args...)
}

func (a *avfs) okIn(stdin []byte, args ...string) map[string]any {
	a.t.Helper()
	r := a.json(stdin, args...)
	if r.code != 0 {
		a.t.Fatalf("avfs %q: exit %d: %s %s", args, r.code, r.stdout, r.stderr)
	}
	return r.doc
}

// into runs avfs --json, expects exit 0 and decodes the document into v.
func (a *avfs) into(v any, args ...string) {
	a.t.Helper()
	r := a.json(nil, args...)
	if r.code != 0 {
		a.t.Fatalf("avfs %q: exit %d: %s", args, r.code, r.stdout)
	}
	if err := json.Unmarshal(r.raw, v); err != nil {
		a.t.Fatalf("avfs %q: decode %s: %v", args, r.raw, err)
	}
}

// fail runs avfs --json and checks the exit status and error code; it
// returns the error object.
func (a *avfs) fail(exit int, code string, args ...string) map[string]any {
	a.t.Helper()
	return a.failIn(nil, exit, code, args...)
}

func (a *avfs) failIn(stdin []byte, exit int, code string, args ...string) map[string]any {
	a.t.Helper()
	r := a.json(stdin, args...)
	eo, _ := r.doc["error"].(map[string]any)
	if r.code != exit || eo == nil || eo["code"] != code {
		a.t.Fatalf("avfs %q: want exit %d code %q, got exit %d: %s", args, exit, code, r.code, r.stdout)
	}
	if msg, _ := eo["message"].(string); msg == "" {
		a.t.Fatalf("avfs %q: error without message: %s", args, r.stdout)
	}
	return eo
}

// write stores content at p in the selected vault.
func (a *avfs) write(content string, args ...string) {
	a.t.Helper()
	a.okIn([]byte(content), append([]string{"write"}, args...)...)
}

// cat returns the content of p (raw, without --json).
func (a *avfs) cat(args ...string) string {
	a.t.Helper()
	r := a.exec(nil, append([]string{"cat"}, args...)...)
	if r.code != 0 {
		a.t.Fatalf("avfs cat %q: exit %d: %s", args, r.code, r.stderr)
	}
	return string(r.stdout)
}

// entry is the JSON form of vault.Entry that the tests read.
type entry struct {
	Path   string        `json:"path"`
	Name   string        `json:"name"`
	Kind   string        `json:"kind"`
	Mode   wire.FileMode `json:"mode"` // "0644": a number fails to decode
	Size   int64         `json:"size"`
	Target string        `json:"target"`
	Mtime  string        `json:"mtime"`
}

func (a *avfs) ls(args ...string) []string {
	a.t.Helper()
	var l listingDoc
	a.into(&l, append([]string{"ls"}, args...)...)
	names := []string{}
	for _, e := range l.Entries {
		names = append(names, e.Name)
	}
	return names
}

type listingDoc = struct {
	Path    string  `json:"path"`
	Entries []entry `json:"entries"`
}

type info struct {
	Name     string `json:"name"`
	Files    int64  `json:"files"`
	Bytes    int64  `json:"bytes"`
	FileSize int64  `json:"file_size"`
	Parent   *struct {
		Name       string `json:"name"`
		Generation int64  `json:"generation"`
	} `json:"parent"`
	Forks []struct {
		Name string `json:"name"`
	} `json:"forks"`
	Quota struct {
		MaxSizeMB     int64 `json:"max_size_mb"`
		MaxFiles      int64 `json:"max_files"`
		MaxFileSizeMB int64 `json:"max_file_size_mb"`
	} `json:"quota"`
}

func (a *avfs) info(args ...string) info {
	a.t.Helper()
	var i info
	a.into(&i, append([]string{"vault", "info"}, args...)...)
	return i
}

func equal[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func equalSlice(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		t.Fatalf("%s: got %q, want %q", what, got, want)
	}
}

func TestDefaultVaultCreatedOnFirstUse(t *testing.T) {
	a := newAVFS(t)
	var l struct {
		Current string `json:"current"`
		Vaults  []info `json:"vaults"`
	}
	a.into(&l, "vault", "list")
	equal(t, "vaults before first use", len(l.Vaults), 0)
	equalSlice(t, "ls /", a.ls(), []string{})
	a.into(&l, "vault", "list")
	equal(t, "vaults", len(l.Vaults), 1)
	equal(t, "name", l.Vaults[0].Name, "default")
	equal(t, "current", l.Current, "default")
	if _, err := os.Stat(filepath.Join(a.home, "vaults", "default.avfs")); err != nil {
		t.Fatal(err)
	}
	// Any other missing vault is not created.
	a.fail(1, "vault_not_found", "ls", "--vault", "other")
	a.into(&l, "vault", "list")
	equal(t, "vaults", len(l.Vaults), 1)
}

func TestVaultLifecycle(t *testing.T) {
	a := newAVFS(t)
	i := a.info() // creates default
	equal(t, "default name", i.Name, "default")
	var created info
	a.into(&created, "vault", "create", "work")
	equal(t, "created", created.Name, "work")
	a.fail(1, "already_exists", "vault", "create", "work")
	a.fail(1, "invalid_input", "vault", "create", "bad name!")

	a.ok("vault", "create", "--use", "second")
	var l struct {
		Current string `json:"current"`
		Vaults  []info `json:"vaults"`
	}
	a.into(&l, "vault", "list")
	equal(t, "current after create --use", l.Current, "second")
	names := []string{}
	for _, v := range l.Vaults {
		names = append(names, v.Name)
	}
	equalSlice(t, "vault names", names, []string{"default", "second", "work"})

	// Commands act on the current vault; --vault and AVFS_VAULT override it.
	a.write("x", "/in-second")
	a.ok("vault", "use", "work")
	equal(t, "info follows use", a.info().Name, "work")
	equalSlice(t, "ls in work", a.ls(), []string{})
	equalSlice(t, "ls --vault second", a.ls("--vault", "second"), []string{"in-second"})
	equalSlice(t, "ls --vault=second before command", a.ls(), []string{})
	r := a.exec(nil, "--vault=second", "ls", "--json")
	if r.code != 0 || !strings.Contains(string(r.stdout), "in-second") {
		t.Fatalf("--vault= before the command: %d %s", r.code, r.stdout)
	}
	equal(t, "info NAME", a.info("second").Files, int64(1))

	// Human table.
	r = a.exec(nil, "vault", "list")
	if r.code != 0 || !strings.Contains(string(r.stdout), "NAME") || !strings.Contains(string(r.stdout), "CURRENT") {
		t.Fatalf("vault list table: %s", r.stdout)
	}

	a.ok("vault", "delete", "work", "--yes")
	a.fail(1, "vault_not_found", "vault", "info", "work")
	a.fail(1, "vault_not_found", "vault", "use", "work")
	a.fail(1, "vault_not_found", "vault", "delete", "work", "-y")
	// The current vault was deleted: back to default.
	a.into(&l, "vault", "list")
	equal(t, "current after deleting it", l.Current, "default")
}

func TestVaultDeleteWithForks(t *testing.T) {
	for _, args := range [][]string{
		{"vault", "delete", "v2", "--force", "--yes"},
		{"vault", "delete", "--force", "-y", "v2"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			a := newAVFS(t)
			a.ok("vault", "create", "v2")
			a.write("parent data", "--vault", "v2", "/f")
			a.ok("vault", "fork", "v2", "child")
			eo := a.fail(1, "vault_has_forks", "vault", "delete", "v2", "--yes")
			if fmt.Sprint(eo["forks"]) != "[child]" {
				t.Fatalf("forks in error details: %v", eo)
			}
			a.ok(args...)
			a.fail(1, "vault_not_found", "vault", "info", "v2")
			// The fork was detached and keeps its data.
			i := a.info("child")
			if i.Parent != nil {
				t.Fatalf("child still has a parent: %+v", i.Parent)
			}
			equal(t, "child data", a.cat("--vault", "child", "/f"), "parent data")
			a.ok("vault", "check", "child")
		})
	}
}

func TestForkIsolationAndDetach(t *testing.T) {
	a := newAVFS(t)
	a.ok("vault", "create", "base")
	a.write("shared", "--vault", "base", "/shared.txt")
	var child info
	a.into(&child, "vault", "fork", "base", "fork1")
	if child.Parent == nil || child.Parent.Name != "base" || child.Files != 1 {
		t.Fatalf("fork info: %+v", child)
	}
	base := a.info("base")
	if len(base.Forks) != 1 || base.Forks[0].Name != "fork1" {
		t.Fatalf("parent forks: %+v", base.Forks)
	}
	a.fail(1, "already_exists", "vault", "fork", "base", "fork1")
	a.fail(1, "vault_not_found", "vault", "fork", "nope", "fork2")
	a.fail(2, "usage", "vault", "fork", "base")

	a.write("in fork", "--vault", "fork1", "/fork-only")
	a.write("changed in fork", "--vault", "fork1", "/shared.txt")
	a.write("in parent", "--vault", "base", "/parent-only")
	equalSlice(t, "parent", a.ls("--vault", "base"), []string{"parent-only", "shared.txt"})
	equalSlice(t, "fork", a.ls("--vault", "fork1"), []string{"fork-only", "shared.txt"})
	equal(t, "parent content", a.cat("--vault", "base", "/shared.txt"), "shared")
	equal(t, "fork content", a.cat("--vault", "fork1", "/shared.txt"), "changed in fork")

	a.fail(1, "invalid_input", "vault", "detach", "base") // not a fork
	var detached info
	a.into(&detached, "vault", "detach", "fork1")
	if detached.Parent != nil {
		t.Fatalf("detached fork still has a parent")
	}
	equal(t, "parent forks after detach", len(a.info("base").Forks), 0)
	a.ok("vault", "delete", "base", "--yes") // no forks left: no --force needed
	equal(t, "fork content after parent deleted", a.cat("--vault", "fork1", "/shared.txt"), "changed in fork")
	a.ok("vault", "check", "fork1")
	a.ok("gc", "--vault", "fork1")
}

func TestForkChain(t *testing.T) {
	a := newAVFS(t)
	a.write("v1", "/f")
	a.ok("vault", "fork", "default", "f1")
	a.write("v2", "/f") // in default
	a.ok("prune", "--keep", "1")
	a.ok("gc") // must keep what f1 borrows
	equal(t, "fork after parent gc", a.cat("--vault", "f1", "/f"), "v1")
	a.ok("vault", "fork", "f1", "f2")
	a.write("f2 only", "--vault", "f2", "/g")
	// Deleting a fork releases its parent.
	a.ok("vault", "fork", "default", "tmp")
	equal(t, "forks of default", len(a.info("default").Forks), 2)
	a.ok("vault", "delete", "tmp", "--yes")
	equal(t, "forks of default after deleting one", len(a.info("default").Forks), 1)
	// Deleting the middle of a chain with --force detaches f2 first.
	a.fail(1, "vault_has_forks", "vault", "delete", "f1", "--yes")
	a.ok("vault", "delete", "--force", "f1", "-y")
	equal(t, "f2 content", a.cat("--vault", "f2", "/f"), "v1")
	equal(t, "f2 own content", a.cat("--vault", "f2", "/g"), "f2 only")
	a.ok("vault", "check", "f2")
	a.ok("vault", "check", "default")
}

func TestCheckAndGC(t *testing.T) {
	a := newAVFS(t)
	a.write(strings.Repeat("a", 100000), "/big")
	a.write("small", "/big")
	doc := a.ok("vault", "check")
	equal(t, "check ok", doc["ok"], any(true))
	equal(t, "check vault", doc["vault"], any("default"))
	a.ok("prune", "--keep", "1")
	var gc struct {
		Vault      string `json:"vault"`
		Chunks     int64  `json:"chunks_removed"`
		BytesFreed int64  `json:"bytes_freed"`
		FileBefore int64  `json:"file_size_before"`
		FileAfter  int64  `json:"file_size_after"`
	}
	a.into(&gc, "gc")
	if gc.Vault != "default" || gc.Chunks == 0 || gc.BytesFreed < 100000 || gc.FileAfter >= gc.FileBefore {
		t.Fatalf("gc after pruning 100 kB: %+v", gc)
	}
	doc = a.ok("vault", "gc")
	for _, k := range []string{"rows_removed", "chunks_removed", "bytes_freed", "file_size_before", "file_size_after"} {
		if _, ok := doc[k]; !ok {
			t.Fatalf("vault gc: no %s in %v", k, doc)
		}
	}
	equal(t, "content after gc", a.cat("/big"), "small")
	a.ok("vault", "check", "default")
	r := a.exec(nil, "vault", "check")
	if r.code != 0 || !strings.Contains(string(r.stdout), "ok") {
		t.Fatalf("human check: %d %s", r.code, r.stdout)
	}

	// Damage the vault: drop the chunks. check reports it in one error document.
	a.write("some content here", "/other")
	db := openDB(t, filepath.Join(a.home, "vaults", "default.avfs"))
	if _, err := db.Exec("DELETE FROM chunks"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	eo := a.fail(1, "integrity_failed", "vault", "check")
	probs, _ := eo["problems"].([]any)
	if len(probs) == 0 || eo["ok"] != false {
		t.Fatalf("check error without problems: %v", eo)
	}
	r = a.exec(nil, "vault", "check")
	if r.code != 1 || len(r.stdout) == 0 || !strings.Contains(string(r.stderr), "problem") {
		t.Fatalf("human failed check: %d %q %q", r.code, r.stdout, r.stderr)
	}
}

func TestWriteCatBinaryRoundTrip(t *testing.T) {
	a := newAVFS(t)
	data := make([]byte, 0, 256*3)
	for k := 0; k < 3; k++ {
		for b := 0; b < 256; b++ {
			data = append(data, byte(b))
		}
	}
	var e entry
	r := a.json(data, "write", "/bin/all-bytes", "-p", "--mode", "0600")
	if r.code != 0 {
		t.Fatalf("write: %s", r.stdout)
	}
	if err := json.Unmarshal(r.raw, &e); err != nil {
		t.Fatal(err)
	}
	equal(t, "size", e.Size, int64(len(data)))
	equal(t, "mode", e.Mode, wire.FileMode(0o600))
	equal(t, "kind", e.Kind, "file")
	if got := a.cat("/bin/all-bytes"); got != string(data) {
		t.Fatalf("raw cat differs: %d bytes", len(got))
	}
	var c struct {
		Path          string `json:"path"`
		Size          int64  `json:"size"`
		ContentBase64 string `json:"content_base64"`
	}
	a.into(&c, "cat", "/bin/all-bytes")
	got, err := base64.StdEncoding.DecodeString(c.ContentBase64)
	if err != nil || !bytes.Equal(got, data) || c.Size != int64(len(data)) || c.Path != "/bin/all-bytes" {
		t.Fatalf("json cat: %+v %v", c, err)
	}
	// Append, empty file, missing parent.
	a.write("\x00tail", "/bin/all-bytes", "--append")
	equal(t, "appended", a.cat("/bin/all-bytes"), string(data)+"\x00tail")
	a.write("", "/empty")
	equal(t, "empty", a.cat("/empty"), "")
	a.failIn([]byte("x"), 1, "not_found", "write", "/no/such/dir/f")
	a.fail(1, "not_found", "cat", "/missing")
	a.fail(1, "is_a_directory", "cat", "/bin")
	a.fail(2, "usage", "write", "/f", "--mode", "999")
}

func TestFileCommands(t *testing.T) {
	a := newAVFS(t)
	var m struct {
		Entries []entry `json:"entries"`
	}
	a.into(&m, "mkdir", "-p", "/a/b/c", "/d")
	equal(t, "mkdir entries", len(m.Entries), 2)
	equal(t, "mkdir kind", m.Entries[0].Kind, "dir")
	a.ok("mkdir", "-p", "/a/b/c") // exists: fine with -p
	a.fail(1, "already_exists", "mkdir", "/d")
	a.fail(1, "not_found", "mkdir", "/x/y")
	a.ok("mkdir", "--mode", "0700", "/private")
	var st entry
	a.into(&st, "stat", "/private")
	equal(t, "mkdir --mode", st.Mode, wire.FileMode(0o700))

	a.write("hello", "/a/b/c/file.txt")
	a.write("#!/bin/sh\necho hi\n", "/a/run.sh")
	a.ok("chmod", "755", "/a/run.sh")
	a.into(&st, "stat", "/a/run.sh")
	equal(t, "chmod", st.Mode, wire.FileMode(0o755))
	a.fail(2, "usage", "chmod", "rwx", "/a/run.sh")
	a.fail(1, "not_found", "chmod", "0644", "/nope")

	equalSlice(t, "ls /", a.ls(), []string{"a", "d", "private"})
	equalSlice(t, "ls /a", a.ls("/a"), []string{"b", "run.sh"})
	equalSlice(t, "ls file", a.ls("/a/run.sh"), []string{"run.sh"})
	r := a.exec(nil, "ls", "-l", "/a")
	if r.code != 0 || !strings.Contains(string(r.stdout), "-rwxr-xr-x") || !strings.Contains(string(r.stdout), "drwxr-xr-x") {
		t.Fatalf("ls -l: %s", r.stdout)
	}
	r = a.exec(nil, "ls", "/a", "-l") // flag after the path
	if r.code != 0 || !strings.Contains(string(r.stdout), "-rwxr-xr-x") {
		t.Fatalf("ls PATH -l: %s", r.stdout)
	}

	// Symlinks.
	a.ok("ln", "-s", "c/file.txt", "/a/b/link")
	a.into(&st, "stat", "/a/b/link")
	equal(t, "symlink kind", st.Kind, "symlink")
	equal(t, "symlink target", st.Target, "c/file.txt")
	equal(t, "cat through link", a.cat("/a/b/link"), "hello")
	r = a.exec(nil, "ls", "-l", "/a/b")
	if !strings.Contains(string(r.stdout), "link -> c/file.txt") || !strings.Contains(string(r.stdout), "lrwxrwxrwx") {
		t.Fatalf("ls -l symlink: %s", r.stdout)
	}
	a.fail(2, "usage", "ln", "target", "/a/hard")

	// tree lists everything under a path, depth first.
	var tr listingDoc
	a.into(&tr, "tree", "/a")
	paths := []string{}
	for _, e := range tr.Entries {
		paths = append(paths, e.Path)
	}
	equalSlice(t, "tree", paths, []string{"/a", "/a/b", "/a/b/c", "/a/b/c/file.txt", "/a/b/link", "/a/run.sh"})
	r = a.exec(nil, "tree")
	if r.code != 0 || !strings.Contains(string(r.stdout), "      file.txt") {
		t.Fatalf("human tree: %s", r.stdout)
	}

	// cp -r, mv.
	a.fail(1, "is_a_directory", "cp", "/a", "/copy")
	a.ok("cp", "-r", "/a", "/copy")
	equal(t, "copied content", a.cat("/copy/b/c/file.txt"), "hello")
	a.into(&st, "stat", "/copy/run.sh")
	equal(t, "copy keeps mode", st.Mode, wire.FileMode(0o755))
	a.ok("cp", "/a/run.sh", "/d") // into a directory
	equalSlice(t, "cp into dir", a.ls("/d"), []string{"run.sh"})
	a.ok("mv", "/copy/b/c/file.txt", "/moved.txt")
	equal(t, "moved", a.cat("/moved.txt"), "hello")
	a.fail(1, "not_found", "stat", "/copy/b/c/file.txt")
	a.ok("mv", "/moved.txt", "/d")
	equalSlice(t, "mv into dir", a.ls("/d"), []string{"moved.txt", "run.sh"})

	// rm, rm -r, rm -f.
	a.fail(1, "directory_not_empty", "rm", "/copy")
	a.ok("rm", "-r", "/copy")
	a.fail(1, "not_found", "stat", "/copy")
	a.fail(1, "not_found", "rm", "/copy")
	a.ok("rm", "-f", "/copy", "/also-missing")
	a.ok("rm", "-rf", "/d")
	a.ok("rm", "/a/b/link") // removes the link, not its target
	equal(t, "target survives", a.cat("/a/b/c/file.txt"), "hello")
	equalSlice(t, "ls / at the end", a.ls(), []string{"a", "private"})
	a.fail(1, "invalid_path", "stat", "relative/../../x")
}

func TestImportExport(t *testing.T) {
	a := newAVFS(t)
	src := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(src, "proj", "sub"), 0o750))
	must(os.WriteFile(filepath.Join(src, "proj", "run.sh"), []byte("#!/bin/sh\n"), 0o755))
	must(os.WriteFile(filepath.Join(src, "proj", "sub", "data.bin"), []byte{0, 1, 2, 255}, 0o640))
	must(os.Symlink("sub/data.bin", filepath.Join(src, "proj", "rel-link")))
	outside := filepath.Join(src, "secret.txt")
	must(os.WriteFile(outside, []byte("do not import"), 0o600))
	must(os.Symlink(outside, filepath.Join(src, "proj", "escape")))
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	must(os.Chtimes(filepath.Join(src, "proj", "run.sh"), mtime, mtime))

	var res struct {
		Files    int64 `json:"files"`
		Dirs     int64 `json:"dirs"`
		Symlinks int64 `json:"symlinks"`
		Bytes    int64 `json:"bytes"`
	}
	a.into(&res, "import", filepath.Join(src, "proj"), "/proj")
	equal(t, "imported files", res.Files, int64(2))
	equal(t, "imported symlinks", res.Symlinks, int64(2))
	var st entry
	a.into(&st, "stat", "/proj/run.sh")
	equal(t, "mode kept", st.Mode, wire.FileMode(0o755))
	if mt, err := time.Parse(time.RFC3339Nano, st.Mtime); err != nil || !mt.Equal(mtime) {
		t.Fatalf("mtime: %s (%v)", st.Mtime, err)
	}
	a.into(&st, "stat", "/proj/sub")
	equal(t, "dir mode kept", st.Mode, wire.FileMode(0o750))
	a.into(&st, "stat", "/proj/escape")
	equal(t, "outside link is a link", st.Kind, "symlink")
	equal(t, "outside link target", st.Target, outside)
	a.into(&st, "stat", "/proj/rel-link")
	equal(t, "relative link", st.Target, "sub/data.bin")
	equal(t, "binary content", a.cat("/proj/sub/data.bin"), "\x00\x01\x02\xff")
	a.fail(1, "host_io", "import", filepath.Join(src, "missing"), "/m")

	dst := filepath.Join(t.TempDir(), "out")
	a.ok("export", "/proj", dst)
	fi, err := os.Stat(filepath.Join(dst, "run.sh"))
	must(err)
	equal(t, "exported mode", fi.Mode().Perm(), os.FileMode(0o755))
	if !fi.ModTime().Equal(mtime) {
		t.Fatalf("exported mtime %v, want %v", fi.ModTime(), mtime)
	}
	link, err := os.Readlink(filepath.Join(dst, "escape"))
	must(err)
	equal(t, "exported link", link, outside)
	link, err = os.Readlink(filepath.Join(dst, "rel-link"))
	must(err)
	equal(t, "exported relative link", link, "sub/data.bin")
	b, err := os.ReadFile(filepath.Join(dst, "sub", "data.bin"))
	must(err)
	equal(t, "exported content", string(b), "\x00\x01\x02\xff")

	// Refuses to overwrite without --force, both flag positions work with it.
	a.write("changed", "/proj/run.sh")
	a.fail(1, "already_exists", "export", "/proj", dst)
	b, _ = os.ReadFile(filepath.Join(dst, "run.sh"))
	equal(t, "not overwritten", string(b), "#!/bin/sh\n")
	a.ok("export", "/proj", dst, "--force")
	b, _ = os.ReadFile(filepath.Join(dst, "run.sh"))
	equal(t, "overwritten", string(b), "changed")
	a.ok("export", "--force", "/proj/run.sh", filepath.Join(dst, "single"))
	b, _ = os.ReadFile(filepath.Join(dst, "single"))
	equal(t, "single file export", string(b), "changed")
}

// TestExportAttacks plays, through the CLI, what files written into a
// vault could do to a later `export --force`: nothing outside the
// destination changes, and setid bits are dropped unless asked for.
func TestExportAttacks(t *testing.T) {
	cases := []struct {
		name  string
		first func(a *avfs, outside string) // the vault of the first export
		then  func(a *avfs)                 // the vault of the second
		check string                        // a file the destination must hold "EVIL" in
	}{
		{
			name:  "symlink where the vault now has a directory",
			first: func(a *avfs, outside string) { a.ok("ln", "-s", outside, "/e") },
			then: func(a *avfs) {
				a.ok("rm", "/e")
				a.ok("mkdir", "/e")
				a.write("EVIL", "/e/passwd")
			},
			check: "e/passwd",
		},
		{
			name: "symlinked intermediate directory",
			first: func(a *avfs, outside string) {
				a.ok("mkdir", "/d")
				a.ok("ln", "-s", outside, "/d/sub")
			},
			then: func(a *avfs) {
				a.ok("rm", "/d/sub")
				a.ok("mkdir", "-p", "/d/sub/deeper")
				a.write("EVIL", "/d/sub/deeper/passwd")
			},
			check: "d/sub/deeper/passwd",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newAVFS(t)
			outside := t.TempDir()
			victim := filepath.Join(outside, "passwd")
			if err := os.WriteFile(victim, []byte("orig\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(t.TempDir(), "exp")
			tc.first(a, outside)
			a.ok("export", "/", dst)
			tc.then(a)
			a.ok("export", "/", dst, "--force")
			b, _ := os.ReadFile(victim)
			equal(t, "file outside the destination", string(b), "orig\n")
			ents, _ := os.ReadDir(outside)
			equal(t, "entries outside the destination", len(ents), 1)
			b, err := os.ReadFile(filepath.Join(dst, tc.check))
			if err != nil {
				t.Fatal(err)
			}
			equal(t, "exported content", string(b), "EVIL")
		})
	}

	// Setuid/setgid bits: dropped by default, kept with --preserve-setid.
	a := newAVFS(t)
	a.write("#!/bin/sh\n", "/tool")
	a.ok("chmod", "6755", "/tool")
	for _, tc := range []struct {
		flags []string
		want  os.FileMode
	}{
		{nil, 0o755},
		{[]string{"--preserve-setid"}, 0o755 | os.ModeSetuid | os.ModeSetgid},
	} {
		dst := filepath.Join(t.TempDir(), "out")
		a.ok(append([]string{"export", "/tool", dst}, tc.flags...)...)
		fi, err := os.Lstat(dst)
		if err != nil {
			t.Fatal(err)
		}
		equal(t, fmt.Sprintf("mode exported with %q", tc.flags), fi.Mode(), tc.want)
	}
}

func TestCheckpoints(t *testing.T) {
	a := newAVFS(t)
	a.write("one", "/keep.txt")
	a.write("0123456789", "/mod.txt")
	a.write("bye", "/gone.txt")
	var cp struct {
		ID          int64  `json:"id"`
		Name        string `json:"name"`
		Description string `json:"description"`
		Files       int64  `json:"files"`
	}
	a.into(&cp, "checkpoint", "save", "first", "-m", "before changes")
	equal(t, "name", cp.Name, "first")
	equal(t, "description", cp.Description, "before changes")
	equal(t, "files", cp.Files, int64(3))
	firstID := cp.ID
	a.fail(1, "already_exists", "checkpoint", "save", "first")
	a.fail(1, "invalid_input", "checkpoint", "save", "123")

	a.write("0123456789ab", "/mod.txt")
	a.ok("rm", "/gone.txt")
	a.write("new!", "/new.txt")
	a.into(&cp, "checkpoint", "save") // unnamed
	secondID := cp.ID

	var diff struct {
		From    string `json:"from"`
		To      string `json:"to"`
		Changes []struct {
			Path       string `json:"path"`
			Op         string `json:"op"`
			SizeBefore *int64 `json:"size_before"`
			SizeAfter  *int64 `json:"size_after"`
		} `json:"changes"`
	}
	a.into(&diff, "checkpoint", "diff", "first", fmt.Sprint(secondID))
	got := map[string]string{}
	for _, c := range diff.Changes {
		got[c.Path] = c.Op
	}
	want := map[string]string{"/mod.txt": "modified", "/gone.txt": "deleted", "/new.txt": "added"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("diff: got %v, want %v", got, want)
	}
	r := a.exec(nil, "checkpoint", "diff", "first")
	out := string(r.stdout)
	for _, line := range []string{"A /new.txt (4 B)", "M /mod.txt (10 B -> 12 B)", "D /gone.txt"} {
		if !strings.Contains(out, line+"\n") {
			t.Fatalf("human diff lacks %q:\n%s", line, out)
		}
	}

	var list struct {
		Vault       string `json:"vault"`
		Checkpoints []struct {
			ID   int64  `json:"id"`
			Name string `json:"name"`
		} `json:"checkpoints"`
	}
	a.into(&list, "checkpoint", "list")
	equal(t, "list vault", list.Vault, "default")
	equal(t, "checkpoints", len(list.Checkpoints), 2)

	doc := a.ok("checkpoint", "restore", "first")
	if ch, _ := doc["changes"].([]any); len(ch) != 3 {
		t.Fatalf("restore changes: %v", doc)
	}
	equalSlice(t, "restored", a.ls(), []string{"gone.txt", "keep.txt", "mod.txt"})
	equal(t, "restored content", a.cat("/mod.txt"), "0123456789")
	// Later checkpoints stay restorable.
	a.ok("checkpoint", "restore", fmt.Sprint(secondID))
	equalSlice(t, "restored second", a.ls(), []string{"keep.txt", "mod.txt", "new.txt"})

	a.ok("checkpoint", "delete", fmt.Sprint(firstID))
	a.fail(1, "checkpoint_not_found", "checkpoint", "restore", "first")
	a.fail(1, "checkpoint_not_found", "checkpoint", "delete", "first")
	a.fail(1, "checkpoint_not_found", "checkpoint", "diff", "nope")
	a.fail(2, "usage", "checkpoint", "restore")
	a.fail(2, "usage", "checkpoint", "diff")
	a.into(&list, "checkpoint", "list")
	equal(t, "checkpoints after delete", len(list.Checkpoints), 1)

	// Old checkpoints go in bulk: all but the newest N, or those older
	// than an age; the newest stays restorable.
	for i := range 3 {
		a.write(fmt.Sprint(i), "/mod.txt")
		a.ok("checkpoint", "save", fmt.Sprintf("bulk%d", i))
	}
	doc = a.ok("checkpoint", "delete", "--keep", "2")
	if d, _ := doc["deleted"].([]any); len(d) != 2 {
		t.Fatalf("delete --keep 2: %v", doc)
	}
	a.into(&list, "checkpoint", "list")
	equal(t, "checkpoints after --keep 2", len(list.Checkpoints), 2)
	equal(t, "newest kept", list.Checkpoints[1].Name, "bulk2")
	doc = a.ok("checkpoint", "delete", "--older-than", "1h")
	if d, _ := doc["deleted"].([]any); len(d) != 0 {
		t.Fatalf("delete --older-than 1h: %v", doc)
	}
	a.fail(2, "usage", "checkpoint", "delete", "--keep", "1", "bulk2")
	a.fail(2, "usage", "checkpoint", "delete", "--keep", "-3")
	a.ok("checkpoint", "restore", "bulk2")
	equal(t, "restored bulk2", a.cat("/mod.txt"), "2")
	a.ok("vault", "check")
}

func TestHistory(t *testing.T) {
	a := newAVFS(t)
	a.write("v1", "/f")
	a.write("v2", "/f")
	a.write("v3", "/f")
	var lg struct {
		Path     string `json:"path"`
		Versions []struct {
			N    int64  `json:"version"`
			Op   string `json:"op"`
			Size int64  `json:"size"`
		} `json:"versions"`
	}
	a.into(&lg, "log", "/f")
	equal(t, "versions", len(lg.Versions), 3)
	for _, v := range lg.Versions {
		equal(t, fmt.Sprintf("version %d size", v.N), v.Size, int64(2))
	}
	equal(t, "cat --version 1", a.cat("/f", "--version", "1"), "v1")
	equal(t, "cat --version 2 first", a.cat("--version", "2", "/f"), "v2")
	a.fail(1, "version_not_found", "cat", "/f", "--version", "99")

	var ver struct {
		N int64 `json:"version"`
	}
	a.into(&ver, "revert", "/f") // to the one before the latest
	equal(t, "after revert", a.cat("/f"), "v2")
	a.into(&ver, "revert", "/f", "--to", "1")
	equal(t, "after second revert", a.cat("/f"), "v1")
	a.fail(1, "version_not_found", "revert", "/f", "--to", "42")
	a.fail(2, "usage", "revert", "/f", "--to", "0")
	a.into(&lg, "log", "/f")
	equal(t, "versions after reverts", len(lg.Versions), 5)

	// A deleted file can be reverted back.
	a.ok("rm", "/f")
	a.ok("revert", "/f")
	equal(t, "undeleted", a.cat("/f"), "v1")

	var pr struct {
		Removed int64 `json:"versions_removed"`
	}
	a.into(&pr, "prune", "--keep", "2")
	if pr.Removed < 1 {
		t.Fatalf("prune removed nothing")
	}
	a.into(&lg, "log", "/f")
	equal(t, "versions after prune", len(lg.Versions), 2)
	a.fail(2, "usage", "prune")
	a.fail(1, "invalid_input", "prune", "--keep", "0")
	a.fail(1, "not_found", "log", "/never")
	a.ok("gc")
	equal(t, "content after prune and gc", a.cat("/f"), "v1")
}

func TestQuota(t *testing.T) {
	a := newAVFS(t)
	doc := a.ok("quota", "show")
	q, _ := doc["quota"].(map[string]any)
	equal(t, "no quota", q["max_size_mb"], any(float64(0)))

	a.ok("quota", "set", "--max-size-mb", "1", "--max-files", "3")
	i := a.info()
	equal(t, "max size", i.Quota.MaxSizeMB, int64(1))
	equal(t, "max files", i.Quota.MaxFiles, int64(3))
	equal(t, "max file size untouched", i.Quota.MaxFileSizeMB, int64(0))
	a.write("small", "/small")
	before := a.info()

	big := bytes.Repeat([]byte("x"), 2<<20)
	a.failIn(big, 1, "quota_exceeded", "write", "/big")
	a.failIn(big, 1, "quota_exceeded", "write", "/small", "--append")
	after := a.info()
	equal(t, "files unchanged", after.Files, before.Files)
	equal(t, "bytes unchanged", after.Bytes, before.Bytes)
	equal(t, "content unchanged", a.cat("/small"), "small")
	a.fail(1, "not_found", "stat", "/big")

	a.write("2", "/two")
	a.write("3", "/three")
	a.failIn([]byte("4"), 1, "quota_exceeded", "write", "/four")
	a.fail(1, "quota_exceeded", "mkdir", "/dir")

	a.ok("quota", "set", "--max-files", "0", "--max-file-size-mb", "1")
	a.failIn(big[:(1<<20)+1], 1, "quota_exceeded", "write", "/four")
	a.ok("quota", "clear")
	a.okIn(big, "write", "/big")
	equal(t, "quota cleared", a.info().Quota.MaxSizeMB, int64(0))
	a.fail(2, "usage", "quota", "set")
	a.fail(1, "invalid_input", "quota", "set", "--max-files", "-1")
	a.fail(2, "usage", "quota", "set", "--max-files", "many")
	a.fail(2, "usage", "quota", "bogus")
}

func TestAudit(t *testing.T) {
	a := newAVFS(t)
	a.write("hello", "/f")
	a.ok("chmod", "0600", "/f")
	a.ok("checkpoint", "save", "cp1")
	var au struct {
		Vault   string `json:"vault"`
		Entries []struct {
			ID    int64  `json:"id"`
			Op    string `json:"op"`
			Path  string `json:"path"`
			Actor string `json:"actor"`
		} `json:"entries"`
	}
	a.into(&au, "audit")
	ops := []string{}
	for _, e := range au.Entries {
		ops = append(ops, e.Op)
		if !strings.HasPrefix(e.Actor, "cli:") {
			t.Fatalf("actor %q", e.Actor)
		}
	}
	if len(ops) < 4 || ops[0] != "vault.create" {
		t.Fatalf("audit ops: %v", ops)
	}
	a.into(&au, "audit", "--limit", "2")
	equal(t, "limit", len(au.Entries), 2)
	equal(t, "limit keeps the newest", au.Entries[1].ID, int64(len(ops)))
	a.into(&au, "audit", "--since", "1h")
	equal(t, "since 1h", len(au.Entries), len(ops))
	a.into(&au, "audit", "--since", time.Now().Add(time.Hour).Format(time.RFC3339))
	equal(t, "since the future", len(au.Entries), 0)
	a.into(&au, "audit", "--since", "2000-01-01T00:00:00Z")
	equal(t, "since 2000", len(au.Entries), len(ops))
	a.fail(2, "usage", "audit", "--since", "yesterday")

	doc := a.ok("audit", "verify")
	equal(t, "verify ok", doc["ok"], any(true))

	// Edit one row: verify fails with the problem in the error details.
	db := openDB(t, filepath.Join(a.home, "vaults", "default.avfs"))
	if _, err := db.Exec("UPDATE audit SET path = '/tampered' WHERE id = 2"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	eo := a.fail(1, "integrity_failed", "audit", "verify")
	probs, _ := eo["problems"].([]any)
	if len(probs) == 0 || !strings.Contains(fmt.Sprint(probs), "2") {
		t.Fatalf("verify problems: %v", eo)
	}
	a.fail(1, "integrity_failed", "vault", "check")
}

func TestErrorDocuments(t *testing.T) {
	a := newAVFS(t)
	a.ok("vault", "create", "v")
	for _, tc := range []struct {
		args []string
		exit int
		code string
	}{
		{[]string{"ls", "--vault", "missing"}, 1, "vault_not_found"},
		{[]string{"vault", "info", "missing"}, 1, "vault_not_found"},
		{[]string{"vault", "use", "missing"}, 1, "vault_not_found"},
		{[]string{"ls", "--vault", "bad/name"}, 1, "invalid_input"},
		{[]string{"vault", "create", "-bad"}, 2, "usage"}, // reads as a flag
		{[]string{"vault", "create", "bad.name"}, 1, "invalid_input"},
		{[]string{"vault", "create", strings.Repeat("x", 65)}, 1, "invalid_input"},
		{[]string{"nosuchcommand"}, 2, "usage"},
		{[]string{"vault", "nosuch"}, 2, "usage"},
		{[]string{"vault"}, 2, "usage"},
		{[]string{"checkpoint"}, 2, "usage"},
		{[]string{"quota"}, 2, "usage"},
		{[]string{"ls", "--bogus"}, 2, "usage"},
		{[]string{"ls", "/", "/extra"}, 2, "usage"},
		{[]string{"cat"}, 2, "usage"},
		{[]string{"write"}, 2, "usage"},
		{[]string{"mkdir"}, 2, "usage"},
		{[]string{"rm"}, 2, "usage"},
		{[]string{"cp", "/a"}, 2, "usage"},
		{[]string{"mv", "/a"}, 2, "usage"},
		{[]string{"ln", "-s", "/a"}, 2, "usage"},
		{[]string{"chmod", "0644"}, 2, "usage"},
		{[]string{"stat"}, 2, "usage"},
		{[]string{"import", "/tmp"}, 2, "usage"},
		{[]string{"export", "/"}, 2, "usage"},
		{[]string{"log"}, 2, "usage"},
		{[]string{"revert"}, 2, "usage"},
		{[]string{"vault", "create"}, 2, "usage"},
		{[]string{"vault", "use"}, 2, "usage"},
		{[]string{"vault", "delete"}, 2, "usage"},
		{[]string{"vault", "fork"}, 2, "usage"},
		{[]string{"vault", "detach"}, 2, "usage"},
		{[]string{"cat", "/f", "--version", "x"}, 2, "usage"},
		{[]string{"audit", "--limit", "-1"}, 2, "usage"},
		{[]string{"audit", "extra"}, 2, "usage"},
		{[]string{"stat", "/missing"}, 1, "not_found"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			a := &avfs{t: t, home: a.home}
			a.fail(tc.exit, tc.code, tc.args...)
			// Without --json: nothing on stdout, one line on stderr, same exit.
			r := a.exec(nil, tc.args...)
			equal(t, "exit without --json", r.code, tc.exit)
			if !strings.HasPrefix(string(r.stderr), "avfs: ") {
				t.Fatalf("stderr: %q", r.stderr)
			}
		})
	}
	// AVFS_VAULT selects a vault too.
	cmd := exec.Command(avfsBin, "ls", "--json")
	cmd.Env = append(os.Environ(), "AVFS_HOME="+a.home, "AVFS_VAULT=missing")
	out, err := cmd.Output()
	if err == nil || !strings.Contains(string(out), "vault_not_found") {
		t.Fatalf("AVFS_VAULT=missing: %v %s", err, out)
	}
}

func TestHelp(t *testing.T) {
	a := newAVFS(t)
	for _, args := range [][]string{
		{"--help"}, {"vault", "--help"}, {"checkpoint", "--help"}, {"quota", "--help"},
		{"vault", "create"}, {"vault", "list"}, {"vault", "use"}, {"vault", "info"}, {"vault", "delete"},
		{"vault", "fork"}, {"vault", "detach"}, {"vault", "check"}, {"vault", "gc"},
		{"checkpoint", "save"}, {"checkpoint", "list"}, {"checkpoint", "restore"}, {"checkpoint", "delete"}, {"checkpoint", "diff"},
		{"ls"}, {"tree"}, {"cat"}, {"write"}, {"mkdir"}, {"rm"}, {"cp"}, {"mv"}, {"ln"}, {"chmod"}, {"stat"},
		{"import"}, {"export"}, {"log"}, {"revert"}, {"prune"}, {"gc"},
		{"quota", "show"}, {"quota", "set"}, {"quota", "clear"}, {"audit"}, {"audit", "verify"}, {"version"},
	} {
		if args[len(args)-1] != "--help" {
			args = append(args, "--help")
		}
		r := a.exec(nil, args...)
		if r.code != 0 || !strings.Contains(string(r.stdout), "USAGE") {
			t.Errorf("avfs %q: exit %d: %s %s", args, r.code, r.stdout, r.stderr)
		}
		if len(args) > 2 && !strings.Contains(string(r.stdout), "example: avfs") {
			t.Errorf("avfs %q: no example in help:\n%s", args, r.stdout)
		}
	}
	// Help does not create the default vault.
	if _, err := os.Stat(filepath.Join(a.home, "vaults", "default.avfs")); err == nil {
		t.Errorf("help created the default vault")
	}
}

// Named pipes and socket nodes go in and out with import and export, and
// show as such.
func TestSpecialFilesCommands(t *testing.T) {
	a := newAVFS(t)
	src := t.TempDir()
	if err := unix.Mkfifo(filepath.Join(src, "pipe"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(src, "sock"), unix.S_IFSOCK|0o600, 0); err != nil {
		t.Fatal(err)
	}
	res := a.ok("import", src, "/s")
	if res["special"] != float64(2) {
		t.Fatalf("import: %v", res)
	}
	var st struct {
		Kind string `json:"kind"`
	}
	a.into(&st, "stat", "/s/pipe")
	equal(t, "kind", st.Kind, "fifo")
	r := a.exec(nil, "ls", "-l", "/s")
	if out := string(r.stdout); !strings.Contains(out, "prw-r-----") || !strings.Contains(out, "srw-------") {
		t.Errorf("ls -l: %s", out)
	}
	r = a.exec(nil, "tree", "/s")
	if out := string(r.stdout); !strings.Contains(out, "pipe|") || !strings.Contains(out, "sock=") {
		t.Errorf("tree: %s", out)
	}
	a.fail(1, "invalid_input", "cat", "/s/pipe")
	out := filepath.Join(t.TempDir(), "out")
	a.ok("export", "/s", out)
	for name, mode := range map[string]os.FileMode{"pipe": os.ModeNamedPipe | 0o640, "sock": os.ModeSocket | 0o600} {
		if fi, err := os.Lstat(filepath.Join(out, name)); err != nil || fi.Mode() != mode {
			t.Errorf("exported %s: %v %v", name, fi, err)
		}
	}
}

// TestArgumentsNamedHelp: "h" and "help" are arguments of a command without
// subcommands (a vault, a path), not requests for help.
func TestArgumentsNamedHelp(t *testing.T) {
	a := newAVFS(t)
	a.ok("vault", "create", "h")
	a.ok("vault", "create", "help")
	names := map[string]bool{}
	var list struct {
		Vaults []struct {
			Name string `json:"name"`
		} `json:"vaults"`
	}
	a.into(&list, "vault", "list")
	for _, v := range list.Vaults {
		names[v.Name] = true
	}
	if !names["h"] || !names["help"] {
		t.Fatalf("vaults %v: want h and help", names)
	}
	a.write("x", "/h")
	a.fail(1, "not_found", "cat", "help")
	if r := a.exec(nil, "ls", "--help"); r.code != 0 || !strings.Contains(string(r.stdout), "avfs ls") {
		t.Fatalf("ls --help: %d %q", r.code, r.stdout)
	}
}
