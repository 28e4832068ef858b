package bundles

import (
	"context"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/storage"

	"avfs/wire"
)

// FromStore returns the bundles called names as OPA's bundle plugin
// activated them into store (the store of a plugins.Manager), in the
// order of names: each with its manifest's revision and roots, the
// modules the plugin wrote for it (parsed again with their annotations,
// in the Rego version the plugin recorded, RegoV1 when it recorded none)
// and the data under its roots (a bundle without roots owns all of data
// but OPA's own /system). They can then be compiled with other bundles as
// any loaded bundle (engine.NewPolicy), whose roots must not overlap.
//
// A name that was never activated into the store, or a module that no
// longer parses, is a bundle_invalid error naming it; a store that cannot
// be read is internal. FromStore only reads: it opens one read
// transaction, so what it returns is one consistent state of the store,
// and it is safe to call while the plugin activates other bundles.
func FromStore(ctx context.Context, store storage.Store, names []string) ([]*Bundle, error) {
	var out []*Bundle
	err := storage.Txn(ctx, store, storage.TransactionParams{}, func(txn storage.Transaction) error {
		ids, err := store.ListPolicies(ctx, txn)
		if err != nil {
			return wire.Errorf(wire.CodeInternal, "read the activated bundles: %w", err)
		}
		owner := moduleOwners(ids, names)
		for _, name := range names {
			b, err := fromStore(ctx, store, txn, name, owner)
			if err != nil {
				return err
			}
			out = append(out, b)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// fromStore rebuilds the one bundle called name; owner maps a module id to
// the name of the bundle that wrote it.
func fromStore(ctx context.Context, store storage.Store, txn storage.Transaction, name string, owner map[string]string) (*Bundle, error) {
	roots, err := bundle.ReadBundleRootsFromStore(ctx, store, txn, name)
	if storage.IsNotFound(err) {
		return nil, wire.Errorf(wire.CodeBundleInvalid, "bundle %s has not been activated", name).With("bundle", name)
	}
	if err != nil {
		return nil, wire.Errorf(wire.CodeInternal, "read the manifest of bundle %s: %w", name, err).With("bundle", name)
	}
	revision, err := bundle.ReadBundleRevisionFromStore(ctx, store, txn, name)
	if err != nil && !storage.IsNotFound(err) {
		return nil, wire.Errorf(wire.CodeInternal, "read the revision of bundle %s: %w", name, err).With("bundle", name)
	}
	b := &bundle.Bundle{Manifest: bundle.Manifest{Revision: revision, Roots: &roots}, Data: map[string]any{}}
	ids := make([]string, 0, len(owner))
	for id, o := range owner {
		if o == name {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		raw, err := store.GetPolicy(ctx, txn, id)
		if err != nil {
			return nil, wire.Errorf(wire.CodeInternal, "read module %s of bundle %s: %w", id, name, err).With("bundle", name)
		}
		version := ast.RegoV1
		if v, err := store.Read(ctx, txn, storage.Path{"system", "modules", strings.Trim(id, "/"), "rego_version"}); err == nil {
			if n, ok := number(v); ok {
				if rv, err := ast.RegoVersionFromIntStrict(n); err == nil {
					version = rv
				}
			}
		}
		parsed, err := ast.ParseModuleWithOpts(id, string(raw), ast.ParserOptions{ProcessAnnotation: true, RegoVersion: version})
		if err != nil {
			return nil, invalid(name, err)
		}
		b.Modules = append(b.Modules, bundle.ModuleFile{URL: id, Path: id, Raw: raw, Parsed: parsed})
	}
	for _, root := range roots {
		p, ok := storage.ParsePathEscaped("/" + strings.Trim(root, "/"))
		if !ok {
			return nil, wire.Errorf(wire.CodeBundleInvalid, "bundle %s: root %q is no data path", name, root).With("bundle", name)
		}
		v, err := store.Read(ctx, txn, p)
		switch {
		case storage.IsNotFound(err):
			continue
		case err != nil:
			return nil, wire.Errorf(wire.CodeInternal, "read the data of bundle %s under %q: %w", name, root, err).With("bundle", name)
		}
		if av, isAST := v.(ast.Value); isAST {
			if v, err = ast.JSON(av); err != nil {
				return nil, wire.Errorf(wire.CodeInternal, "read the data of bundle %s under %q: %w", name, root, err).With("bundle", name)
			}
		}
		if len(p) == 0 {
			all, _ := v.(map[string]any)
			for k, val := range all {
				if k != "system" {
					b.Data[k] = val
				}
			}
			continue
		}
		put(b.Data, p, v)
	}
	return &Bundle{Name: name, Bundle: b}, nil
}

// moduleOwners maps each module id to the bundle of names that wrote it:
// OPA's plugin names a bundle's modules by the bundle's name (the path of
// it when the name is a URL) followed by the module's path. A module goes
// to the longest name it starts with; one under no name is left out.
func moduleOwners(ids, names []string) map[string]string {
	owner := map[string]string{}
	for _, id := range ids {
		best := ""
		for _, name := range names {
			prefix := modulePrefix(name)
			if strings.HasPrefix(strings.TrimPrefix(id, "/"), prefix+"/") && len(prefix) > len(modulePrefix(best)) {
				best = name
			}
		}
		if best != "" {
			owner[id] = best
		}
	}
	return owner
}

// modulePrefix is what OPA's bundle plugin puts before the modules of the
// bundle called name (bundle.modulePathWithPrefix).
func modulePrefix(name string) string {
	if name == "" {
		return ""
	}
	if u, err := url.Parse(name); err == nil {
		return strings.TrimPrefix(path.Join(u.Host, u.Path), "/")
	}
	return strings.TrimPrefix(path.Join(name), "/")
}

// put sets the document at p in data, making the objects on the way.
func put(data map[string]any, p storage.Path, v any) {
	for _, k := range p[:len(p)-1] {
		next, ok := data[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			data[k] = next
		}
		data = next
	}
	data[p[len(p)-1]] = v
}

// number reads a rego_version the store holds (a json.Number, an AST
// number, or a Go number).
func number(v any) (int, bool) {
	switch n := v.(type) {
	case ast.Number:
		i, ok := n.Int()
		return i, ok
	case interface{ Int64() (int64, error) }:
		i, err := n.Int64()
		return int(i), err == nil
	case int:
		return n, true
	case float64:
		return int(n), true
	}
	return 0, false
}
