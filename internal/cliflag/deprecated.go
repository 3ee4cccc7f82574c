package cliflag

import (
	"fmt"
	"log/slog"
	"slices"

	"github.com/alecthomas/kingpin/v2"
)

// Renamed keeps the old spellings of renamed flags working, so that a deployment written for
// an older release still starts: each old name is a hidden flag that sets the value of its new
// name, and the first use of each is remembered for one warning after the logger exists (the
// log flags are parsed together with every other flag).
type Renamed struct {
	names []Rename
	used  []Rename
}

// Rename is one renamed flag.
type Rename struct{ Old, New string }

// Alias registers --old as a hidden alias of the already registered --new. It panics when
// --new is unknown: that is a programming error the command's tests catch.
func (r *Renamed) Alias(app *kingpin.Application, old, new string) {
	target := app.GetFlag(new)
	if target == nil {
		panic(fmt.Sprintf("cliflag: --%s is an alias of --%s, which is not registered", old, new))
	}
	rn := Rename{Old: old, New: new}
	r.names = append(r.names, rn)
	app.Flag(old, "Deprecated spelling of --"+new+".").Hidden().
		SetValue(&aliasValue{Value: target.Model().Value, used: func() {
			if !slices.Contains(r.used, rn) {
				r.used = append(r.used, rn)
			}
		}})
}

// Names lists the renamed flags in the order they were registered.
func (r *Renamed) Names() []Rename { return slices.Clone(r.names) }

// Warn logs one warning for each old spelling the command line used, however often.
func (r *Renamed) Warn(logger *slog.Logger) {
	for _, rn := range r.used {
		logger.Warn("deprecated flag: use its new name, the old one will be removed", "flag", "--"+rn.Old, "use", "--"+rn.New)
	}
}

// aliasValue sets the value of the flag it stands for. It passes on whether that flag is a
// boolean (so --old and --no-old take no value) and whether it may be repeated.
type aliasValue struct {
	kingpin.Value
	used func()
}

func (v *aliasValue) Set(s string) error {
	v.used()
	return v.Value.Set(s)
}

func (v *aliasValue) IsBoolFlag() bool {
	b, ok := v.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

func (v *aliasValue) IsCumulative() bool {
	c, ok := v.Value.(interface{ IsCumulative() bool })
	return ok && c.IsCumulative()
}
