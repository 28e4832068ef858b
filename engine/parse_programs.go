package engine

import (
	"slices"
	"strings"
)

// interpreterSpec describes how a shell or script interpreter gets its
// program: inline (sh -c, python -c), from a file operand, or from stdin.
// Option letters are listed without the dash.
type interpreterSpec struct {
	shell      bool     // the program text is a shell script: parse it
	modeCode   bool     // -c is a mode and the program is the first operand (shells)
	codeShort  string   // short options whose value is the program text
	codeLong   []string // long options whose value is the program text
	valueShort string   // other short options that take a value
	valueLong  []string // other long options that take a value
	restShort  string   // short options that swallow the rest of their word (perl -i.bak)
	stdinShort string   // short options that read the program from stdin (sh -s)
	runShort   string   // short options naming what runs instead (python -m, php -f)
	anywhere   bool     // options may follow operands (su user -c cmd)
	noStdin    bool     // never reads its program from stdin (su, source)
}

// The specs of interpreterSpecs, one per family of programs.
var (
	shellInterp = &interpreterSpec{shell: true, modeCode: true, codeShort: "c", valueShort: "oO",
		valueLong: []string{"--rcfile", "--init-file"}, stdinShort: "s"}
	suInterp = &interpreterSpec{shell: true, codeShort: "c", codeLong: []string{"--command", "--session-command"},
		valueShort: "sgGw", valueLong: []string{"--shell", "--group", "--supp-group", "--whitelist-environment"},
		anywhere: true, noStdin: true}
	pythonInterp = &interpreterSpec{codeShort: "c", valueShort: "WX", valueLong: []string{"--check-hash-based-pycs"}, runShort: "m"}
	perlInterp   = &interpreterSpec{codeShort: "eE", restShort: "0CdDiIlmMVx"}
	rubyInterp   = &interpreterSpec{codeShort: "e", valueShort: "ICErx"}
	nodeInterp   = &interpreterSpec{codeShort: "ep", codeLong: []string{"--eval", "--print"}, valueShort: "rC",
		valueLong: []string{"--require", "--import", "--loader", "--experimental-loader", "--conditions"}}
	phpInterp    = &interpreterSpec{codeShort: "rBRE", valueShort: "dcz", runShort: "fF"}
	luaInterp    = &interpreterSpec{codeShort: "e", valueShort: "l"}
	sourceInterp = &interpreterSpec{noStdin: true}
	// tclsh and wish read a script file, or their program from stdin.
	tclInterp    = &interpreterSpec{}
	expectInterp = &interpreterSpec{codeShort: "c", runShort: "fb"}
	// Rscript needs a file or -e; "Rscript -" reads stdin. R reads stdin.
	rscriptInterp = &interpreterSpec{codeShort: "e", noStdin: true}
	rInterp       = &interpreterSpec{codeShort: "e", runShort: "f"}
	irbInterp     = &interpreterSpec{valueShort: "Ir"}
	juliaInterp   = &interpreterSpec{codeShort: "eE", valueShort: "LpJCt"}
	// PowerShell's options are single-dash words (-Command, -File): only
	// -c is read; "-" or no script reads stdin.
	pwshInterp = &interpreterSpec{codeShort: "c"}
	osaInterp  = &interpreterSpec{codeShort: "e", valueShort: "ls"}
)

// interpreterSpecs lists shells and interpreters by basename, with any version
// suffix removed ("python3.12" is "python").
var interpreterSpecs = map[string]*interpreterSpec{
	"sh": shellInterp, "bash": shellInterp, "dash": shellInterp, "zsh": shellInterp, "ksh": shellInterp,
	"ash": shellInterp, "mksh": shellInterp, "lksh": shellInterp, "pdksh": shellInterp, "yash": shellInterp,
	"posh": shellInterp, "rbash": shellInterp, "hush": shellInterp, "fish": shellInterp, "csh": shellInterp,
	"tcsh": shellInterp,
	"su":   suInterp, "runuser": suInterp,
	"python": pythonInterp, "pypy": pythonInterp,
	"perl": perlInterp, "ruby": rubyInterp, "node": nodeInterp, "nodejs": nodeInterp,
	"php": phpInterp, "lua": luaInterp, "luajit": luaInterp,
	"tclsh": tclInterp, "wish": tclInterp, "jimsh": tclInterp, "expect": expectInterp,
	"Rscript": rscriptInterp, "R": rInterp, "irb": irbInterp, "julia": juliaInterp,
	"pwsh": pwshInterp, "powershell": pwshInterp, "osascript": osaInterp,
	"source": sourceInterp, ".": sourceInterp,
}

