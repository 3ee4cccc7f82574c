// Package metricfilter drops metric families from what a Gatherer gives, by allow and deny
// lists of names and regular expressions and an opt-in list, as kube-state-metrics'
// --metric-allowlist, --metric-denylist and --metric-opt-in-list do: large users keep the
// series their rules and dashboards need and pay for no others.
package metricfilter

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Filter decides which metric families are exposed. The zero Filter exposes all.
type Filter struct {
	allow, deny []*regexp.Regexp
	// optInFamilies are exposed only when optIn matches them (WithOptIn).
	optInFamilies []string
	optIn         []*regexp.Regexp
}

// WithOptIn returns f with the families optInFamilies (exact names) hidden unless an entry
// of optIn (names and/or regular expressions, as the lists of New) matches them, as
// kube-state-metrics' --metric-opt-in-list does: an allow list alone does not expose them. An
// entry that matches none of optInFamilies is an error, so a misspelt opt-in is not silently
// without effect.
func (f *Filter) WithOptIn(optInFamilies, optIn []string) (*Filter, error) {
	var res []*regexp.Regexp
	for _, item := range optIn {
		re, err := compile([]string{item})
		if err != nil {
			return nil, fmt.Errorf("metric opt-in list: %w", err)
		}
		if !slices.ContainsFunc(optInFamilies, re[0].MatchString) {
			return nil, fmt.Errorf("metric opt-in list: %q matches none of the opt-in families %s", item, strings.Join(optInFamilies, ", "))
		}
		res = append(res, re...)
	}
	out := &Filter{optInFamilies: slices.Clone(optInFamilies), optIn: res}
	if f != nil {
		out.allow, out.deny = f.allow, f.deny
	}
	return out, nil
}

// New builds a Filter from an allow list and a deny list, each of exact metric names and/or
// regular expressions, every one matched against the whole family name (anchored). At most one
// of the two may be given: with an allow list only the families it matches are exposed, with
// a deny list all but those it matches. An invalid expression, or both lists, is an error.
func New(allow, deny []string) (*Filter, error) {
	if len(allow) > 0 && len(deny) > 0 {
		return nil, errors.New("the metric allowlist and denylist are mutually exclusive")
	}
	a, err := compile(allow)
	if err != nil {
		return nil, fmt.Errorf("metric allowlist: %w", err)
	}
	d, err := compile(deny)
	if err != nil {
		return nil, fmt.Errorf("metric denylist: %w", err)
	}
	return &Filter{allow: a, deny: d}, nil
}

func compile(items []string) ([]*regexp.Regexp, error) {
	var out []*regexp.Regexp
	for _, item := range items {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, errors.New("an empty entry")
		}
		re, err := regexp.Compile("^(?:" + item + ")$")
		if err != nil {
			return nil, fmt.Errorf("%q: %w", item, err)
		}
		out = append(out, re)
	}
	return out, nil
}

// Exposes reports whether the family name is exposed.
func (f *Filter) Exposes(name string) bool {
	if f == nil {
		return true
	}
	if slices.Contains(f.optInFamilies, name) && !matchesAny(f.optIn, name) {
		return false
	}
	if len(f.allow) > 0 {
		return matchesAny(f.allow, name)
	}
	return !matchesAny(f.deny, name)
}

func matchesAny(res []*regexp.Regexp, name string) bool {
	for _, re := range res {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

// Gatherer gives what g gathers, less the families f does not expose.
func (f *Filter) Gatherer(g prometheus.Gatherer) prometheus.Gatherer {
	if f == nil || (len(f.allow) == 0 && len(f.deny) == 0 && len(f.optInFamilies) == 0) {
		return g
	}
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := g.Gather()
		kept := mfs[:0]
		for _, mf := range mfs {
			if f.Exposes(mf.GetName()) {
				kept = append(kept, mf)
			}
		}
		return kept, err
	})
}
