package cliflag

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
)

type flags struct {
	name string
	on   bool
	list []string
}

func newAliasedApp(f *flags, r *Renamed) *kingpin.Application {
	app := kingpin.New("t", "")
	app.Flag("area.name", "").Default("def").StringVar(&f.name)
	app.Flag("area.on", "").Default("true").BoolVar(&f.on)
	app.Flag("area.list", "").StringsVar(&f.list)
	r.Alias(app, "name", "area.name")
	r.Alias(app, "on", "area.on")
	r.Alias(app, "list", "area.list")
	return app
}

// An old spelling sets its new flag's value, as a boolean (without value, negated) and as a
// repeatable flag too, and each old spelling used logs one warning, however often it is given.
func TestRenamedAliases(t *testing.T) {
	tests := []struct {
		args     []string
		want     flags
		warnings []string // old names warned about
	}{
		{nil, flags{name: "def", on: true}, nil},
		{[]string{"--name=x"}, flags{name: "x", on: true}, []string{"--name"}},
		{[]string{"--no-on"}, flags{name: "def", on: false}, []string{"--on"}},
		{[]string{"--no-area.on", "--on"}, flags{name: "def", on: true}, []string{"--on"}},
		{[]string{"--list=a", "--list=b", "--area.list=c"}, flags{name: "def", on: true, list: []string{"a", "b", "c"}}, []string{"--list"}},
		{[]string{"--area.name=y", "--area.list=a"}, flags{name: "y", on: true, list: []string{"a"}}, nil},
	}
	for _, tt := range tests {
		var (
			f flags
			r Renamed
		)
		if err := Parse(newAliasedApp(&f, &r), tt.args); err != nil {
			t.Errorf("%q: %v", tt.args, err)
			continue
		}
		if f.name != tt.want.name || f.on != tt.want.on || !slices.Equal(f.list, tt.want.list) {
			t.Errorf("%q: got %+v, want %+v", tt.args, f, tt.want)
		}
		var log bytes.Buffer
		r.Warn(slog.New(slog.NewTextHandler(&log, nil)))
		if n := strings.Count(log.String(), "level=WARN"); n != len(tt.warnings) {
			t.Errorf("%q: %d warnings, want %d:\n%s", tt.args, n, len(tt.warnings), log.String())
		}
		for _, old := range tt.warnings {
			if !strings.Contains(log.String(), "flag="+old+" ") {
				t.Errorf("%q: no warning about %s:\n%s", tt.args, old, log.String())
			}
		}
	}
}

func TestRenamedHiddenAndDocumented(t *testing.T) {
	var (
		f flags
		r Renamed
	)
	app := newAliasedApp(&f, &r)
	if table := Table(app); strings.Contains(table, "`--name`") || !strings.Contains(table, "`--area.name`") {
		t.Errorf("old spellings must be hidden from the flag table:\n%s", table)
	}
	if table := r.Table(); !strings.Contains(table, "| `--list` | `--area.list` |") {
		t.Errorf("renamed table:\n%s", table)
	}
	defer func() {
		if recover() == nil {
			t.Error("an alias of an unknown flag was accepted")
		}
	}()
	r.Alias(app, "old", "no.such-flag")
}