// interpResult is what analyseInterpreter found in a command's args.
type interpResult struct {
	shell   bool  // the program text is a shell script
	isShell bool  // the program runs shell code itself (a shell, source; not su)
	code    int   // index in args of the (first) program text, or -1
	codeAt  int   // byte offset of the program text in that word (-ccode)
	codes   []int // indexes of every program-text word, for path detection to skip
	file    int   // index in args of the script file operand, or -1
	stdin   bool  // the program is read from stdin
	// codeMissing: an option whose value is the program (-c, -e, --eval)
	// ends the words, so the program is whatever comes after them
	// (xargs sh -c appends its input).
	codeMissing bool
}

// isCode reports whether args[i] holds program text.
func (r *interpResult) isCode(i int) bool {
	for _, c := range r.codes {
		if c == i {
			return true
		}
	}
	return false
}

// interpreterFor returns the interpreter named by a program basename.
func interpreterFor(name string) *interpreterSpec {
	if in, ok := interpreterSpecs[name]; ok {
		return in
	}
	base := strings.TrimRight(name, "0123456789.")
	if base == "" || base == name {
		return nil
	}
	return interpreterSpecs[base]
}

// analyseInterpreter finds where the program of a shell or interpreter
// comes from. name is the program's basename ("" when it is not literal).
func analyseInterpreter(name string, args []shellWord) interpResult {
	res := interpResult{code: -1, file: -1}
	if name == "" {
		return res
	}
	sp := interpreterFor(name)
	if sp == nil {
		return res
	}
	res.shell, res.isShell = sp.shell, sp.modeCode || sp == sourceInterp
	modeC, stdinFlag, runs := false, false, false
	addCode := func(i, at int) {
		if res.code < 0 {
			res.code, res.codeAt = i, at
		}
		res.codes = append(res.codes, i)
	}
	i := 0
scan:
	for ; i < len(args); i++ {
		a := args[i]
		t := a.text
		switch {
		case !a.literal || t == "-" || len(t) < 2:
			if !sp.anywhere {
				break scan
			}
		case t == "--":
			i++
			break scan
		case strings.HasPrefix(t, "--"):
			opt, _, hasValue := strings.Cut(t, "=")
			switch {
			case slices.Contains(sp.codeLong, opt):
				if hasValue {
					addCode(i, len(opt)+1)
				} else if i+1 < len(args) {
					i++
					addCode(i, 0)
				} else {
					res.codeMissing = true
				}
			case slices.Contains(sp.valueLong, opt) && !hasValue:
				i++
			}
		case t[0] == '-' || t[0] == '+' && sp.modeCode:
			for j := 1; j < len(t); j++ {
				c := t[j]
				switch {
				case strings.IndexByte(sp.codeShort, c) >= 0:
					if sp.modeCode {
						modeC = true
						continue
					}
					if j+1 < len(t) {
						addCode(i, j+1)
					} else if i+1 < len(args) {
						i++
						addCode(i, 0)
					} else {
						res.codeMissing = true
					}
				case strings.IndexByte(sp.stdinShort, c) >= 0:
					stdinFlag = true
					continue
				case strings.IndexByte(sp.runShort, c) >= 0:
					runs = true
					if j+1 == len(t) {
						i++
					}
				case strings.IndexByte(sp.valueShort, c) >= 0:
					if j+1 == len(t) {
						i++
					}
				case strings.IndexByte(sp.restShort, c) >= 0:
				default:
					continue
				}
				break
			}
		default:
			if !sp.anywhere {
				break scan
			}
		}
	}
	switch {
	case sp.anywhere:
	case modeC:
		if i < len(args) {
			addCode(i, 0)
		} else {
			res.codeMissing = true
		}
	case len(res.codes) > 0 || runs || res.codeMissing:
	case stdinFlag:
		res.stdin = true
	case i < len(args):
		if args[i].literal && isStdinFile(args[i].text) {
			res.stdin = true
		} else {
			res.file = i
		}
	default:
		res.stdin = !sp.noStdin
	}
	if stdinFlag && !modeC && !sp.anywhere {
		res.stdin = true
	}
	return res
}

// isStdinFile reports whether a script operand names stdin.
func isStdinFile(t string) bool {
	switch t {
	case "-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0":
		return true
	}
	return false
}
