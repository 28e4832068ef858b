package engine

import (
	"strings"

	"github.com/google/shlex"

	"avfs/wire"
)

// wrapperSpec describes how a wrapper program (sudo, env, timeout, …) takes
// its own options before the command it runs. Option letters are listed
// without the dash; long options map to their short alias, or to
// themselves when they have none.
type wrapperSpec struct {
	valueShort    string            // short options that take a value (attached or the next word)
	optionalShort string            // short options with an optional attached value (xargs -i[R])
	longValue     map[string]string // long options that take a value (--opt=v or --opt v)
	long          map[string]string // long options without a value (--opt=v still records v)
	positional    int               // operands before the command (timeout's DURATION)
	pathOperand   bool              // the positional operand is a path (flock FILE, chroot DIR)
	assignments   bool              // NAME=value words before the command set its environment
	dashIsI       bool              // a lone "-" means -i (env)
	numeric       bool              // "-N" is an option (nice -10)
	noRun         string            // options after which nothing is run (sudo -l, command -v)
	pathOptions   string            // options whose value is a file or directory
	chdirOption   byte              // option that sets the command's working directory
	splitOption   byte              // option whose value is split into the command's first words (env -S)
	scriptAfter   bool              // after the operands, -c/--command SCRIPT runs a shell script (flock)
	origin        string            // Origin of the command it runs ("xargs")
}

// wrapperSpecs lists the programs that run another command, by basename.
// busybox is handled apart: its first operand is the program.
var wrapperSpecs = map[string]*wrapperSpec{
	"env": {
		valueShort: "uCS",
		longValue:  map[string]string{"--unset": "-u", "--chdir": "-C", "--split-string": "-S"},
		long: map[string]string{"--ignore-environment": "-i", "--null": "-0", "--debug": "-v",
			"--block-signal": "--block-signal", "--default-signal": "--default-signal", "--ignore-signal": "--ignore-signal"},
		assignments: true, dashIsI: true, pathOptions: "C", chdirOption: 'C', splitOption: 'S',
	},
	"sudo": {
		valueShort: "CDgpRrtTUu",
		longValue: map[string]string{"--close-from": "-C", "--chdir": "-D", "--group": "-g", "--prompt": "-p",
			"--chroot": "-R", "--role": "-r", "--type": "-t", "--command-timeout": "-T", "--other-user": "-U",
			"--user": "-u", "--host": "--host"},
		long: map[string]string{"--askpass": "-A", "--background": "-b", "--bell": "-B", "--preserve-env": "-E",
			"--edit": "-e", "--set-home": "-H", "--help": "-h", "--login": "-i", "--remove-timestamp": "-K",
			"--reset-timestamp": "-k", "--list": "-l", "--non-interactive": "-n", "--preserve-groups": "-P",
			"--stdin": "-S", "--shell": "-s", "--version": "-V", "--validate": "-v"},
		assignments: true, noRun: "elVvKh", pathOptions: "DR", chdirOption: 'D',
	},
	"doas": {valueShort: "uC", noRun: "CL", pathOptions: "C"},
	"timeout": {
		valueShort: "ks",
		longValue:  map[string]string{"--kill-after": "-k", "--signal": "-s"},
		long:       map[string]string{"--verbose": "-v", "--foreground": "--foreground", "--preserve-status": "--preserve-status"},
		positional: 1,
	},
	"nice":  {valueShort: "n", longValue: map[string]string{"--adjustment": "-n"}, numeric: true},
	"nohup": {},
	"stdbuf": {
		valueShort: "ioe",
		longValue:  map[string]string{"--input": "-i", "--output": "-o", "--error": "-e"},
	},
	"time": {
		valueShort:  "fo",
		longValue:   map[string]string{"--format": "-f", "--output": "-o"},
		long:        map[string]string{"--append": "-a", "--portability": "-p", "--verbose": "-v", "--quiet": "-q"},
		pathOptions: "o",
	},
	"command": {noRun: "vV"},
	"builtin": {},
	"exec":    {valueShort: "a"},
	"xargs": {
		valueShort:    "aEdILnPs",
		optionalShort: "eil",
		longValue: map[string]string{"--arg-file": "-a", "--delimiter": "-d", "--max-args": "-n",
			"--max-procs": "-P", "--max-chars": "-s", "--process-slot-var": "--process-slot-var"},
		long: map[string]string{"--eof": "-e", "--replace": "-i", "--max-lines": "-l", "--null": "-0",
			"--no-run-if-empty": "-r", "--verbose": "-t", "--interactive": "-p", "--exit": "-x", "--open-tty": "-o"},
		pathOptions: "a", origin: originXargs,
	},
	"setsid": {long: map[string]string{"--ctty": "-c", "--fork": "-f", "--wait": "-w"}},
	"ionice": {
		valueShort: "cnpPu",
		longValue:  map[string]string{"--class": "-c", "--classdata": "-n", "--pid": "-p", "--pgid": "-P", "--uid": "-u"},
		long:       map[string]string{"--ignore": "-t"},
		noRun:      "pPu",
	},
	"chrt": {
		valueShort: "TPD",
		longValue:  map[string]string{"--sched-runtime": "-T", "--sched-period": "-P", "--sched-deadline": "-D"},
		long: map[string]string{"--pid": "-p", "--max": "-m", "--all-tasks": "-a", "--batch": "-b", "--deadline": "-d",
			"--fifo": "-f", "--idle": "-i", "--other": "-o", "--rr": "-r", "--reset-on-fork": "-R", "--verbose": "-v"},
		noRun: "pm", positional: 1,
	},
	"taskset": {
		long:  map[string]string{"--all-tasks": "-a", "--cpu-list": "-c", "--pid": "-p"},
		noRun: "p", positional: 1,
	},
	"flock": {
		valueShort: "wE",
		longValue:  map[string]string{"--timeout": "-w", "--wait": "-w", "--conflict-exit-code": "-E"},
		long: map[string]string{"--shared": "-s", "--exclusive": "-x", "--unlock": "-u", "--nonblock": "-n",
			"--nb": "-n", "--close": "-o", "--no-fork": "-F", "--verbose": "--verbose"},
		positional: 1, pathOperand: true, scriptAfter: true,
	},
	"chroot": {
		longValue:  map[string]string{"--userspec": "--userspec", "--groups": "--groups"},
		long:       map[string]string{"--skip-chdir": "--skip-chdir"},
		positional: 1, pathOperand: true,
	},
}

