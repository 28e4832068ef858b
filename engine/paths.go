package engine

import (
	"cmp"
	"path"
	"slices"
	"strings"

	"avfs/wire"
)

// dirKind says what a resolved path (or a working directory) is relative to.
type dirKind uint8

const (
	// dirVault: a vault-absolute path ("/src/a"); one that climbed above
	// the vault root keeps its leading ".." ("/../x") and is not inside.
	dirVault dirKind = iota
	// dirHost: an absolute path the vault does not hold ("/etc/passwd",
	// "/tmp/x"): the view says what it names.
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

// view is what the command sees, as far as paths go: where the vault is,
// which absolute directories the sandbox shows (read-only system, scratch),
// and whether ~ is the sandbox's private home. It is built once per Parse
// from ParseRequest.Sandbox and never modified.
type view struct {
	// sandboxed: the command runs in namespaces, so ~, ~/x and $HOME
	// name its private home (scratch) and the sandbox's directories are
	// roots; without a sandbox ~ is the host's home (outside).
	sandboxed bool
	// roots are the directories that name something, longest first; a
	// path under none of them is outside.
	roots []viewRoot
}

// viewRoot is a directory of the view and what the paths under it are.
type viewRoot struct {
	dir   string // absolute and clean, never "/"
	where wire.Where
}

// newView builds the view of s. An empty mode is none. Without a sandbox
// only the workspace (when given) is a root: every other absolute path is
// the host's. A directory that is empty, relative or "/" is no root (a
// root "/" would make every absolute path one kind); on a tie between two
// equal directories, read_only_system wins over vault, and vault over
// scratch, so a write is never allowed more than the stricter kind allows.
func newView(s wire.SandboxInput) *view {
	v := &view{sandboxed: s.Mode == wire.SandboxNamespaces}
	add := func(where wire.Where, dirs ...string) {
		for _, d := range dirs {
			if d == "" || d[0] != '/' {
				continue
			}
			if d = path.Clean(d); d != "/" {
				v.roots = append(v.roots, viewRoot{dir: d, where: where})
			}
		}
	}
	if v.sandboxed {
		add(wire.WhereReadOnlySystem, s.ReadOnlySystem...)
	}
	add(wire.WhereVault, s.Workspace)
	if v.sandboxed {
		add(wire.WhereScratch, s.Scratch...)
	}
	slices.SortStableFunc(v.roots, func(a, b viewRoot) int { return cmp.Compare(len(b.dir), len(a.dir)) })
	return v
}

// root returns the root that holds the absolute clean path p, and p
// relative to it ("" for the root itself); ok is false when none does.
func (v *view) root(p string) (r viewRoot, rel string, ok bool) {
	for _, r := range v.roots {
		if rest, found := strings.CutPrefix(p, r.dir); found && (rest == "" || rest[0] == '/') {
			return r, rest, true
		}
	}
	return viewRoot{}, "", false
}

// abs resolves the absolute clean path p: a path in the workspace becomes
// the vault path ("/workspace/src" gives "/src"), any other stays a host
// path.
func (v *view) abs(p string) (string, dirKind) {
	if r, rel, ok := v.root(p); ok && r.where == wire.WhereVault {
		return cmp.Or(rel, "/"), dirVault
	}
	return p, dirHost
}

// where says what the resolved path p of kind names in the view.
func (v *view) where(p string, kind dirKind) wire.Where {
	switch kind {
	case dirVault:
		if aboveRoot(p) {
			return wire.WhereOutside
		}
		return wire.WhereVault
	case dirHost:
		if r, _, ok := v.root(p); ok {
			return r.where
		}
		return wire.WhereOutside
	case dirHome:
		if v.sandboxed && (p == "~" || strings.HasPrefix(p, "~/")) {
			return wire.WhereScratch
		}
		return wire.WhereOutside
	}
	return wire.WhereUnknown
}

// cd returns the directory `cd w` moves to from d.
func (v *view) cd(d dirState, w shellWord) dirState {
	if w.text == "-" {
		return dirState{kind: dirUnknown}
	}
	p, kind := v.resolve(d, w)
	return dirState{kind: kind, path: p}
}

// looksLikePath reports whether a word has the shape of a path, for the
// words of a program no spec classifies: it contains a slash, starts with
// ".", "~", $HOME or ${HOME}. A URL or a host:path word is a path too:
// most programs open "x:/../../etc/passwd" and "s://../../etc" as the
// relative paths they are, and the programs that take URLs and remotes
// say so in their specs. Words holding a substitution are left to the
// commands inside it, which report their own paths.
func looksLikePath(w shellWord) bool {
	t := w.text
	switch {
	case t == "" || t == "-" || w.subst:
		return false
	case t[0] == '.' || t[0] == '~' || homeVar(t) >= 0:
		return true
	}
	return strings.IndexByte(t, '/') >= 0
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

// addPath resolves w against dir and records it for command idx, with no
// known role.
func (b *inputBuilder) addPath(w shellWord, dir dirState, source string, idx int) {
	b.addRolePath(w, dir, source, idx, wire.RoleUnknown)
}

// addRolePath resolves w against dir and records it for command idx with
// the role the command gives it.
func (b *inputBuilder) addRolePath(w shellWord, dir dirState, source string, idx int, role wire.Role) {
	p, kind := b.view.resolve(dir, w)
	where := b.view.where(p, kind)
	b.paths = append(b.paths, wire.Path{
		Arg:         w.text,
		Path:        p,
		InsideVault: where == wire.WhereVault,
		Where:       where,
		Source:      source,
		Command:     idx,
		Role:        role,
	})
}

// aboveRoot reports whether a vault path climbed above the vault root.
func aboveRoot(p string) bool {
	return p == "/.." || strings.HasPrefix(p, "/../")
}

// resolve resolves a path word against the working directory dir:
// "~", "~user", $HOME and ${HOME} give "~…" paths, an absolute path (or a
// file:// URL) is a vault path when it is in the workspace and a host path
// otherwise, a relative one is joined to dir and cleaned (and, joined to a
// host directory, resolved as an absolute path again: `cd /` then
// `cd workspace` is the vault root). Words that are not literal resolve
// only when they start with a known base; otherwise their text is kept and
// the kind is dirUnknown.
func (v *view) resolve(dir dirState, w shellWord) (string, dirKind) {
	t := w.text
	if w.rebased {
		return t, dirUnknown // HOME or PWD assigned a value known only at run time
	}
	if n := homeVar(t); n >= 0 {
		return homeJoin("~", t[n:]), dirHome
	}
	if t != "" && t[0] == '~' {
		user, rest, _ := strings.Cut(t, "/")
		return homeJoin(user, rest), dirHome
	}
	if !w.literal {
		if n := pwdVar(t); n >= 0 && !strings.ContainsAny(t[n:], "$`") {
			return v.resolve(dir, shellWord{text: "." + t[n:], literal: true})
		}
	}
	if rest, ok := strings.CutPrefix(t, "file://"); ok {
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			t = rest[i:] // file://localhost/etc/x, file:///etc/x
		}
	}
	if t != "" && t[0] == '/' {
		return v.abs(path.Clean(t))
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
		return v.abs(path.Clean(dir.path + "/" + t))
	case dirHome:
		user, rest, _ := strings.Cut(dir.path, "/")
		return homeJoin(user, rest+"/"+t), dirHome
	}
	return t, dirUnknown
}

// mayGlobDotDot reports whether a relative path has a segment that is a
// glob pattern a shell may expand to ".." (".*", ".?", ".[.]"), so where
// the path lands is unknown. ".[!.]*" cannot match "..": it stays a path
// in its directory. A pattern that path.Match cannot read counts as one
// that may.
func mayGlobDotDot(t string) bool {
	for t != "" {
		var seg string
		seg, t, _ = strings.Cut(t, "/")
		if len(seg) < 2 || seg[0] != '.' || !strings.ContainsAny(seg, "*?[") {
			continue
		}
		// Bash writes a negated bracket [!…], Go's path.Match [^…].
		pattern := strings.ReplaceAll(seg, "[!", "[^")
		if ok, err := path.Match(pattern, ".."); ok || err != nil {
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
