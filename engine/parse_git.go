package engine

import (
	"strings"

	"github.com/google/shlex"
)

// gitConfigCommands are the git configuration keys (lower case) whose value
// git runs as a shell command. A key with a "*" is a pattern of one
// subsection ("alias.*" is alias.NAME). The value is "!" when git runs it
// only when it starts with "!" (an alias that is a shell command), "" when
// always.
var gitConfigCommands = map[string]string{
	"core.pager": "", "core.sshcommand": "", "core.fsmonitor": "", "core.editor": "", "core.askpass": "",
	"sequence.editor": "", "diff.external": "", "gpg.program": "", "credential.helper": "!",
	"alias.*": "!", "pager.*": "", "diff.*.textconv": "", "diff.*.command": "", "merge.*.driver": "",
	"filter.*.clean": "", "filter.*.smudge": "", "filter.*.process": "", "uploadpack.packobjectshook": "",
}

// gitEnvCommands are the environment variables whose value git runs as a
// shell command; GIT_CONFIG_PARAMETERS holds `'key'='value'` pairs of
// configuration, read as git -c is.
var gitEnvCommands = map[string]bool{
	"GIT_SSH_COMMAND": true, "GIT_PAGER": true, "GIT_EXTERNAL_DIFF": true, "GIT_EDITOR": true,
	"GIT_SEQUENCE_EDITOR": true, "GIT_ASKPASS": true,
}

// gitValueOptions are git's global options that take the next word as
// their value when it is not attached with "=".
var gitValueOptions = map[string]bool{
	"-C": true, "-c": true, "--git-dir": true, "--work-tree": true, "--namespace": true,
	"--super-prefix": true, "--config-env": true, "--list-cmds": true, "--attr-source": true,
}

// gitConfigCommand returns the shell command a configuration key=value
// makes git run, and whether it does.
func gitConfigCommand(key string, value shellWord) (shellWord, bool) {
	key = strings.ToLower(key)
	kind, ok := gitConfigCommands[key]
	if !ok {
		parts := strings.Split(key, ".")
		if len(parts) < 2 {
			return shellWord{}, false
		}
		// alias.NAME, pager.NAME; diff.NAME.textconv …
		pattern := parts[0] + ".*"
		if len(parts) > 2 {
			pattern += "." + parts[len(parts)-1]
		}
		if kind, ok = gitConfigCommands[pattern]; !ok {
			return shellWord{}, false
		}
	}
	if kind == "!" {
		if value.literal && !strings.HasPrefix(value.text, "!") {
			return shellWord{}, false
		}
		value.text = strings.TrimPrefix(value.text, "!")
	}
	return value, strings.TrimSpace(value.text) != ""
}

// gitCommands finds the shell commands a git command runs because of its
// configuration: git -c KEY=VALUE before the subcommand, and the
// environment variables of gitEnvCommands and GIT_CONFIG_PARAMETERS among
// assigns. It returns them and, in skip (nil when none), the args that
// hold them, which are code rather than paths.
func gitCommands(args []shellWord, assigns []envAssignment) (cmds []shellWord, skip []bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !a.literal && !strings.HasPrefix(a.text, "-") {
			break
		}
		t := a.text
		var kv shellWord
		switch {
		case t == "-c" && i+1 < len(args):
			i++
			kv = args[i]
		case strings.HasPrefix(t, "-c") && len(t) > 2:
			kv = shellWord{text: t[2:], literal: a.literal, subst: a.subst}
		case gitValueOptions[t]:
			i++
			continue
		case strings.HasPrefix(t, "-"):
			continue
		default:
			i = len(args) // the subcommand: its options are its own
			continue
		}
		key, value, ok := strings.Cut(kv.text, "=")
		if !ok {
			continue
		}
		if c, ok := gitConfigCommand(key, shellWord{text: value, literal: kv.literal, subst: kv.subst}); ok {
			cmds = append(cmds, c)
			if skip == nil {
				skip = make([]bool, len(args))
			}
			skip[i] = true
		}
	}
	for _, as := range assigns {
		switch {
		case gitEnvCommands[as.name] && strings.TrimSpace(as.value.text) != "":
			cmds = append(cmds, as.value)
		case as.name == "GIT_CONFIG_PARAMETERS":
			cmds = append(cmds, gitConfigParameters(as.value)...)
		}
	}
	return cmds, skip
}

// gitConfigParameters reads GIT_CONFIG_PARAMETERS ('key'='value' pairs,
// shell-quoted) for commands; a value that is not literal, or does not
// split, is returned whole as a command that is not known.
func gitConfigParameters(v shellWord) []shellWord {
	parts, err := shlex.Split(v.text)
	if !v.literal || err != nil {
		return []shellWord{{text: v.text, subst: v.subst}}
	}
	var cmds []shellWord
	for _, p := range parts {
		key, value, ok := strings.Cut(p, "=")
		if !ok {
			continue
		}
		if c, ok := gitConfigCommand(key, shellWord{text: value, literal: true}); ok {
			cmds = append(cmds, c)
		}
	}
	return cmds
}
