package engine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"avfs/sandbox"
	"avfs/wire"
)

// corpusDir holds the decision corpus (docs/policy.md, "The decision
// corpus"): JSON lines files of commands and the decision the default
// policy must give them.
const corpusDir = "../tests/corpus"

// corpusPending is the corpus file of cases the default policy does not
// decide yet (they need parser work); they are run and counted, not failed.
const corpusPending = "pending.jsonl"

// corpusCase is one line of a corpus file: exactly one of Command (an argv)
// and Shell (a --shell script), the decision the default policy must give,
// the class of command it belongs to and the principle of docs/policy.md
// that decides it. Sandbox, when given, is the mode the command is held
// in: "none" decides it as for --sandbox none; the default is namespaces.
type corpusCase struct {
	Command   []string         `json:"command,omitempty"`
	Shell     string           `json:"shell,omitempty"`
	Sandbox   wire.SandboxMode `json:"sandbox,omitempty"`
	Decision  wire.Decision    `json:"decision"`
	Category  string           `json:"category"`
	Principle string           `json:"principle"`

	file string
	line int
}

func (c corpusCase) String() string {
	if c.Shell != "" {
		return fmt.Sprintf("%s:%d %q", c.file, c.line, c.Shell)
	}
	return fmt.Sprintf("%s:%d %q", c.file, c.line, c.Command)
}

// readCorpus reads every *.jsonl file of dir. A line that is not a case
// with one command, a known decision, a category and a principle fails
// the test: a malformed case must not silently pass.
func readCorpus(t *testing.T, dir string) []corpusCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus in %s (%v)", dir, err)
	}
	var cases []corpusCase
	for _, f := range files {
		bs, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(bs))
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "//") {
				continue
			}
			c := corpusCase{file: filepath.Base(f), line: n}
			dec := json.NewDecoder(strings.NewReader(line))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&c); err != nil {
				t.Errorf("%s:%d: %v", c.file, n, err)
				continue
			}
			if (len(c.Command) == 0) == (c.Shell == "") || !c.Decision.Valid() || c.Category == "" || c.Principle == "" || c.Sandbox != "" && !c.Sandbox.Valid() {
				t.Errorf("%s:%d: a case needs one of command and shell, a decision, a category and a principle", c.file, n)
				continue
			}
			cases = append(cases, c)
		}
	}
	return cases
}

// TestCorpus decides every case of tests/corpus with the default policy,
// on the document Parse builds in the sandbox's view (the vault at
// /workspace, home /root, cwd the vault root; without a sandbox for the
// cases that say so), and fails listing every
// case whose decision differs, except those of pending.jsonl. It logs a
// score per category, "corpus: CATEGORY PASSED/TOTAL" (pending cases as
// "corpus pending: …"); run it with -v to see them.
func TestCorpus(t *testing.T) {
	p := defaultP(t)
	views := map[wire.SandboxMode]wire.SandboxInput{
		"":                     sandbox.Input(wire.SandboxNamespaces, "", sandbox.DefaultWorkspace, "/root"),
		wire.SandboxNamespaces: sandbox.Input(wire.SandboxNamespaces, "", sandbox.DefaultWorkspace, "/root"),
		wire.SandboxNone:       sandbox.Input(wire.SandboxNone, "--sandbox none", "", "/root"),
	}
	type score struct{ passed, total int }
	scores := map[string]map[string]*score{"corpus": {}, "corpus pending": {}}
	for _, c := range readCorpus(t, corpusDir) {
		in, err := Parse(context.Background(), ParseRequest{Argv: c.Command, Shell: c.Shell, Cwd: "/", PathEnv: "/nonexistent", Sandbox: views[c.Sandbox]})
		var res wire.PolicyResult
		if err == nil {
			res, err = p.Decide(context.Background(), in, DecideOptions{})
		}
		set := "corpus"
		if c.file == corpusPending {
			set = "corpus pending"
		}
		s := scores[set][c.Category]
		if s == nil {
			s = &score{}
			scores[set][c.Category] = s
		}
		s.total++
		if err == nil && res.Decision == c.Decision {
			s.passed++
			continue
		}
		if set == "corpus" {
			t.Errorf("%s: %s %v, want %s (%s) %v", c, res.Decision, reasonIDs(res.Reasons), c.Decision, c.Principle, err)
		} else {
			t.Logf("pending %s: %s %v, want %s", c, res.Decision, reasonIDs(res.Reasons), c.Decision)
		}
	}
	for _, set := range []string{"corpus", "corpus pending"} {
		cats := make([]string, 0, len(scores[set]))
		for cat := range scores[set] {
			cats = append(cats, cat)
		}
		sort.Strings(cats)
		passed, total := 0, 0
		for _, cat := range cats {
			s := scores[set][cat]
			passed, total = passed+s.passed, total+s.total
			t.Logf("%s: %s %d/%d", set, cat, s.passed, s.total)
		}
		t.Logf("%s: total %d/%d", set, passed, total)
	}
}
