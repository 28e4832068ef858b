package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"
)

// Shell completion scripts. Each asks avfs itself for the candidates through
// urfave/cli's hidden --generate-bash-completion flag, so they stay right as
// commands and flags change. The bash script uses only bash's own COMP_WORDS
// (it does not need the bash-completion package).
const bashCompletion = `# bash completion for avfs; load with: source <(avfs completion bash)
_avfs_complete() {
  local cur="${COMP_WORDS[COMP_CWORD]}"
  local -a words=("${COMP_WORDS[@]:1:COMP_CWORD-1}")
  local opts
  if [[ "$cur" == -* ]]; then
    opts=$("${COMP_WORDS[0]}" "${words[@]}" "$cur" --generate-bash-completion 2>/dev/null)
  else
    opts=$("${COMP_WORDS[0]}" "${words[@]}" --generate-bash-completion 2>/dev/null)
  fi
  local IFS=$'\n'
  COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}
complete -o bashdefault -o default -F _avfs_complete avfs
`

const zshCompletion = `#compdef avfs
# zsh completion for avfs; load with: source <(avfs completion zsh)
_avfs() {
  local -a opts
  local cur=${words[-1]}
  if [[ "$cur" == -* ]]; then
    opts=("${(@f)$(${words[1]} ${words[@]:1:#words[@]-2} ${cur} --generate-bash-completion 2>/dev/null)}")
  else
    opts=("${(@f)$(${words[1]} ${words[@]:1:#words[@]-2} --generate-bash-completion 2>/dev/null)}")
  fi
  if [[ "${opts[1]}" != "" ]]; then
    _describe 'values' opts
  else
    _files
  fi
}
compdef _avfs avfs
`

func completionCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script (bash, zsh or fish)",
		UsageText: "avfs completion bash|zsh|fish\n\nexample: source <(avfs completion bash)",
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageError("completion needs one shell: bash, zsh or fish")
			}
			var script string
			switch c.Args().First() {
			case "bash":
				script = bashCompletion
			case "zsh":
				script = zshCompletion
			case "fish":
				s, err := c.App.ToFishCompletion()
				if err != nil {
					return err
				}
				script = s
			default:
				return usageError("unknown shell %q: want bash, zsh or fish", c.Args().First())
			}
			_, err := io.WriteString(e.stdout, script)
			return err
		},
	}
}

func manCommand(e *env) *cli.Command {
	return &cli.Command{
		Name:      "man",
		Usage:     "print the avfs manual page (roff)",
		UsageText: "avfs man\n\nexample: avfs man | man -l -",
		Action: func(c *cli.Context) error {
			page, err := manPage(newApp(&env{}))
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(e.stdout, page)
			return err
		},
	}
}
