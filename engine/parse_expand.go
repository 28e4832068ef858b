package engine

import (
	"os"
	"path"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// expandWords converts the words of a command (or of a for loop's list)
// as the shell expands them: a brace expansion of static words gives its
// words ({a,b}.md gives a.md and b.md, {..,x}/etc gives ../etc), and a
// glob in a system directory (globDirs) that matches exactly one
// executable gives its path. A brace expansion that gives a word that is
// not literal, or more than maxBraceWords words (or past maxBraceTotal in
// one Parse), stays one word that is not literal. It never reads the
// vault: a relative glob stays a pattern.
func (b *inputBuilder) expandWords(sc *shellScope, ws []*syntax.Word) []shellWord {
	out := make([]shellWord, 0, len(ws))
	for _, w := range ws {
		if braces := b.braceWords(w); braces != nil {
			start := len(out)
			for _, bw := range braces {
				cw := b.convertWord(sc, bw, ctxWord)
				if !cw.literal {
					out = out[:start]
					break
				}
				out = append(out, cw)
			}
			if len(out) > start {
				continue
			}
		}
		out = append(out, b.convertWord(sc, w, ctxWord))
	}
	for i, w := range out {
		if w.pattern && !sc.vars.globsUnsure() {
			if p := b.globProgram(w.text); p != "" {
				out[i] = shellWord{text: p, literal: true}
			}
		}
	}
	return out
}

// braceWords returns the words the brace expansion of w gives, or nil
// when w has none, or gives too many.
func (b *inputBuilder) braceWords(w *syntax.Word) []*syntax.Word {
	if !hasBraceExpansion(w) {
		return nil
	}
	cp := &syntax.Word{Parts: slices.Clone(w.Parts)}
	syntax.SplitBraces(cp)
	var words []*syntax.Word
	for bw, err := range expand.BracesSeq(nil, cp) {
		if err != nil || len(words) == maxBraceWords || b.static.braceWords >= maxBraceTotal {
			return nil
		}
		b.static.braceWords++
		words = append(words, bw)
	}
	return words
}

// globsUnsure reports whether the shell's glob options may have changed
// (shopt, setopt: nocaseglob, dotglob …), so that a glob may match other
// files than the parser sees.
func (v *shellVars) globsUnsure() bool {
	return v == nil || v.off || v.globOpts
}

// globDirs are the host directories whose files a glob program word may
// be matched against (/usr/bin/wge? is /usr/bin/wget): the system a
// sandbox shows read-only, which the command cannot change. /etc is not
// one: a sandbox shows a curated copy of it.
var globDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt"}

// globProgram returns the one executable file an absolute glob pattern
// matches in a directory under globDirs, or "" when it matches none, or
// several, or no executable, or cannot be matched by the parser: a glob
// outside the last path element, a bracket class or escape it does not
// read like bash, or past maxGlobLookups directories in one Parse. Names
// starting with a dot match only a pattern starting with one, as in
// bash. It reads one directory and never follows the pattern elsewhere.
func (b *inputBuilder) globProgram(pattern string) string {
	if !strings.HasPrefix(pattern, "/") {
		return ""
	}
	if p, ok := b.static.globMemo[pattern]; ok {
		return p
	}
	found := ""
	dir, pat := path.Split(pattern)
	dir = strings.TrimSuffix(dir, "/")
	if dir == path.Clean(dir) && !hasGlobMeta(dir) && underGlobDirs(dir) && pat != "" && !strings.ContainsAny(pat, `\(`) &&
		b.static.globLookups < maxGlobLookups {
		b.static.globLookups++
		found = matchOne(dir, bashPattern(pat))
	}
	if b.static.globMemo == nil {
		b.static.globMemo = map[string]string{}
	}
	b.static.globMemo[pattern] = found
	return found
}

// underGlobDirs reports whether the clean directory dir is one of globDirs
// or under one.
func underGlobDirs(dir string) bool {
	for _, d := range globDirs {
		if dir == d || strings.HasPrefix(dir, d+"/") {
			return true
		}
	}
	return false
}

// bashPattern turns a bash bracket negation [!…] into path.Match's [^…].
func bashPattern(pat string) string {
	return strings.ReplaceAll(pat, "[!", "[^")
}

// matchOne returns dir/NAME for the one entry of dir matching pat, when
// it is an executable file, or "".
func matchOne(dir, pat string) string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	match := ""
	for _, e := range entries {
		name := e.Name()
		if name[0] == '.' && pat[0] != '.' {
			continue
		}
		ok, err := path.Match(pat, name)
		if err != nil {
			return ""
		}
		if ok {
			if match != "" {
				return ""
			}
			match = name
		}
	}
	if match == "" {
		return ""
	}
	p := dir + "/" + match
	if !isExecutable(p) {
		return ""
	}
	return p
}
