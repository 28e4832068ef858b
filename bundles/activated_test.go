package bundles

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"avfs/wire"
)

// TestModuleOwners: a module goes to the bundle whose name (its URL's
// path for a URL) is the longest prefix of its id, as OPA's plugin names
// them.
func TestModuleOwners(t *testing.T) {
	tests := []struct {
		name  string
		ids   []string
		names []string
		want  map[string]string
	}{
		{"one", []string{"a/x.rego"}, []string{"a"}, map[string]string{"a/x.rego": "a"}},
		{"longest", []string{"a/b/x.rego", "a/y.rego"}, []string{"a", "a/b"}, map[string]string{"a/b/x.rego": "a/b", "a/y.rego": "a"}},
		{"not a prefix of a name", []string{"ab/x.rego"}, []string{"a"}, map[string]string{}},
		{"url", []string{"example.com/b/x.rego"}, []string{"https://example.com/b"}, map[string]string{"example.com/b/x.rego": "https://example.com/b"}},
		{"other modules", []string{"/local/x.rego"}, []string{"a"}, map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := moduleOwners(tt.ids, tt.names); !maps.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// TestFromStore: bundles activated into a store as OPA's bundle plugin
// activates them come back with their revision, roots, modules (with
// annotations) and data, each with its own; a name never activated is
// bundle_invalid.
func TestFromStore(t *testing.T) {
	ctx := context.Background()
	store := inmem.New()
	mk := func(name, rev string, data map[string]any) *bundle.Bundle {
		roots := []string{"extensions/" + name}
		text := "package extensions." + name + "\n\n# METADATA\n# title: T\nsaid := data.extensions." + name + ".word\n"
		parsed, err := ast.ParseModuleWithOpts("/x.rego", text, ast.ParserOptions{ProcessAnnotation: true, RegoVersion: ast.RegoV1})
		if err != nil {
			t.Fatal(err)
		}
		return &bundle.Bundle{Manifest: bundle.Manifest{Revision: rev, Roots: &roots}, Data: data,
			Modules: []bundle.ModuleFile{{URL: "/x.rego", Path: "/x.rego", Raw: []byte(text), Parsed: parsed}}}
	}
	bs := map[string]*bundle.Bundle{
		"a":   mk("a", "ra", map[string]any{"extensions": map[string]any{"a": map[string]any{"word": "alpha"}}}),
		"a/b": mk("b", "rb", map[string]any{"extensions": map[string]any{"b": map[string]any{"word": "beta"}}}),
	}
	err := storage.Txn(ctx, store, storage.WriteParams, func(txn storage.Transaction) error {
		return bundle.Activate(&bundle.ActivateOpts{Ctx: ctx, Store: store, Txn: txn, Compiler: ast.NewCompiler(), Metrics: metrics.New(), Bundles: bs})
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := FromStore(ctx, store, []string{"a", "a/b"})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct{ name, rev, root, word string }{{"a", "ra", "extensions/a", "alpha"}, {"a/b", "rb", "extensions/b", "beta"}} {
		b := got[i]
		info := b.Info()
		if info.Name != want.name || info.Revision != want.rev || len(info.Roots) != 1 || info.Roots[0] != want.root {
			t.Errorf("bundle %d: %+v, want %+v", i, info, want)
		}
		if len(b.Bundle.Modules) != 1 || len(b.Bundle.Modules[0].Parsed.Annotations) != 1 {
			t.Errorf("bundle %s: modules %+v", want.name, b.Bundle.Modules)
		}
		ext := b.Bundle.Data["extensions"].(map[string]any)
		if len(ext) != 1 || ext[strings.TrimPrefix(want.root, "extensions/")].(map[string]any)["word"] != want.word {
			t.Errorf("bundle %s: data %+v", want.name, b.Bundle.Data)
		}
	}
	if err := (&Set{Bundles: got}).CheckRoots(); err != nil {
		t.Errorf("the rebuilt bundles overlap: %v", err)
	}
	if _, err := FromStore(ctx, store, []string{"never"}); wire.CodeOf(err) != wire.CodeBundleInvalid {
		t.Errorf("a bundle never activated: %v", err)
	}
}
