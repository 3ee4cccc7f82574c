// Package cliflag holds what both commands need around kingpin.
package cliflag

import (
	"fmt"

	"github.com/alecthomas/kingpin/v2"
)

// Parse parses args like app.Parse, but an invalid value names its flag:
// kingpin reports a bad duration or number as bare `time: invalid duration "abc"`.
func Parse(app *kingpin.Application, args []string) error {
	_, err := app.Parse(args)
	if err == nil {
		return nil
	}
	ctx, ctxErr := app.ParseContext(args)
	if ctxErr != nil {
		return err // unknown flag, missing value: kingpin's message names it already
	}
	for _, el := range ctx.Elements {
		f, ok := el.Clause.(*kingpin.FlagClause)
		if !ok || el.Value == nil {
			continue
		}
		// The run stops on this error anyway, so setting the value again is harmless.
		if setErr := f.Model().Value.Set(*el.Value); setErr != nil && setErr.Error() == err.Error() {
			return fmt.Errorf("--%s=%q: %w", f.Model().Name, *el.Value, err)
		}
	}
	return err
}
