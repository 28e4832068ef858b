package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"avfs/wire"
)

// fuzzSeeds are commands that reach every part of the parser. In argv mode
// the words are separated by NUL bytes.
var fuzzSeeds = []string{
	"ls",
	"git status",
	"rm -rf ../../x ~/.ssh $HOME/a /etc/passwd ./b c/d",
	"sudo -u root env -i FOO=1 -C /tmp timeout -s KILL 5 nice -n 5 nohup stdbuf -oL time -p curl -sSL --out=/tmp/x https://x",
	"env -S 'python3 -u' -- x.py",
	"xargs -0 -I {} -P4 -n1 sh -c 'rm {}'",
	"busybox sh -c 'wget x | sh'",
	"flock /tmp/l -c 'cat a > b'",
	"find . -name *.o -exec rm {} ; -execdir sh -c 'x' +",
	"bash -xec 'curl x | sh; eval \"rm -rf /\"'",
	"curl x | sh",
	"wget -O- x | bash",
	"bash <(curl x)",
	"python -c \"$(curl x)\"",
	":(){ :|:& };:",
	"f() { rm -rf ./x; }; f; (cd /etc && cat passwd) | tee >(gzip > o.gz) 2>&1",
	"if a; then b; elif c; then d; else e; fi; while f; do g; done; for i in $(h); do j; done; case $k in l) m;; esac",
	"cat <<EOF > out\n$(id) ${x:-$(y)}\nEOF\necho `date` $((1+$(z)))",
	"export PATH=/x:$PATH; declare -a a=(1 2); let x=1; [[ -f $(q) ]]; time -p sleep 1; coproc cat",
	"trap 'rm -rf ./t' EXIT; source <(curl x); . ./env.sh; sh <<< \"$(curl y)\"",
	"$'\\x72\\x6d' -rf \"a b\" a\\ b '$x' ~bob/x file:///etc/shadow git@h:x",
	"echo 'unterminated",
	"bash <<'EOF'\nrm -rf /x\nEOF\nsh <<< 'id'; alias x='rm -rf /'; cat {..,..}/etc .*/x; source /dev/stdin",
	"p=curl; d=/etc; $p $d/x; X=1 cat $X; (q=1); if a; then p=1; elif b; then :; else p=2; fi; a && p=3; case x in a) p=4;& b) $p;; esac",
	"for f in *.md a{b,c} {1..3}; do cat \"$f\" $f; \"$f\"; done; while read -r l; do ((n++)); : ${z:=1} $((y=2)); done; readonly r=1; local l=2",
	"f(){ local v=1; f & f; }; f; trap 'p=1' DEBUG; declare -l u; export -f f; IFS=,; echo ${IFS}",
	"echo -e 'curl x\\nsh' | sh; printf '%s\\n' 'rm -rf /' | sh -s; cat <<'E' | cat | bash\nls\nE\ncurl x | tee >(sh) > >(bash -s); ls | xargs -I{} sh -c '{}'",
	"/usr/bin/wge? x; /bin/c[!u]t y; {wget,-q,x}; x=$(a); ./ru* z",
}

// FuzzParse checks that Parse never panics, never takes long, and always
// returns a document that keeps its invariants. mode picks argv (false,
// words split on NUL) or shell (true) input.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(false, strings.ReplaceAll(s, " ", "\x00"))
		f.Add(true, s)
	}
	f.Fuzz(func(t *testing.T, shellMode bool, s string) {
		req := ParseRequest{Cwd: "/src", PathEnv: "/nonexistent"}
		if shellMode {
			req.Shell = s
		} else {
			req.Argv = strings.Split(s, "\x00")
		}
		// Every input is parsed without a sandbox and in one: the view
		// changes what paths name, never whether parsing succeeds.
		for _, sb := range []wire.SandboxInput{{}, nsSandbox("/root")} {
			req.Sandbox = sb
			fuzzOne(t, req, shellMode, s)
		}
	})
}

// fuzzOne parses req (made from s) and checks the document.
func fuzzOne(t *testing.T, req ParseRequest, shellMode bool, s string) {
	t.Helper()
	// A hang would stall the fuzzer silently: crash instead, so the
	// input is saved as a failure.
	watchdog := time.AfterFunc(10*time.Second, func() {
		panic(fmt.Sprintf("Parse(%q) still running after 10s", s))
	})
	start := time.Now()
	in, err := Parse(context.Background(), req)
	watchdog.Stop()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Parse took %v", d)
	}
	if err != nil {
		var we *wire.Error
		if !errors.As(err, &we) || we.Code != wire.CodeInvalidInput {
			t.Fatalf("error %#v is not an invalid_input *wire.Error", err)
		}
		return
	}
	checkInputInvariants(t, in, !shellMode)
	if shellMode && in.Script == nil {
		t.Fatalf("shell mode gave no script")
	}
	if !shellMode && in.Command.Origin == originArgv && len(in.Command.Argv) == 0 {
		t.Fatalf("argv mode gave an empty command")
	}
}
