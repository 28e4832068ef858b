package engine

import (
	"slices"
	"strings"

	"github.com/google/shlex"

	"avfs/wire"
)

// wrapperSpec describes how a wrapper program (sudo, env, timeout, …) takes
// its own options before the command it runs. Option letters are listed
// without the dash; long options map to their short alias, or to
// themselves when they have none.
type wrapperSpec struct {
	valueShort    string                  // short options that take a value (attached or the next word)
	optionalShort string                  // short options with an optional attached value (xargs -i[R])
	flagShort     string                  // when set, the only short options without a value: any other letter stops peeling
	longValue     map[string]string       // long options that take a value (--opt=v or --opt v)
	long          map[string]string       // long options without a value (--opt=v still records v)
	strictLong    bool                    // a long option in neither map stops peeling (it may take a value)
	positional    int                     // operands before the command (timeout's DURATION)
	pathOperand   bool                    // the positional operands are paths (flock FILE, chroot DIR, script's log)
	assignments   bool                    // NAME=value words before the command set its environment
	dashIsI       bool                    // a lone "-" means -i (env)
	numeric       bool                    // "-N" is an option (nice -10)
	noRun         string                  // options after which nothing is run (sudo -l, command -v)
	needOption    string                  // when set, nothing is run unless one of these options is given (runuser -u)
	pathOptions   string                  // options whose value is a file or directory
	chdirOption   byte                    // option that sets the command's working directory
	splitOption   byte                    // option whose value is split into the command's first words (env -S)
	scriptAfter   bool                    // after the operands, -c/--command SCRIPT runs a shell script (flock)
	origin        string                  // Origin of the command it runs ("xargs")
	subcommands   map[string]*wrapperSpec // the first operand is a mode with options of its own (perf stat); other modes run nothing

	// How the command words become the command that runs.
	stopAt      []string // words that end the command; they and what follows are the wrapper's operands (parallel :::)
	shellRest   bool     // the command words, a leading -c aside, are joined into a script run by sh -c (watch, sg)
	execOption  byte     // option that runs the words directly instead (watch -x)
	shellOption byte     // option whose value is a script the wrapper runs with sh -c; every operand is its own (script -c)
	runPrefix   string   // program the command words are arguments of (capsh -- ARGS runs bash ARGS)
	// What the wrapper runs besides, or instead of, its command.
	scriptOptions string // options whose value is a shell script it runs too (perf --pre, hyperfine -p)
	shellOperands bool   // every operand is a shell script it runs; it stays the program (hyperfine)
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
	// Tracers and debuggers: options, then the traced command.
	"strace": {
		valueShort: "abeEIopPsSuUXO",
		longValue: map[string]string{"--output": "-o", "--attach": "-p", "--user": "-u", "--env": "-E", "--columns": "-a",
			"--detach-on": "-b", "--interruptible": "-I", "--trace-path": "-P", "--string-limit": "-s",
			"--summary-sort-by": "-S", "--summary-columns": "-U", "--const-print-style": "-X",
			"--trace": "--trace", "--signal": "--signal", "--status": "--status", "--abbrev": "--abbrev",
			"--verbose": "--verbose", "--raw": "--raw", "--read": "--read", "--write": "--write", "--inject": "--inject",
			"--fault": "--fault", "--kvm": "--kvm", "--argv0": "--argv0"},
		noRun: "p", pathOptions: "o",
	},
	"ltrace": {
		valueShort: "aADelnopsuwxFE",
		longValue:  map[string]string{"--output": "-o", "--library": "-l", "--indent": "-n", "--align": "-a"},
		noRun:      "p", pathOptions: "oF",
	},
	"valgrind":  {}, // every option is -x, --opt or --opt=value
	"catchsegv": {},
	"perf": {subcommands: map[string]*wrapperSpec{
		"stat":   perfSpec("eptCrIxGDoM", "--event", "--pid", "--tid", "--cpu", "--repeat", "--interval-print", "--field-separator", "--cgroup", "--delay", "--output", "--metrics"),
		"record": perfSpec("eptCFcmoGuDjkz", "--event", "--pid", "--tid", "--cpu", "--freq", "--count", "--mmap-pages", "--output", "--cgroup", "--uid", "--delay", "--branch-filter", "--clockid", "--call-graph"),
		"trace":  perfSpec("eptCoF", "--event", "--pid", "--tid", "--cpu", "--output", "--pf"),
	}},
	// Wrappers that run the command as another user or with other privileges.
	"runuser": {
		valueShort: "ugGw",
		longValue:  map[string]string{"--user": "-u", "--group": "-g", "--supp-group": "-G", "--whitelist-environment": "-w"},
		long:       map[string]string{"--preserve-environment": "-m", "--pty": "-P"},
		needOption: "u",
	},
	"setpriv": {
		longValue: map[string]string{"--ambient-caps": "--ambient-caps", "--inh-caps": "--inh-caps", "--bounding-set": "--bounding-set",
			"--ruid": "--ruid", "--euid": "--euid", "--rgid": "--rgid", "--egid": "--egid", "--reuid": "--reuid", "--regid": "--regid",
			"--groups": "--groups", "--securebits": "--securebits", "--pdeathsig": "--pdeathsig",
			"--selinux-label": "--selinux-label", "--apparmor-profile": "--apparmor-profile", "--landlock-access": "--landlock-access",
			"--landlock-rule": "--landlock-rule", "--seccomp-filter": "--seccomp-filter"},
		long: map[string]string{"--dump": "-d", "--nnp": "--nnp", "--no-new-privs": "--nnp", "--clear-groups": "--clear-groups",
			"--keep-groups": "--keep-groups", "--init-groups": "--init-groups", "--reset-env": "--reset-env"},
		strictLong: true, flagShort: "d", noRun: "d",
	},
	"gosu": {positional: 1},
	"sg":   {positional: 1, shellRest: true},
	"capsh": {
		runPrefix: "bash", // capsh [--opt…] -- ARGS runs bash ARGS
	},
	"nsenter": {
		valueShort:    "tSGW",
		optionalShort: "muinpCUTrw",
		longValue:     map[string]string{"--target": "-t", "--setuid": "-S", "--setgid": "-G", "--wdns": "-W"},
		long: map[string]string{"--all": "-a", "--mount": "-m", "--uts": "-u", "--ipc": "-i", "--net": "-n", "--pid": "-p",
			"--cgroup": "-C", "--user": "-U", "--time": "-T", "--root": "-r", "--wd": "-w", "--no-fork": "-F",
			"--follow-context": "-Z", "--preserve-credentials": "--preserve-credentials"},
		pathOptions: "rw",
	},
	"unshare": {
		valueShort:    "RwSG",
		optionalShort: "muinpUCT",
		longValue: map[string]string{"--root": "-R", "--wd": "-w", "--setuid": "-S", "--setgid": "-G",
			"--propagation": "--propagation", "--setgroups": "--setgroups", "--monotonic": "--monotonic", "--boottime": "--boottime"},
		long: map[string]string{"--mount": "-m", "--uts": "-u", "--ipc": "-i", "--net": "-n", "--pid": "-p", "--user": "-U",
			"--cgroup": "-C", "--time": "-T", "--fork": "-f", "--map-root-user": "-r", "--map-current-user": "-c"},
		pathOptions: "Rw",
	},
	"systemd-run": {
		valueShort: "HMupE",
		longValue: map[string]string{"--host": "-H", "--machine": "-M", "--unit": "-u", "--property": "-p", "--setenv": "-E",
			"--description": "--description", "--slice": "--slice", "--service-type": "--service-type", "--uid": "--uid",
			"--gid": "--gid", "--nice": "--nice", "--working-directory": "--working-directory",
			"--path-property": "--path-property", "--socket-property": "--socket-property", "--timer-property": "--timer-property",
			"--on-active": "--on-active", "--on-boot": "--on-boot", "--on-startup": "--on-startup",
			"--on-unit-active": "--on-unit-active", "--on-unit-inactive": "--on-unit-inactive", "--on-calendar": "--on-calendar"},
		long: map[string]string{"--user": "--user", "--system": "--system", "--scope": "--scope", "--no-ask-password": "--no-ask-password",
			"--no-block": "--no-block", "--wait": "--wait", "--remain-after-exit": "-r", "--same-dir": "-d", "--pty": "-t",
			"--pipe": "-P", "--quiet": "-q", "--collect": "-G", "--send-sighup": "--send-sighup", "--slice-inherit": "--slice-inherit",
			"--on-timezone-change": "--on-timezone-change", "--on-clock-change": "--on-clock-change"},
		strictLong: true, flagShort: "hrdtPqGS", noRun: "S",
	},
	// Wrappers that change the command's network, terminal, clock or display.
	"sshpass":      {valueShort: "fdpP", optionalShort: "e", pathOptions: "f"},
	"proxychains":  {valueShort: "f", pathOptions: "f"},
	"proxychains4": {valueShort: "f", pathOptions: "f"},
	"torsocks": {
		valueShort: "upaP",
		longValue:  map[string]string{"--user": "-u", "--pass": "-p", "--address": "-a", "--port": "-P"},
		long:       map[string]string{"--isolate": "-i", "--debug": "-d", "--quiet": "-q"},
		strictLong: true,
	},
	"unbuffer": {flagShort: "p"},
	"fakeroot": {
		valueShort: "lsi", flagShort: "u", strictLong: true,
		longValue: map[string]string{"--lib": "-l", "--faked": "--faked"},
		long:      map[string]string{"--unknown-is-real": "-u"},
	},
	"dbus-run-session": {longValue: map[string]string{"--config-file": "--config-file", "--dbus-daemon": "--dbus-daemon"}, strictLong: true},
	"faketime":         {longValue: map[string]string{"--date-prog": "--date-prog"}, flagShort: "mf", positional: 1},
	"ssh-agent":        {valueShort: "aEOPt", noRun: "k"},
	"xvfb-run": {
		valueShort: "efnpsw",
		longValue: map[string]string{"--error-file": "-e", "--auth-file": "-f", "--server-num": "-n",
			"--xauth-protocol": "-p", "--server-args": "-s", "--wait": "-w"},
		long:  map[string]string{"--auto-servernum": "-a", "--listen-tcp": "-l", "--help": "-h"},
		noRun: "h", pathOptions: "ef", strictLong: true,
	},
	// Wrappers that run shell code.
	"watch": {
		valueShort: "nq",
		longValue:  map[string]string{"--interval": "-n", "--equexit": "-q"},
		long: map[string]string{"--beep": "-b", "--color": "-c", "--differences": "-d", "--errexit": "-e", "--chgexit": "-g",
			"--precise": "-p", "--no-title": "-t", "--no-wrap": "-w", "--exec": "-x", "--no-rerun": "-r"},
		flagShort: "bcdegptwxrhv", noRun: "hv", shellRest: true, execOption: 'x',
	},
	"script": {
		valueShort:    "IOBTmcEo",
		optionalShort: "t",
		longValue: map[string]string{"--log-in": "-I", "--log-out": "-O", "--log-io": "-B", "--log-timing": "-T",
			"--logging-format": "-m", "--command": "-c", "--echo": "-E", "--output-limit": "-o"},
		long: map[string]string{"--append": "-a", "--return": "-e", "--flush": "-f", "--force": "--force", "--quiet": "-q",
			"--timing": "-t", "--help": "-h", "--version": "-V"},
		strictLong: true, flagShort: "aefqhV", noRun: "hV", pathOptions: "IOBT", pathOperand: true, shellOption: 'c',
	},
	"parallel": {
		valueShort:    "adEIjPnNsSLCJ",
		optionalShort: "ie",
		longValue: map[string]string{"--arg-file": "-a", "--delimiter": "-d", "--jobs": "-j", "--max-procs": "-j",
			"--max-args": "-n", "--max-replace-args": "-N", "--max-chars": "-s", "--sshlogin": "-S", "--max-lines": "-L",
			"--colsep": "-C", "--profile": "-J", "--joblog": "--joblog", "--results": "--results", "--res": "--results",
			"--tmpdir": "--tmpdir", "--timeout": "--timeout", "--delay": "--delay", "--retries": "--retries", "--halt": "--halt",
			"--workdir": "--workdir", "--wd": "--workdir", "--env": "--env", "--tagstring": "--tagstring", "--header": "--header",
			"--block": "--block", "--recstart": "--recstart", "--recend": "--recend", "--load": "--load", "--memfree": "--memfree",
			"--nice": "--nice", "--basefile": "--basefile", "--return": "--return", "--sshloginfile": "--sshloginfile",
			"--slf": "--sshloginfile", "--termseq": "--termseq", "--limit": "--limit", "--sshdelay": "--sshdelay"},
		long: map[string]string{"--keep-order": "-k", "--quote": "-q", "--null": "-0", "--no-run-if-empty": "-r",
			"--verbose": "-v", "--ungroup": "-u", "--xargs": "-m", "--dry-run": "--dry-run", "--eta": "--eta", "--bar": "--bar",
			"--progress": "--progress", "--tag": "--tag", "--pipe": "--pipe", "--line-buffer": "--line-buffer",
			"--group": "--group", "--halt-on-error": "--halt-on-error", "--trim": "--trim", "--shuf": "--shuf",
			"--will-cite": "--will-cite", "--citation": "--citation", "--version": "--version", "--help": "--help"},
		strictLong: true, flagShort: "k0qruvmXxtg", noRun: "", pathOptions: "a", execOption: 'q', shellRest: true,
		stopAt: []string{":::", "::::", ":::+", "::::+"},
	},
	"hyperfine": {
		valueShort: "wmMrsprcPDLSun",
		longValue: map[string]string{"--warmup": "-w", "--min-runs": "-m", "--max-runs": "-M", "--runs": "-r",
			"--setup": "-s", "--prepare": "-p", "--conclude": "--conclude", "--cleanup": "-c", "--parameter-scan": "-P",
			"--parameter-step-size": "-D", "--parameter-list": "-L", "--shell": "-S", "--time-unit": "-u",
			"--command-name": "-n", "--style": "--style", "--sort": "--sort", "--export-asciidoc": "--export-asciidoc",
			"--export-csv": "--export-csv", "--export-json": "--export-json", "--export-markdown": "--export-markdown",
			"--export-orgmode": "--export-orgmode", "--output": "--output", "--input": "--input", "--reference": "--reference"},
		long:       map[string]string{"--ignore-failure": "-i", "--show-output": "--show-output", "--help": "-h", "--version": "-V"},
		strictLong: true, flagShort: "iNhV", scriptOptions: "spc", shellOperands: true,
	},
}

