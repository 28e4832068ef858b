package engine

import (
	"path"
	"strings"

	"avfs/wire"
)

// dirKind says what a resolved path (or a working directory) is relative to.
type dirKind uint8

const (
	// dirVault: a vault-absolute path ("/src/a"); one that climbed above
	// the vault root keeps its leading ".." ("/../x") and is not inside.
	dirVault dirKind = iota
	// dirHost: an absolute host path ("/etc/passwd").
	dirHost
	// dirHome: a path under a home directory ("~/.ssh", "~bob/x").
	dirHome
	// dirUnknown: a path whose base is only known at run time ($DIR/x, or
	// anything relative after `cd "$X"`).
	dirUnknown
)

// dirState is a working directory as far as parsing can tell.
type dirState struct {
	kind dirKind
	path string
}

// cd returns the directory `cd w` moves to from d.
func (d dirState) cd(w shellWord) dirState {
	if w.text == "-" {
		return dirState{kind: dirUnknown}
	}
	p, kind := resolvePath(d, w)
	return dirState{kind: kind, path: p}
}

// fileOperandPrograms lists programs whose operands are files even without
// a slash ("rm notes.txt"), with the index of the first such operand
// (chmod's first operand is the mode). Any operand containing a slash or
// starting with ".", "~" or $HOME is a path for every program.
var fileOperandPrograms = map[string]int{
	"rm": 0, "rmdir": 0, "unlink": 0, "shred": 0, "truncate": 0,
	"cp": 0, "mv": 0, "ln": 0, "install": 0, "touch": 0, "mkdir": 0,
	"cat": 0, "less": 0, "more": 0, "head": 0, "tail": 0, "tee": 0,
	"chmod": 1, "chown": 1, "chgrp": 1,
	"cd": 0, "pushd": 0,
}

// looksLikePath reports whether a word names a file: it contains a slash
// (but is no URL and no host:path remote), starts with ".", "~", $HOME or
// ${HOME}, or is a file:// URL. Words holding a substitution are left to
// the commands inside it, which report their own paths.
func looksLikePath(w shellWord) bool {
	t := w.text
	switch {
	case t == "" || t == "-" || w.subst:
		return false
	case t[0] == '.' || t[0] == '~' || homeVar(t) >= 0:
		return true
	case isURL(t):
		return strings.HasPrefix(t, "file://")
	}
	slash := strings.IndexByte(t, '/')
	if slash < 0 {
		return false
	}
	colon := strings.IndexByte(t, ':')
	return colon <= 0 || colon > slash // "host:dir/x", "git@host:x" are remote
}

// isURL reports whether t starts with scheme://.
func isURL(t string) bool {
	i := strings.Index(t, "://")
	if i <= 0 {
		return false
	}
	for j := 0; j < i; j++ {
		c := t[j]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (j == 0 || !(c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return true
}

// homeVar returns the length of a leading $HOME or ${HOME} followed by the
// end or a slash, or -1.
func homeVar(t string) int {
	for _, v := range [...]string{"$HOME", "${HOME}"} {
		if strings.HasPrefix(t, v) && (len(t) == len(v) || t[len(v)] == '/') {
			return len(v)
		}
	}
	return -1
}

// addPath resolves w against dir and records it for command idx.
func (b *inputBuilder) addPath(w shellWord, dir dirState, source string, idx int) {
	p, kind := resolvePath(dir, w)
	b.paths = append(b.paths, wire.Path{
		Arg:         w.text,
		Path:        p,
		InsideVault: kind == dirVault && !aboveRoot(p),
		Source:      source,
		Command:     idx,
	})
}

// aboveRoot reports whether a vault path climbed above the vault root.
func aboveRoot(p string) bool {
	return p == "/.." || strings.HasPrefix(p, "/../")
}

// resolvePath resolves a path word against the working directory dir:
// "~", "~user", $HOME and ${HOME} give "~…" paths, an absolute path (or a
// file:// URL) names the host, a relative one is joined to dir and cleaned.
// Words that are not literal resolve only when they start with a known
// base; otherwise their text is kept and the kind is dirUnknown.
func resolvePath(dir dirState, w shellWord) (string, dirKind) {
	t := w.text
	if n := homeVar(t); n >= 0 {
		return homeJoin("~", t[n:]), dirHome
	}
	if t != "" && t[0] == '~' {
		user, rest, _ := strings.Cut(t, "/")
		return homeJoin(user, rest), dirHome
	}
	if !w.literal {
		if n := pwdVar(t); n >= 0 && !strings.ContainsAny(t[n:], "$`") {
			return resolvePath(dir, shellWord{text: "." + t[n:], literal: true})
		}
	}
	if rest, ok := strings.CutPrefix(t, "file://"); ok {
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			t = rest[i:] // file://localhost/etc/x, file:///etc/x
		}
	}
	if t != "" && t[0] == '/' {
		return path.Clean(t), dirHost
	}
	if !w.literal {
		return t, dirUnknown
	}
	if mayGlobDotDot(t) {
		return t, dirUnknown
	}
	switch dir.kind {
	case dirVault:
		return vaultJoin(dir.path, t), dirVault
	case dirHost:
		return path.Clean(dir.path + "/" + t), dirHost
	case dirHome:
		user, rest, _ := strings.Cut(dir.path, "/")
		return homeJoin(user, rest+"/"+t), dirHome
	}
	return t, dirUnknown
}

// mayGlobDotDot reports whether a relative path has a segment that is a
// glob pattern starting with a dot (".*", ".?"): a shell may expand it to
// "..", so where the path lands is unknown.
func mayGlobDotDot(t string) bool {
	for t != "" {
		var seg string
		seg, t, _ = strings.Cut(t, "/")
		if len(seg) > 1 && seg[0] == '.' && strings.ContainsAny(seg, "*?[") {
			return true
		}
	}
	return false
}

// pwdVar returns the length of a leading $PWD or ${PWD} followed by the
// end or a slash, or -1.
func pwdVar(t string) int {
	for _, v := range [...]string{"$PWD", "${PWD}"} {
		if strings.HasPrefix(t, v) && (len(t) == len(v) || t[len(v)] == '/') {
			return len(v)
		}
	}
	return -1
}

// homeJoin returns home ("~" or "~user") followed by rest, cleaned.
func homeJoin(home, rest string) string {
	if rest == "" {
		return home
	}
	c := path.Clean("/" + rest)
	if c == "/" {
		return home
	}
	return home + c
}

// vaultJoin joins rel to the vault directory base and cleans the result.
// Unlike path.Clean, ".." above the root is kept ("/../x"), so an escape
// stays visible.
func vaultJoin(base, rel string) string {
	var segs [32]string
	stack := segs[:0]
	up := 0
	for _, s := range [2]string{base, rel} {
		for s != "" {
			var seg string
			seg, s, _ = strings.Cut(s, "/")
			switch seg {
			case "", ".":
			case "..":
				if len(stack) > 0 {
					stack = stack[:len(stack)-1]
				} else {
					up++
				}
			default:
				stack = append(stack, seg)
			}
		}
	}
	var sb strings.Builder
	for range up {
		sb.WriteString("/..")
	}
	for _, s := range stack {
		sb.WriteByte('/')
		sb.WriteString(s)
	}
	if sb.Len() == 0 {
		return "/"
	}
	return sb.String()
}
