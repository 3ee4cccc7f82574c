package metricfilter

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestNew(t *testing.T) {
	for _, tc := range []struct {
		name        string
		allow, deny []string
		wantErr     string
	}{
		{name: "neither"},
		{name: "allow", allow: []string{"emptydir_used_bytes", "emptydir_.*_limit_bytes"}},
		{name: "deny", deny: []string{"go_.*"}},
		{name: "both", allow: []string{"a"}, deny: []string{"b"}, wantErr: "mutually exclusive"},
		{name: "invalid expression", deny: []string{"go_(.*"}, wantErr: `denylist: "go_(.*"`},
		{name: "empty entry", allow: []string{"a", ""}, wantErr: "allowlist: an empty entry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.allow, tc.deny)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("New(%q, %q) = %v, want error containing %q", tc.allow, tc.deny, err, tc.wantErr)
			}
		})
	}
}

func TestExposes(t *testing.T) {
	names := []string{"emptydir_used_bytes", "emptydir_used_bytes_total", "emptydir_limit_bytes",
		"emptydir_pod_ephemeral_storage_limit_bytes", "emptydir_inodes_used", "go_goroutines"}
	for _, tc := range []struct {
		name        string
		allow, deny []string
		want        []string
	}{
		{"no lists: all", nil, nil, names},
		// A name matches itself only: an entry matches the whole family name.
		{"allow by name", []string{"emptydir_used_bytes"}, nil, []string{"emptydir_used_bytes"}},
		{"allow by expression", []string{"emptydir_.*limit_bytes", " go_goroutines "}, nil,
			[]string{"emptydir_limit_bytes", "emptydir_pod_ephemeral_storage_limit_bytes", "go_goroutines"}},
		{"deny", nil, []string{"go_.*", "emptydir_inodes_used"},
			[]string{"emptydir_used_bytes", "emptydir_used_bytes_total", "emptydir_limit_bytes", "emptydir_pod_ephemeral_storage_limit_bytes"}},
		// An alternation is one entry: it is grouped before the anchors are added.
		{"alternation", []string{"emptydir_used_bytes|go_goroutines"}, nil, []string{"emptydir_used_bytes", "go_goroutines"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := New(tc.allow, tc.deny)
			if err != nil {
				t.Fatal(err)
			}
			got := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !f.Exposes(n) })
			if !slices.Equal(got, tc.want) {
				t.Errorf("exposed %q, want %q", got, tc.want)
			}
		})
	}
}

// TestGatherer: the filtered gatherer gives the families the filter exposes, with all their
// series, and nothing of the others.
func TestGatherer(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	used := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "emptydir_used_bytes", Help: "u"}, []string{"volume"})
	used.WithLabelValues("a").Set(1)
	used.WithLabelValues("b").Set(2)
	inodes := prometheus.NewGauge(prometheus.GaugeOpts{Name: "emptydir_inodes_used", Help: "i"})
	reg.MustRegister(used, inodes)

	f, err := New(nil, []string{"emptydir_inodes_.*"})
	if err != nil {
		t.Fatal(err)
	}
	mfs, err := f.Gatherer(reg).Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 1 || mfs[0].GetName() != "emptydir_used_bytes" || len(mfs[0].GetMetric()) != 2 {
		t.Fatalf("gathered %v, want emptydir_used_bytes with its 2 series only", mfs)
	}
	if all, _ := (&Filter{}).Gatherer(reg).Gather(); len(all) != 2 {
		t.Errorf("the zero filter gathered %d families, want 2", len(all))
	}
}

// TestOptIn: the opt-in families are hidden unless the opt-in list names them, whatever the
// allow list says; the deny list still hides an opted-in family; a misspelt opt-in is refused.
func TestOptIn(t *testing.T) {
	optInFamilies := []string{"emptydir_inodes_used", "emptydir_measurement_age_seconds", "emptydir_capacity_bytes"}
	names := []string{"emptydir_used_bytes", "emptydir_inodes_used", "emptydir_measurement_age_seconds", "emptydir_capacity_bytes", "go_goroutines"}
	for _, tc := range []struct {
		name               string
		allow, deny, optIn []string
		want               []string
	}{
		{"none opted in", nil, nil, nil, []string{"emptydir_used_bytes", "go_goroutines"}},
		{"one by name", nil, nil, []string{"emptydir_inodes_used"}, []string{"emptydir_used_bytes", "emptydir_inodes_used", "go_goroutines"}},
		{"all by expression", nil, nil, []string{".*"}, names},
		{"an allow list does not opt in", []string{"emptydir_.*"}, nil, nil, []string{"emptydir_used_bytes"}},
		{"allow and opt in", []string{"emptydir_.*"}, nil, []string{"emptydir_capacity_bytes"}, []string{"emptydir_used_bytes", "emptydir_capacity_bytes"}},
		{"deny wins", nil, []string{"emptydir_inodes_used"}, []string{"emptydir_inodes_used|emptydir_capacity_bytes"},
			[]string{"emptydir_used_bytes", "emptydir_capacity_bytes", "go_goroutines"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, err := New(tc.allow, tc.deny)
			if err != nil {
				t.Fatal(err)
			}
			f, err := base.WithOptIn(optInFamilies, tc.optIn)
			if err != nil {
				t.Fatal(err)
			}
			got := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return !f.Exposes(n) })
			if !slices.Equal(got, tc.want) {
				t.Errorf("exposed %q, want %q", got, tc.want)
			}
		})
	}
	for optIn, wantErr := range map[string]string{
		"emptydir_inode_used": `"emptydir_inode_used" matches none of the opt-in families emptydir_inodes_used, emptydir_measurement_age_seconds, emptydir_capacity_bytes`,
		"go_goroutines":       `"go_goroutines" matches none`,
		"emptydir_(":          `metric opt-in list: "emptydir_("`,
	} {
		if _, err := (*Filter)(nil).WithOptIn(optInFamilies, []string{optIn}); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("opt-in %q: %v, want an error containing %s", optIn, err, wantErr)
		}
	}
}
