package engine

import (
	"context"
	"path"
	"slices"
	"strings"
)

// Workspace is what Parse may ask about the files of the vault a command
// runs in. Parse asks only about paths it builds itself, never about a
// path that leaves the vault, and only for the commands that need it
// (see localBin). A nil Workspace is asked nothing: the fields it fills
// stay empty, as for a vault without the files.
type Workspace interface {
	// IsFile reports whether the vault-absolute path p names a regular
	// file, symlinks followed as the command would follow them. It must
	// answer false whenever it cannot tell for sure (a storage error, a
	// symlink whose target is absolute or leaves the vault, ctx done):
	// false is the safe answer, since the command is then judged as if
	// the file were missing.
	IsFile(ctx context.Context, p string) bool
}

// localBinRunners are the programs that run a program installed in a
// node_modules/.bin of the project before they would fetch a package of
// that name, by the subcommands that do it ("" for the program itself):
// npx NAME, npm exec NAME, npm x NAME.
var localBinRunners = map[string][]string{
	"npx": {""},
	"npm": {"exec", "x"},
}

// localBin is wire.Command.LocalBin for a command of program name with
// args, run in dir: the vault path of node_modules/.bin/NAME in dir or the
// nearest ancestor that has it (npx's own lookup), where NAME is the
// literal word right after the runner (and its subcommand, and an
// optional "--"), a plain program name. Any option before NAME (npx -y,
// -p PKG, -c CMD, --ignore-existing), a version (eslint@8), a scope
// (@scope/pkg) or a path gives "": npx might fetch then. So does a
// directory that is not a known place in the vault, or no workspace.
func (b *inputBuilder) localBin(name string, args []shellWord, dir dirState) string {
	subs, ok := localBinRunners[name]
	if !ok || b.workspace == nil || dir.kind != dirVault || !strings.HasPrefix(dir.path, "/") || strings.HasPrefix(dir.path, "/..") {
		return ""
	}
	if subs[0] != "" {
		if len(args) == 0 || !args[0].literal || !slices.Contains(subs, args[0].text) {
			return ""
		}
		args = args[1:]
	}
	if len(args) > 0 && args[0].literal && args[0].text == "--" {
		args = args[1:]
	}
	if len(args) == 0 || !args[0].literal || !plainBinName(args[0].text) {
		return ""
	}
	for d := path.Clean(dir.path); ; d = path.Dir(d) {
		p := path.Join(d, "node_modules", ".bin", args[0].text)
		if b.workspace.IsFile(b.ctx, p) {
			return p
		}
		if d == "/" {
			return ""
		}
	}
}

// plainBinName reports whether s is a name npx looks up as it is: letters,
// digits and ._+- , not starting with a dot or a dash.
func plainBinName(s string) bool {
	if s == "" || len(s) > 255 || s[0] == '.' || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._+-", c) >= 0) {
			return false
		}
	}
	return true
}
