package exporter

import (
	"errors"
	"os"
	"testing"
)

func TestReasonOf(t *testing.T) {
	cases := map[string]error{
		ReasonNotFound:   fsError(os.ErrNotExist),
		ReasonPermission: fsError(os.ErrPermission),
		ReasonIO:         errors.New("disk on fire"),
	}
	for want, err := range cases {
		if got := reasonOf(err); got != want {
			t.Errorf("reasonOf(%v) = %q, want %q", err, got, want)
		}
	}
}