// perfSpec is the spec of a perf mode (perf stat): short options that take
// a value, and long options that do. perf parses --opt value and
// --opt=value; a long option it does not list stops peeling.
func perfSpec(valueShort string, longValue ...string) *wrapperSpec {
	s := &wrapperSpec{valueShort: valueShort, longValue: map[string]string{}, strictLong: true,
		pathOptions: "o"}
	for _, l := range append(longValue, "--pre", "--post") {
		s.longValue[l] = l
	}
	s.long = map[string]string{"--all-cpus": "-a", "--no-inherit": "-i", "--scale": "-c", "--verbose": "-v",
		"--null": "-n", "--sync": "--sync", "--quiet": "-q", "--append": "--append",
		"--per-core": "--per-core", "--per-socket": "--per-socket", "--no-aggr": "-A", "--detailed": "-d"}
	return s
}

// multicallPrograms run the applet their first operand names (busybox wget).
var multicallPrograms = map[string]bool{"busybox": true, "toybox": true}

// unwrapped is a command with its wrappers peeled off.
type unwrapped struct {
	words      []shellWord     // the command that really runs
	wrappers   []wire.Wrapper  // outermost first
	assigns    []envAssignment // NAME=value set by leading words, env or sudo
	origin     string          // "xargs" when xargs runs it, else ""
	chdirs     []shellWord     // directories the wrappers change to (env -C, sudo -D), in order
	pathArgs   []shellWord     // wrapper option values and operands that are paths
	scripts    []shellWord     // shell scripts the wrappers run besides or instead of a command (flock -c, hyperfine)
	scriptArgs []int           // indexes in words of those scripts, when they are words of the command itself
	execWord   *shellWord      // the program file when it is not words[0] (busybox)
	tooDeep    bool            // more than maxWrappers wrappers: what runs is not known
}

