package engine

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
)

// fakeWorkspace is a vault with the regular files listed, and records
// what it was asked.
type fakeWorkspace struct {
	files []string
	mu    sync.Mutex
	asked []string
}

func (w *fakeWorkspace) IsFile(_ context.Context, p string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.asked = append(w.asked, p)
	return slices.Contains(w.files, p)
}

// TestParseLocalBin: npx NAME, npm exec NAME and npm x NAME record the
// program of the vault's node_modules/.bin they would run, found from the
// command's directory up, and only when npx would not fetch.
func TestParseLocalBin(t *testing.T) {
	files := []string{"/node_modules/.bin/eslint", "/web/node_modules/.bin/vite", "/web/app/node_modules/.bin/tsc"}
	for _, tc := range []struct {
		name string
		req  ParseRequest
		want []string // local_bin of each command
	}{
		{"npx", argvReq("npx", "eslint", "."), []string{"/node_modules/.bin/eslint"}},
		{"from an ancestor", ParseRequest{Argv: []string{"npx", "vite", "build"}, Cwd: "/web/app/src"}, []string{"/web/node_modules/.bin/vite"}},
		{"the nearest one", ParseRequest{Argv: []string{"npx", "tsc", "-p", "tsconfig.json"}, Cwd: "/web/app"}, []string{"/web/app/node_modules/.bin/tsc"}},
		{"not in a sibling", ParseRequest{Argv: []string{"npx", "tsc"}, Cwd: "/web"}, []string{""}},
		{"after --", argvReq("npx", "--", "eslint"), []string{"/node_modules/.bin/eslint"}},
		{"npm exec", argvReq("npm", "exec", "eslint"), []string{"/node_modules/.bin/eslint"}},
		{"npm x --", argvReq("npm", "x", "--", "eslint", "--fix"), []string{"/node_modules/.bin/eslint"}},
		{"behind wrappers", argvReq("env", "CI=1", "timeout", "60", "npx", "eslint"), []string{"/node_modules/.bin/eslint"}},
		{"in a script after cd", shellReq("cd web && npx vite"), []string{"", "/web/node_modules/.bin/vite"}},
		{"in a sandbox", inSandbox(argvReq("npx", "eslint")), []string{"/node_modules/.bin/eslint"}},

		{"not installed", argvReq("npx", "prettier"), []string{""}},
		{"--yes first", argvReq("npx", "--yes", "eslint"), []string{""}},
		{"-y first", argvReq("npx", "-y", "eslint"), []string{""}},
		{"a package given", argvReq("npx", "-p", "eslint", "eslint"), []string{""}},
		{"--package=", argvReq("npx", "--package=eslint", "eslint"), []string{""}},
		{"a command given", argvReq("npx", "-c", "eslint"), []string{"", ""}}, // -c runs eslint as a command of its own
		{"a version", argvReq("npx", "eslint@8", "."), []string{""}},
		{"a scope", argvReq("npx", "@eslint/create-config"), []string{""}},
		{"a path", argvReq("npx", "../node_modules/.bin/eslint"), []string{""}},
		{"a dot name", argvReq("npx", ".bin"), []string{""}},
		{"a variable", shellReq(`npx "$TOOL"`), []string{""}},
		{"npx alone", argvReq("npx"), []string{""}},
		{"npm install", argvReq("npm", "install", "eslint"), []string{""}},
		{"npm exec without a name", argvReq("npm", "exec"), []string{""}},
		{"npm with an option first", argvReq("npm", "--prefix", "web", "exec", "vite"), []string{""}},
		{"another runner", argvReq("pnpm", "dlx", "eslint"), []string{""}},
		{"not a runner", argvReq("eslint", "."), []string{""}},
		{"a directory only known at run time", shellReq(`cd "$D" && npx eslint`), []string{"", ""}},
		{"the home", shellReq(`cd && npx eslint`), []string{"", ""}},
		{"above the vault", shellReq("cd ../.. && npx eslint"), []string{"", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws := &fakeWorkspace{files: files}
			tc.req.Workspace = ws
			tc.req.PathEnv = "/nonexistent"
			in, err := Parse(context.Background(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range in.Commands {
				got = append(got, c.LocalBin)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("local_bin %q, want %q", got, tc.want)
			}
			for _, p := range ws.asked {
				if !strings.HasPrefix(p, "/") || strings.Contains(p, "..") || !strings.Contains(p, "/node_modules/.bin/") {
					t.Errorf("asked about %q", p)
				}
			}
			// Without a workspace, nothing is found.
			tc.req.Workspace = nil
			in, err = Parse(context.Background(), tc.req)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range in.Commands {
				if c.LocalBin != "" {
					t.Errorf("without a workspace: local_bin %q", c.LocalBin)
				}
			}
		})
	}
}
