package runner

import (
	"context"
	"strings"
	"testing"

	"avfs/vault"
)

// TestVaultFiles: what the parser learns of the vault's files follows
// relative symlinks within the vault, and nothing that means something
// else in the command's view.
func TestVaultFiles(t *testing.T) {
	ctx := context.Background()
	v, err := vault.NewStore(t.TempDir(), vault.Options{Actor: "test"}).Create(ctx, "v1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	if _, err := v.WriteFile(ctx, "/node_modules/eslint/bin/eslint.js", strings.NewReader("#!/usr/bin/env node\n"), vault.WriteOptions{Parents: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Mkdir(ctx, "/node_modules/.bin", 0o755, false); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Mkdir(ctx, "/web/sub", 0o755, true); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"/node_modules/.bin/eslint":   "../eslint/bin/eslint.js",
		"/node_modules/.bin/dangling": "../gone/bin/x.js",
		"/node_modules/.bin/abs":      "/node_modules/eslint/bin/eslint.js",
		"/node_modules/.bin/up":       "../../../usr/bin/env",
		"/node_modules/.bin/loop":     "loop",
		"/node_modules/.bin/dir":      "../eslint",
		"/node_modules/.bin/twice":    "eslint",
		"/web/node_modules":           "../node_modules",
		"/web/sub/node_modules":       "/node_modules",
	} {
		if _, err := v.Symlink(ctx, target, link); err != nil {
			t.Fatal(err)
		}
	}
	f := vaultFiles{v}
	for p, want := range map[string]bool{
		"/node_modules/eslint/bin/eslint.js":   true,
		"/node_modules/.bin/eslint":            true,
		"/node_modules/.bin/twice":             true,
		"/web/node_modules/.bin/eslint":        true,  // a relative link on the way
		"/web/sub/node_modules/.bin/eslint":    false, // an absolute link on the way
		"/node_modules/.bin/abs":               false,
		"/node_modules/.bin/up":                false,
		"/node_modules/.bin/dangling":          false,
		"/node_modules/.bin/loop":              false,
		"/node_modules/.bin/dir":               false,
		"/node_modules/.bin":                   false,
		"/node_modules/.bin/missing":           false,
		"/node_modules/eslint/bin/eslint.js/x": false,
	} {
		if got := f.IsFile(ctx, p); got != want {
			t.Errorf("IsFile(%s) = %v, want %v", p, got, want)
		}
	}
}
