package sandbox

import (
	"os"
	"path/filepath"
	"strings"

	"avfs/wire"
)

// toolchainLayouts say what of a PATH entry outside the system
// directories a sandbox shows, read-only, for the programs there to work:
// an entry that contains Marker shows the prefix up to the end of Marker
// and Segments more path segments (pyenv's shims need pyenv's whole root;
// one nvm node its own version), plus Also, relative to the user's home.
// An entry matching no row shows only itself.
var toolchainLayouts = []struct {
	Marker   string
	Segments int
	Also     []string
}{
	{Marker: "/.pyenv"},
	{Marker: "/.rbenv"},
	{Marker: "/.asdf"},
	{Marker: "/.nodenv"},
	{Marker: "/.sdkman"},
	{Marker: "/.volta"},
	{Marker: "/.bun"},
	{Marker: "/.deno"},
	{Marker: "/.nvm/versions/node", Segments: 1},
	{Marker: "/.cargo/bin", Also: []string{".rustup"}},
	{Marker: "/.local/bin", Also: []string{".local/lib"}},
}

// Toolchains are the host directories a sandbox over view in shows at
// their own paths for pathList (the command's PATH) to work: each entry
// that is absolute, exists, and is not in the view already (system
// directories, the workspace, scratch), widened by toolchainLayouts.
// hostHome is the invoking user's home.
func Toolchains(pathList, hostHome string, in wire.SandboxInput) []string {
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if seen[p] {
			return
		}
		if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
			return
		}
		for _, q := range out { // already shown by a wider one
			if under(p, q) {
				return
			}
		}
		seen[p] = true
		out = append(out, p)
	}
	for _, entry := range filepath.SplitList(pathList) {
		if !filepath.IsAbs(entry) {
			continue
		}
		entry = filepath.Clean(entry)
		if inView(entry, in) {
			continue
		}
		shown := entry
		var also []string
		for _, l := range toolchainLayouts {
			i := strings.Index(entry+"/", l.Marker+"/")
			if i < 0 {
				continue
			}
			shown = entry[:i+len(l.Marker)]
			rest := strings.Split(strings.Trim(entry[i+len(l.Marker):], "/"), "/")
			for k := 0; k < l.Segments && k < len(rest) && rest[k] != ""; k++ {
				shown += "/" + rest[k]
			}
			for _, a := range l.Also {
				also = append(also, filepath.Join(hostHome, a))
			}
			break
		}
		add(shown)
		for _, a := range also {
			add(a)
		}
	}
	return out
}

// inView reports whether p is shown by the sandbox in describes anyway
// (its workspace, read-only system or scratch). The home is not: it is
// private and empty but for what is bound into it, toolchains included.
func inView(p string, in wire.SandboxInput) bool {
	for _, d := range append(append([]string{in.Workspace}, in.ReadOnlySystem...), in.Scratch...) {
		if d != "" && d != in.Home && under(p, d) {
			return true
		}
	}
	return false
}
