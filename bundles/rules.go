package bundles

import (
	"cmp"
	"slices"
)

// Rule is a rule that carries # METADATA, as `avfs policy inspect` lists it.
type Rule struct {
	ID       string `json:"id"`                 // custom.id, "" when missing
	Title    string `json:"title"`              // title
	Decision string `json:"decision,omitempty"` // custom.decision, "" when missing
	Path     string `json:"path"`               // the document the rule defines (data.avfs.rules.deny.reasons)
	Bundle   string `json:"bundle"`             // the name of the bundle it is in
	File     string `json:"file"`
	Row      int    `json:"row"`
}

// Rules lists the annotated rules of every bundle of the set, in bundle
// order, then by file and row.
func (s *Set) Rules() []Rule {
	var out []Rule
	for _, b := range s.Bundles {
		var rules []Rule
		for _, mf := range b.Bundle.Modules {
			if mf.Parsed == nil {
				continue
			}
			for _, a := range mf.Parsed.Annotations {
				if a.Scope != "rule" {
					continue
				}
				r := Rule{Title: a.Title, Bundle: b.Name, File: mf.Path}
				r.ID, _ = a.Custom["id"].(string)
				r.Decision, _ = a.Custom["decision"].(string)
				if p := a.GetTargetPath(); p != nil {
					r.Path = p.String()
				}
				if a.Location != nil {
					r.Row = a.Location.Row
				}
				rules = append(rules, r)
			}
		}
		slices.SortFunc(rules, func(x, y Rule) int {
			return cmp.Or(cmp.Compare(x.File, y.File), cmp.Compare(x.Row, y.Row))
		})
		out = append(out, rules...)
	}
	return out
}