// unwrap peels wrappers off words, outermost first, until the first word
// is a real program. A wrapper with no command after it (env alone,
// sudo -l) stays the program itself. When maxWrappers wrappers were
// peeled and another one follows, tooDeep is set.
func (u *unwrapped) unwrap(words []shellWord) {
	u.words = words
	for n := 0; len(u.words) > 1; n++ {
		w0 := u.words[0]
		if !w0.literal {
			return
		}
		if n == maxWrappers {
			name := programName(w0)
			u.tooDeep = isAssignment(w0.text) || multicallPrograms[name] || wrapperSpecs[name] != nil
			return
		}
		if isAssignment(w0.text) {
			if !u.leadingAssignments() {
				return
			}
			continue
		}
		name := programName(w0)
		if multicallPrograms[name] {
			if a := u.words[1]; !a.literal || strings.HasPrefix(a.text, "-") {
				return
			}
			bw := newWrapper(name)
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
	cur := spec // the options being read: spec's, then its subcommand's
	var (
		noRun, need, direct bool
		chdir, paths        []shellWord
		split, scripts      []shellWord
		scriptAt            []int // index in words of each of scripts
		shellCmd            *shellWord
		operands            []shellWord // the wrapper's own operands, when cur.shellOption
	)
	i := 1 // the word being read
	// record notes option key (with value v, in words[i], when hasValue).
	record := func(key string, v shellWord, hasValue bool) {
		w.Flags = append(w.Flags, key)
		letter := byte(0)
		if len(key) == 2 {
			letter = key[1]
		}
		in := func(set string) bool { return letter != 0 && strings.IndexByte(set, letter) >= 0 }
		noRun = noRun || in(cur.noRun)
		need = need || in(cur.needOption)
		direct = direct || letter != 0 && letter == cur.execOption
		if !hasValue {
			return
		}
		w.FlagValues[key] = v.text
		switch {
		case letter == 0:
		case letter == cur.chdirOption:
			chdir = append(chdir, v)
			paths = append(paths, v)
		case in(cur.pathOptions):
			paths = append(paths, v)
		case letter == cur.shellOption:
			vv := v
			shellCmd = &vv
		case in(cur.scriptOptions):
			scripts = append(scripts, v)
			scriptAt = append(scriptAt, i)
		}
		if letter != 0 && letter == cur.splitOption {
			if parts, err := shlex.Split(v.text); err == nil && v.literal {
				for _, p := range parts {
					split = append(split, shellWord{text: p, literal: true})
				}
			} else {
				split = append(split, v)
			}
		}
	}

	for {
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
			case t == "-" && cur.dashIsI:
				record("-i", shellWord{}, false)
			case strings.HasPrefix(t, "--"):
				opt, v, hasValue := strings.Cut(t, "=")
				key, takesValue := cur.longValue[opt]
				if !takesValue {
					known := false
					if key, known = cur.long[opt]; !known {
						if cur.strictLong {
							return false
						}
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
				if cur.numeric && isDigits(t[1:]) {
					record("-n", shellWord{text: t[1:], literal: true}, true)
					break
				}
				for j := 1; j < len(t); j++ {
					c := t[j]
					if !isFlagChar(c) {
						return false // not an option this wrapper takes: leave it be
					}
					key := shortFlag(c)
					if strings.IndexByte(cur.valueShort, c) >= 0 {
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
					if strings.IndexByte(cur.optionalShort, c) >= 0 {
						record(key, shellWord{text: t[j+1:], literal: true}, j+1 < len(t))
						break
					}
					if cur.flagShort != "" && strings.IndexByte(cur.flagShort, c) < 0 {
						return false
					}
					record(key, shellWord{}, false)
				}
			case cur.shellOption != 0:
				operands = append(operands, a) // options and operands mix (script FILE -c CMD)
			default:
				break options
			}
			i++
		}
		if cur.subcommands == nil {
			break
		}
		if i >= len(words) || !words[i].literal || cur.subcommands[words[i].text] == nil {
			return false
		}
		w.Operands = append(w.Operands, words[i].text)
		cur = cur.subcommands[words[i].text]
		i++
	}
	if cur.needOption != "" && !need {
		return false
	}
	for k := 0; k < cur.positional; k++ {
		if i >= len(words) {
			return false
		}
		operands = append(operands, words[i])
		i++
	}
	if cur.scriptAfter && i+1 < len(words) && words[i].literal && (words[i].text == "-c" || words[i].text == "--command") {
		// flock FILE -c SCRIPT: the wrapper stays the program and runs SCRIPT.
		u.scripts = append(u.scripts, words[i+1])
		u.scriptArgs = append(u.scriptArgs, i+1)
		return false
	}
	if cur.shellOperands {
		// hyperfine 'CMD'…: the wrapper stays the program and runs each operand.
		for k, a := range words[i:] {
			u.scripts = append(u.scripts, a)
			u.scriptArgs = append(u.scriptArgs, i+k)
		}
		u.scripts = append(u.scripts, scripts...)
		u.scriptArgs = append(u.scriptArgs, scriptAt...)
		return false
	}
	var assigns []envAssignment
	if cur.assignments {
		for i < len(words) && words[i].literal && isAssignment(words[i].text) {
			assigns = append(assigns, splitAssignment(words[i]))
			i++
		}
	}
	end := len(words)
	for k := i; k < len(words) && len(cur.stopAt) > 0; k++ {
		if words[k].literal && slices.Contains(cur.stopAt, words[k].text) {
			end = k
			break
		}
	}
	rest := words[i:end]
	switch {
	case cur.shellOption != 0:
		if shellCmd == nil {
			return false
		}
		operands = append(operands, rest...)
		rest = []shellWord{{text: "sh", literal: true}, {text: "-c", literal: true}, *shellCmd}
	case len(split) > 0:
		rest = append(split, rest...)
	case cur.shellRest && !direct && len(rest) > 0:
		if rest[0].literal && rest[0].text == "-c" {
			rest = rest[1:]
		}
		rest = shellCommand(rest)
	case cur.runPrefix != "" && len(rest) > 0:
		rest = append([]shellWord{{text: cur.runPrefix, literal: true}}, rest...)
	}
	if noRun || len(rest) == 0 {
		return false
	}
	w.Argv[0] = words[0].text
	for _, a := range words[1:i] {
		w.Argv = append(w.Argv, a.text)
	}
	for _, a := range words[end:] {
		w.Argv = append(w.Argv, a.text)
		operands = append(operands, a)
	}
	for _, a := range operands {
		w.Operands = append(w.Operands, a.text)
		if cur.pathOperand {
			paths = append(paths, a)
		}
	}
	u.wrappers = append(u.wrappers, w)
	u.assigns = append(u.assigns, assigns...)
	u.chdirs = append(u.chdirs, chdir...)
	u.pathArgs = append(u.pathArgs, paths...)
	u.scripts = append(u.scripts, scripts...)
	if cur.origin != "" {
		u.origin = cur.origin
	}
	u.words = rest
	return true
}

// shellCommand is `sh -c SCRIPT` for words a wrapper joins with spaces
// into SCRIPT (watch, sg); SCRIPT is literal when every word is.
func shellCommand(words []shellWord) []shellWord {
	script := shellWord{literal: true}
	parts := make([]string, len(words))
	for k, a := range words {
		parts[k] = a.text
		script.literal = script.literal && a.literal
		script.subst = script.subst || a.subst
	}
	script.text = strings.Join(parts, " ")
	if len(words) == 0 {
		return nil
	}
	return []shellWord{{text: "sh", literal: true}, {text: "-c", literal: true}, script}
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
