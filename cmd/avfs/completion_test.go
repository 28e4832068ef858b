package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The bash script is valid and, loaded in bash, completes a command prefix
// and a flag through the binary's --generate-bash-completion.
func TestCompletionBash(t *testing.T) {
	a := newAVFS(t)
	r := a.exec(nil, "completion", "bash")
	if r.code != 0 {
		t.Fatalf("completion bash: exit %d: %s", r.code, r.stderr)
	}
	script := filepath.Join(t.TempDir(), "avfs.bash")
	if err := os.WriteFile(script, r.stdout, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("bash", "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v: %s", err, out)
	}
	for _, tc := range []struct {
		words string // COMP_WORDS after the binary
		want  string
		not   string
	}{
		{words: "chec", want: "checkpoint", not: "vault"},
		{words: "checkpoint res", want: "restore", not: "save"},
		{words: "ls --lo", want: "--long"},
		{words: "ls --", want: "--long"},
	} {
		words := strings.Fields(tc.words)
		if strings.HasSuffix(tc.words, " ") {
			words = append(words, "")
		}
		sh := `source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); _avfs_complete; printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.Command("bash", append([]string{"-c", sh, "bash", script, avfsBin}, words...)...)
		cmd.Env = append(os.Environ(), "AVFS_HOME="+a.home)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v: %s", tc.words, err, out)
		}
		got := strings.Fields(string(out))
		if !contains(got, tc.want) || (tc.not != "" && contains(got, tc.not)) {
			t.Errorf("completing %q offers %q, want %q and not %q", tc.words, got, tc.want, tc.not)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// zsh and fish scripts are printed; fish's names the commands. An unknown
// shell is a usage error.
func TestCompletionOtherShells(t *testing.T) {
	a := newAVFS(t)
	if r := a.exec(nil, "completion", "zsh"); r.code != 0 || !strings.Contains(string(r.stdout), "compdef _avfs avfs") {
		t.Errorf("zsh: exit %d: %s", r.code, r.stdout)
	}
	r := a.exec(nil, "completion", "fish")
	if r.code != 0 || !strings.Contains(string(r.stdout), "complete -c avfs") || !strings.Contains(string(r.stdout), "checkpoint") {
		t.Errorf("fish: exit %d: %s", r.code, r.stdout)
	}
	if r := a.exec(nil, "completion", "tcsh"); r.code != 2 {
		t.Errorf("tcsh: exit %d, want 2", r.code)
	}
	if path, err := exec.LookPath("fish"); err == nil {
		f := filepath.Join(t.TempDir(), "avfs.fish")
		os.WriteFile(f, r.stdout, 0o644)
		if out, err := exec.Command(path, "-n", f).CombinedOutput(); err != nil {
			t.Errorf("fish -n: %v: %s", err, out)
		}
	}
}

// `avfs help` and `avfs help COMMAND` print help.
func TestHelpCommand(t *testing.T) {
	a := newAVFS(t)
	for _, args := range [][]string{{"help"}, {"help", "ls"}, {"vault", "help"}, {"help", "checkpoint", "save"}} {
		r := a.exec(nil, args...)
		if r.code != 0 || !strings.Contains(string(r.stdout), "USAGE") {
			t.Errorf("avfs %q: exit %d: %s %s", args, r.code, r.stdout, r.stderr)
		}
	}
}

// avfs.1 is what `make man` generates from the commands of this build; the
// binary built with the urfave_cli_no_docs tag prints that file.
func TestManPageCurrent(t *testing.T) {
	want, err := manPage(newApp(&env{}))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("avfs.1")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("cmd/avfs/avfs.1 is out of date: run make man")
	}
	if !strings.Contains(want, ".TH avfs 1") || !strings.Contains(want, "checkpoint") {
		t.Errorf("man page lacks its header or commands:\n%.400s", want)
	}
	r := newAVFS(t).exec(nil, "man")
	if r.code != 0 || string(r.stdout) != want {
		t.Errorf("avfs man: exit %d, %d bytes, want the generated page", r.code, len(r.stdout))
	}
}
