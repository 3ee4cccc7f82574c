package part

import (
	"errors"
	"os"
	"testing"
)

func TestReasonOf(t *testing.T) {
	cases := map[string]error{
		ReasonNotFound:   FSError(os.ErrNotExist),
		ReasonPermission: FSError(os.ErrPermission),
		ReasonIO:         errors.New("disk on fire"),
	}
	for want, err := range cases {
		if got := ReasonOf(err); got != want {
			t.Errorf("ReasonOf(%v) = %q, want %q", err, got, want)
		}
	}
}
