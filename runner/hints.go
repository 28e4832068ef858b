package runner

import (
	"bytes"
	"fmt"
	"path"
	"slices"
	"strings"

	"avfs/engine"
	"avfs/wire"
)

// A network_off hint (wire.HintNetworkOff) tells a harness that a command
// failed because its sandbox had no network, and how to get one. It is
// given only for a run that was held in namespaces without the network
// grant, exited non-zero (or timed out), and printed one of the
// networkSymptoms near the end of its stdout or stderr. Finding it costs a
// few substring searches over at most hintScan bytes of each stream; it
// never reads anything else and never changes the run or its status.

// hintScan is how much of the end of each captured stream is searched for
// symptoms: failures are reported last, and a run that printed megabytes
// must not make the search slow.
const hintScan = 64 << 10

// networkSymptom is a piece of text that a command prints when it tried
// to reach the network and found none, and what prints it.
type networkSymptom struct {
	text string // matched as is: case matters
	by   string // what prints it, for people
}

// networkSymptoms are what commands print when they tried to reach the
// network of a sandbox that has none: a name that no DNS server could be
// asked about, a destination no route leads to, a download that could not
// start, a connection Landlock refused. A text belongs here only when,
// in a sandbox without the network, nothing but the missing network makes
// a command print it. "Connection refused" is not one (a server on the
// sandbox's own loopback that is not running says it too), nor is a bare
// "Permission denied".
var networkSymptoms = []networkSymptom{
	{"dial tcp: lookup ", "Go's resolver (the go command fetching modules, Go programs)"},
	{`Get "https://proxy.golang.org/`, "the go command fetching a module"},
	{`Get "https://sum.golang.org/`, "the go command verifying a module"},
	{"network is unreachable", "Go programs, and others that print errno's text in lower case"},
	{"Network is unreachable", "strerror(ENETUNREACH): C programs, Python, curl, ssh"},
	{"ENETUNREACH", "Node.js and npm"},
	{"EAI_AGAIN", "Node.js and npm: getaddrinfo could not ask a DNS server"},
	{"ENOTFOUND", "Node.js and npm: getaddrinfo found no address"},
	{"connect EACCES", "Node.js: a TCP connection Landlock refused"},
	{"Temporary failure in name resolution", "glibc's getaddrinfo (EAI_AGAIN): Python, pip, ssh, C programs"},
	{"Name or service not known", "glibc's getaddrinfo (EAI_NONAME)"},
	{"Could not resolve host", "curl and libcurl: git over https, cargo"},
	{"Couldn't resolve host", "libcurl's error text: cargo, git"},
	{"failed to download", "cargo fetching a crate or the registry index"},
	{"Failed to establish a new connection", "urllib3: pip, requests"},
	{"unable to resolve host address", "wget"},
}

// fetcher is a program that fetches what it needs on demand (modules,
// packages, crates) with the command that fetches it ahead of time. The
// default policy asks approval for each such command as a package install
// (avfs.approval.packages, in host_network_reasons), so that, approved,
// it runs with the host's network, and what it fetches stays for later
// runs.
type fetcher struct {
	programs []string // the programs it is for, as input commands name them
	fetch    []string // the command that fetches
	// env is a variable the fetch and later runs need so that what is
	// fetched lands where later runs find it, as NAME=PATH with PATH
	// relative to the sandbox's home; "" for none.
	env string
	// cached says that what is fetched lives in the vault's tool cache
	// (~/.cache), so that the fetch is kept only when the runner has one.
	cached bool
	kept   string // where what is fetched is kept, for people
}

// fetchers are the fetchers hints name, by program.
var fetchers = []fetcher{
	{programs: []string{"go"}, fetch: []string{"go", "mod", "download"}, cached: true,
		kept: "Go's module cache is in the vault's tool cache (~/.cache), which later runs share"},
	{programs: []string{"npm", "npx"}, fetch: []string{"npm", "install"},
		kept: "npm install writes node_modules into the vault"},
	{programs: []string{"pnpm"}, fetch: []string{"pnpm", "install"},
		kept: "pnpm install writes node_modules into the vault"},
	{programs: []string{"yarn"}, fetch: []string{"yarn", "install"},
		kept: "yarn install writes node_modules into the vault"},
	{programs: []string{"bun", "bunx"}, fetch: []string{"bun", "install"},
		kept: "bun install writes node_modules into the vault"},
	// cargo keeps its registry in CARGO_HOME, ~/.cargo by default: the
	// sandbox's private home, gone after the run.
	{programs: []string{"cargo"}, fetch: []string{"cargo", "fetch"}, env: "CARGO_HOME=.cache/cargo", cached: true,
		kept: "CARGO_HOME is then in the vault's tool cache (~/.cache), which later runs share when they are given the same --env"},
}

