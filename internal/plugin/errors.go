package plugin

import "errors"

// The exit codes of kubectl-emptydir (docs/kubectl-plugin.md).
const (
	// ExitOK: the command did what it was asked.
	ExitOK = 0
	// ExitError: anything else — a bad flag or argument, an API server or Prometheus that
	// could not be reached or refused, a pod not found. kubectl exits 1 for all of these too.
	ExitError = 1
)

type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// UsageError marks err as the user's mistake on the command line: the command prints a hint to
// --help after it.
func UsageError(err error) error { return usageError{err} }

// IsUsageError reports whether err, or an error it wraps, came from UsageError.
func IsUsageError(err error) bool {
	var u usageError
	return errors.As(err, &u)
}
