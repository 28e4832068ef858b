package bundles

import (
	"maps"
	"testing"
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