// unwrapped is a command with its wrappers peeled off.
type unwrapped struct {
	words     []shellWord     // the command that really runs
	wrappers  []wire.Wrapper  // outermost first
	assigns   []envAssignment // NAME=value set by leading words, env or sudo
	origin    string          // "xargs" when xargs runs it, else ""
	chdirs    []shellWord     // directories the wrappers change to (env -C, sudo -D), in order
	pathArgs  []shellWord     // wrapper option values and operands that are paths
	scripts   []shellWord     // shell scripts a wrapper runs instead of a command (flock -c)
	scriptArg int             // index in words of that script, 0 when none
	execWord  *shellWord      // the program file when it is not words[0] (busybox)
}

// unwrap peels wrappers off words, outermost first, until the first word
// is a real program. A wrapper with no command after it (env alone,
// sudo -l) stays the program itself.
func (u *unwrapped) unwrap(words []shellWord) {
	u.words = words
	for n := 0; n < maxWrappers && len(u.words) > 1; n++ {
		w0 := u.words[0]
		if !w0.literal {
			return
		}
		if isAssignment(w0.text) {
			if !u.leadingAssignments() {
				return
			}
			continue
		}
		name := programName(w0)
		if name == "busybox" {
			if a := u.words[1]; !a.literal || strings.HasPrefix(a.text, "-") {
				return
			}
			bw := newWrapper("busybox")
			bw.Argv[0] = w0.text
			u.wrappers = append(u.wrappers, bw)
			bb := w0
			u.execWord = &bb
			u.words = u.words[1:]
			continue
		}
		spec := wrapperSpecs[name]
		if spec == nil || !u.peel(name, spec) {
			return
		}
		u.execWord = nil
	}
}

// leadingAssignments consumes NAME=value words before a program. It
// reports false, consuming nothing, when no program follows.
func (u *unwrapped) leadingAssignments() bool {
	i := 0
	for i < len(u.words) && u.words[i].literal && isAssignment(u.words[i].text) {
		i++
	}
	if i == len(u.words) {
		return false
	}
	for _, w := range u.words[:i] {
		u.assigns = append(u.assigns, splitAssignment(w))
	}
	u.words = u.words[i:]
	return true
}

// splitAssignment splits a NAME=value word.
func splitAssignment(w shellWord) envAssignment {
	name, value, _ := strings.Cut(w.text, "=")
	return envAssignment{name: name, value: shellWord{text: value, literal: w.literal, subst: w.subst}}
}

// newWrapper returns a wrapper record with non-nil slices and map.
func newWrapper(name string) wire.Wrapper {
	return wire.Wrapper{Name: name, Argv: []string{name}, Flags: []string{}, FlagValues: map[string]string{}, Operands: []string{}}
}