// networkSymptomIn returns the first of networkSymptoms found in the last
// hintScan bytes of either stream, or "" when none is.
func networkSymptomIn(streams ...Output) string {
	for _, s := range networkSymptoms {
		for _, o := range streams {
			if bytes.Contains(outputEnd(o, hintScan), []byte(s.text)) {
				return s.text
			}
		}
	}
	return ""
}

// outputEnd returns the last n bytes of what o captured.
func outputEnd(o Output, n int) []byte {
	b := o.Head
	if len(o.Tail) > 0 {
		b = o.Tail
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return b
}

// hints returns the envelope's hints for the run that just ended.
func (x *execution) hints() []wire.Hint {
	if h, ok := x.networkHint(); ok {
		return []wire.Hint{h}
	}
	return nil
}

// networkHint is the network_off hint of the run, if it has one (see the
// top of this file).
func (x *execution) networkHint() (wire.Hint, bool) {
	sb, pr := x.out.Sandbox, x.proc
	if sb == nil || sb.Mode != wire.SandboxNamespaces || sb.Network != wire.NetworkNone {
		return wire.Hint{}, false
	}
	if pr.NotFound || pr.ExitCode == 0 && !pr.TimedOut {
		return wire.Hint{}, false
	}
	symptom := networkSymptomIn(pr.Stderr, pr.Stdout)
	if symptom == "" {
		return wire.Hint{}, false
	}
	var msg strings.Builder
	fmt.Fprintf(&msg, "The sandbox had no network (sandbox.network %q), and the output shows that the command tried to reach one (%q). ",
		wire.NetworkNone, strings.TrimSpace(symptom))
	msg.WriteString("The default policy grants the host's network only to an approved run of a command that needs approval because it reaches the network " +
		"(a network program, a git remote, a package install, a server: data.avfs.config.host_network_reasons). ")
	h := wire.Hint{Code: wire.HintNetworkOff}
	if f, ok := x.fetcher(); ok {
		h.Command = engine.QuoteArgv(x.fetchCommand(f))
		fmt.Fprintf(&msg, "Fetch what this command needs with `%s`: run the hint's command (it asks for approval and gives approval.id), "+
			"grant it with `avfs approval grant ID`, and run the hint's command again with `--approval ID` after `proxy exec`; "+
			"then run this command again: %s. ", engine.QuoteArgv(f.fetch), f.kept)
	}
	msg.WriteString("For this command itself to get the network, the policy must require approval for it with a reason listed in host_network_reasons " +
		"(docs/policy.md, \"The sandbox grant\"), or it must run without a sandbox (--sandbox none), which gives it the host's network and the rest of the host.")
	h.Message = msg.String()
	return h, true
}

// fetcher returns the fetcher of the first of the run's commands that has
// one whose fetch would be kept.
func (x *execution) fetcher() (fetcher, bool) {
	for _, prog := range x.programs {
		for _, f := range fetchers {
			if slices.Contains(f.programs, prog) && (!f.cached || x.r.Sandbox.CacheDir != "") {
				return f, true
			}
		}
	}
	return fetcher{}, false
}

// fetchCommand is the avfs command line that asks for approval of f's
// fetch in the run's vault and working directory.
func (x *execution) fetchCommand(f fetcher) []string {
	argv := []string{"avfs", "--vault", x.info.Name, "proxy", "exec"}
	if x.cwd != "/" {
		argv = append(argv, "--cwd", x.cwd)
	}
	if f.env != "" {
		name, rel, _ := strings.Cut(f.env, "=")
		argv = append(argv, "--env", name+"="+path.Join(x.view.input.Home, rel))
	}
	return append(append(argv, "--"), f.fetch...)
}
