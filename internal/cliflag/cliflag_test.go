package cliflag

import (
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
)

func TestParseNamesTheFlag(t *testing.T) {
	cases := []struct {
		args    []string
		wantErr string // "" means success
	}{
		{[]string{"--interval=5s", "--workers=3"}, ""},
		{[]string{"--interval=abc"}, `--interval="abc": time: invalid duration "abc"`},
		{[]string{"--interval=5s", "--workers=x"}, `--workers="x": strconv`},
		{[]string{"--workers", "x"}, `--workers="x": strconv`},
		{[]string{"--nope=1"}, "unknown long flag '--nope'"},
	}
	for _, tc := range cases {
		app := kingpin.New("t", "")
		var d time.Duration
		var n int
		app.Flag("interval", "").Default("1s").DurationVar(&d)
		app.Flag("workers", "").Default("1").IntVar(&n)
		err := Parse(app, tc.args)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%v: got %v, want an error containing %q", tc.args, err, tc.wantErr)
		}
	}
}