// peel parses one wrapper's options at the start of u.words and, when a
// command follows, records the wrapper and moves u.words to that command.
func (u *unwrapped) peel(name string, spec *wrapperSpec) bool {
	words := u.words
	w := newWrapper(name)
	var (
		noRun bool
		chdir []shellWord
		paths []shellWord
		split []shellWord
	)
	// record notes option key (with value v when hasValue).
	record := func(key string, v shellWord, hasValue bool) {
		w.Flags = append(w.Flags, key)
		letter := byte(0)
		if len(key) == 2 {
			letter = key[1]
		}
		if letter != 0 && strings.IndexByte(spec.noRun, letter) >= 0 {
			noRun = true
		}
		if !hasValue {
			return
		}
		w.FlagValues[key] = v.text
		switch {
		case letter == 0:
		case letter == spec.chdirOption:
			chdir = append(chdir, v)
			paths = append(paths, v)
		case strings.IndexByte(spec.pathOptions, letter) >= 0:
			paths = append(paths, v)
		}
		if letter != 0 && letter == spec.splitOption {
			if parts, err := shlex.Split(v.text); err == nil && v.literal {
				for _, p := range parts {
					split = append(split, shellWord{text: p, literal: true})
				}
			} else {
				split = append(split, v)
			}
		}
	}

	i := 1
options:
	for i < len(words) {
		a := words[i]
		t := a.text
		switch {
		case !a.literal:
			break options
		case t == "--":
			i++
			break options
		case t == "-" && spec.dashIsI:
			record("-i", shellWord{}, false)
		case strings.HasPrefix(t, "--"):
			opt, v, hasValue := strings.Cut(t, "=")
			key, takesValue := spec.longValue[opt]
			if !takesValue {
				if key = spec.long[opt]; key == "" {
					key = opt
				}
			}
			if takesValue && !hasValue {
				if i+1 >= len(words) {
					return false
				}
				i++
				record(key, words[i], true)
			} else {
				record(key, shellWord{text: v, literal: true}, hasValue)
			}
		case len(t) > 1 && t[0] == '-':
			if spec.numeric && isDigits(t[1:]) {
				record("-n", shellWord{text: t[1:], literal: true}, true)
				break
			}
			for j := 1; j < len(t); j++ {
				c := t[j]
				if !isFlagChar(c) {
					return false // not an option this wrapper takes: leave it be
				}
				key := shortFlag(c)
				if strings.IndexByte(spec.valueShort, c) >= 0 {
					if j+1 < len(t) {
						record(key, shellWord{text: t[j+1:], literal: true}, true)
					} else if i+1 < len(words) {
						i++
						record(key, words[i], true)
					} else {
						return false
					}
					break
				}
				if strings.IndexByte(spec.optionalShort, c) >= 0 {
					record(key, shellWord{text: t[j+1:], literal: true}, j+1 < len(t))
					break
				}
				record(key, shellWord{}, false)
			}
		default:
			break options
		}
		i++
	}
	for k := 0; k < spec.positional; k++ {
		if i >= len(words) {
			return false
		}
		w.Operands = append(w.Operands, words[i].text)
		if spec.pathOperand {
			paths = append(paths, words[i])
		}
		i++
	}
	if spec.scriptAfter && i+1 < len(words) && words[i].literal && (words[i].text == "-c" || words[i].text == "--command") {
		// flock FILE -c SCRIPT: the wrapper stays the program and runs SCRIPT.
		u.scripts = append(u.scripts, words[i+1])
		u.scriptArg = i + 1
		return false
	}
	var assigns []envAssignment
	if spec.assignments {
		for i < len(words) && words[i].literal && isAssignment(words[i].text) {
			assigns = append(assigns, splitAssignment(words[i]))
			i++
		}
	}
	rest := words[i:]
	if len(split) > 0 {
		rest = append(split, rest...)
	}
	if noRun || len(rest) == 0 {
		return false
	}
	w.Argv[0] = words[0].text
	for _, a := range words[1:i] {
		w.Argv = append(w.Argv, a.text)
	}
	u.wrappers = append(u.wrappers, w)
	u.assigns = append(u.assigns, assigns...)
	u.chdirs = append(u.chdirs, chdir...)
	u.pathArgs = append(u.pathArgs, paths...)
	if spec.origin != "" {
		u.origin = spec.origin
	}
	u.words = rest
	return true
}

// isDigits reports whether s is a non-empty run of ASCII digits.
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
