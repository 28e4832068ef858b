package main

import (
	"encoding/base64"
	"encoding/json"
	"sort"
	"testing"

	"avfs/wire"
)

// The two names of issue #14: they differ only in bytes that are not UTF-8,
// so both print as "/\ufffd\ufffd.txt".
var rawNames = []struct{ path, content string }{
	{"/\xff\xfe.txt", "one\n"},
	{"/\xfe\xff.txt", "two\n"},
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// rawEntry is an entry of ls --json with its companion fields.
type rawEntry struct {
	Path      string `json:"path"`
	PathB64   string `json:"path_b64"`
	Name      string `json:"name"`
	NameB64   string `json:"name_b64"`
	Target    string `json:"target"`
	TargetB64 string `json:"target_b64"`
}

// exact is the path a document names: its path_b64 when present, else its path.
func exact(t *testing.T, path, pathB64 string) string {
	t.Helper()
	if pathB64 == "" {
		return path
	}
	b, err := base64.StdEncoding.DecodeString(pathB64)
	if err != nil {
		t.Fatalf("path_b64 %q: %v", pathB64, err)
	}
	return string(b)
}

// checkRawNamesCLI checks what the CLI makes of the files of rawNames,
// already in a's vault: every document tells them apart, and each is
// reached by its raw bytes in argv and by --path-b64.
func checkRawNamesCLI(t *testing.T, a *avfs) {
	t.Helper()
	var l struct {
		Path    string     `json:"path"`
		Entries []rawEntry `json:"entries"`
	}
	a.into(&l, "ls", "/")
	got := map[string]bool{}
	for _, e := range l.Entries {
		if e.PathB64 != "" {
			equal(t, "name_b64 of "+e.PathB64, exact(t, e.Name, e.NameB64), exact(t, e.Path, e.PathB64)[1:])
			equal(t, "path of "+e.PathB64, e.Path, "/\ufffd\ufffd.txt")
		}
		got[exact(t, e.Path, e.PathB64)] = true
	}
	for _, f := range rawNames {
		if !got[f.path] {
			t.Fatalf("ls --json: %q missing: %+v", f.path, l.Entries)
		}
		// Raw bytes in argv, and --path-b64 (anywhere on the line).
		equal(t, "cat raw "+b64(f.path), a.cat(f.path), f.content)
		equal(t, "cat --path-b64 "+b64(f.path), a.cat("--path-b64", b64(f.path)), f.content)
		equal(t, "cat b64 flag last", string(a.exec(nil, "cat", b64(f.path), "--path-b64").stdout), f.content)
		var cat wire.CatResult
		a.into(&cat, "--path-b64", "cat", b64(f.path))
		equal(t, "cat --json path_b64", cat.PathB64, b64(f.path))
		equal(t, "cat --json content", cat.ContentBase64, b64(f.content))
		var st rawEntry
		a.into(&st, "stat", f.path)
		equal(t, "stat path_b64", st.PathB64, b64(f.path))
		equal(t, "stat name_b64", st.NameB64, b64(f.path[1:]))
		var lg struct {
			PathB64  string `json:"path_b64"`
			Versions []struct {
				PathB64 string `json:"path_b64"`
			} `json:"versions"`
		}
		a.into(&lg, "--path-b64", "log", b64(f.path))
		if lg.PathB64 != b64(f.path) || len(lg.Versions) == 0 || lg.Versions[0].PathB64 != b64(f.path) {
			t.Fatalf("log: %+v", lg)
		}
	}
	var fr wire.FindResult
	a.into(&fr, "find", "/", "-name", "*.txt")
	var found []string
	for _, m := range fr.Matches {
		found = append(found, exact(t, m.Path, m.PathB64))
	}
	sort.Strings(found)
	equalSlice(t, "find", found, []string{"/\xfe\xff.txt", "/\xff\xfe.txt"})
	var gr wire.GrepResult
	a.into(&gr, "grep", "-name", "*.txt", "o", "/")
	found = nil
	for _, m := range gr.Matches {
		found = append(found, exact(t, m.Path, m.PathB64)+":"+m.Text)
	}
	sort.Strings(found)
	equalSlice(t, "grep", found, []string{"/\xfe\xff.txt:two", "/\xff\xfe.txt:one"})

	// Errors carry the bytes too; a bad --path-b64 argument is invalid_input.
	missing := "/\xff\xff.txt"
	eo := a.fail(1, "not_found", "cat", missing)
	equal(t, "error path_b64", eo["path_b64"], any(b64(missing)))
	eo = a.fail(1, "not_found", "--path-b64", "stat", b64(missing))
	equal(t, "error path_b64 (--path-b64)", eo["path_b64"], any(b64(missing)))
	a.fail(1, "invalid_input", "--path-b64", "cat", "/\xff\xfe.txt")
	a.fail(1, "invalid_input", "--path-b64", "cat", "L//+LnR4dA")
}

// Files whose names are not UTF-8, made with the CLI (raw argv and
// --path-b64): every document tells them apart and every command reaches them.
func TestRawNamesCLI(t *testing.T) {
	t.Parallel()
	a := newAVFS(t)
	a.ok("checkpoint", "save", "before")
	a.write(rawNames[0].content, rawNames[0].path)
	a.write(rawNames[1].content, "--path-b64", b64(rawNames[1].path))
	checkRawNamesCLI(t, a)

	var d struct {
		Changes []wire.Change `json:"changes"`
	}
	a.into(&d, "checkpoint", "diff", "before")
	if len(d.Changes) != 2 || d.Changes[0].PathB64 != b64(rawNames[1].path) || d.Changes[1].PathB64 != b64(rawNames[0].path) {
		t.Fatalf("checkpoint diff: %+v", d.Changes)
	}

	// Commands with several paths, and ln's target.
	a.ok("--path-b64", "cp", b64(rawNames[0].path), b64("/copy\x80"))
	equal(t, "cp", a.cat("/copy\x80"), "one\n")
	a.ok("mv", "/copy\x80", "/moved\x81")
	a.ok("--path-b64", "ln", "-s", b64("moved\x81"), b64("/link\x82"))
	var ln rawEntry
	a.into(&ln, "stat", "/link\x82")
	equal(t, "link target_b64", ln.TargetB64, b64("moved\x81"))
	equal(t, "through the link", a.cat("/link\x82"), "one\n")
	var rm struct {
		Removed []struct {
			PathB64 string `json:"path_b64"`
		} `json:"removed"`
	}
	a.into(&rm, "--path-b64", "rm", b64("/moved\x81"), b64("/link\x82"))
	if len(rm.Removed) != 2 || rm.Removed[0].PathB64 != b64("/moved\x81") {
		t.Fatalf("rm: %+v", rm)
	}
	var audit struct {
		Entries []struct {
			Op      string         `json:"op"`
			PathB64 string         `json:"path_b64"`
			Details map[string]any `json:"details"`
		} `json:"entries"`
	}
	a.into(&audit, "audit")
	moved := false
	for _, e := range audit.Entries {
		if e.Op == "move" {
			moved = e.PathB64 == b64("/copy\x80") && e.Details["to_b64"] == b64("/moved\x81")
		}
	}
	if !moved {
		t.Fatalf("audit has no move with path_b64 and to_b64: %+v", audit)
	}
	a.vaultOK()
}

// The same files made by a command through the mount (and through a
// materialized copy) in a proxy exec run: the envelope's changes list
// both, each with its path_b64.
func TestRawNamesProxy(t *testing.T) {
	t.Parallel()
	eachMode(t, func(t *testing.T, mode string) {
		a := newProxyAVFS(t)
		// What the policy sees is `sh mk.sh` (argv stays UTF-8); the script
		// makes the names.
		a.write(`printf 'one\n' > "$(printf '\377\376').txt"; printf 'two\n' > "$(printf '\376\377').txt"`+"\n", "/mk.sh")
		r := a.proxy([]string{"--mount-mode", mode}, "sh", "mk.sh")
		r.ok(t, wire.AllowWithCheckpoint)
		var raw struct {
			Changes []map[string]any `json:"changes"`
		}
		if err := json.Unmarshal(r.raw, &raw); err != nil {
			t.Fatal(err)
		}
		if len(r.env.Changes) != 2 {
			t.Fatalf("changes: %s", r.raw)
		}
		for i, want := range []string{rawNames[1].path, rawNames[0].path} { // by path: \xfe before \xff
			c := r.env.Changes[i]
			equal(t, "change path", c.Path, "/\ufffd\ufffd.txt")
			equal(t, "change path_b64", c.PathB64, b64(want))
			equal(t, "change op", c.Op, "added")
			equal(t, "JSON path_b64", raw.Changes[i]["path_b64"], any(b64(want)))
		}
		checkRawNamesCLI(t, a)
		// The command sees them byte for byte too.
		a.write(`cat "$(printf '\377\376').txt" "$(printf '\376\377').txt"`+"\n", "/show.sh")
		equal(t, "cat in the run", a.proxy([]string{"--mount-mode", mode}, "sh", "show.sh").stdout(t), "one\ntwo\n")
		a.vaultOK()
	})
}
