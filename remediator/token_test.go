package remediator

import (
	"bytes"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
)

// secretVolume mimics the kubelet's atomic writer for a Secret volume: path/token is a
// symlink to ..data/token, ..data a symlink to a timestamped directory swapped on rotation.
type secretVolume struct {
	t   *testing.T
	dir string
	n   int
}

func newSecretVolume(t *testing.T, token string) *secretVolume {
	v := &secretVolume{t: t, dir: t.TempDir()}
	v.rotate(token)
	if err := os.Symlink(filepath.Join("..data", "token"), v.path()); err != nil {
		t.Fatal(err)
	}
	return v
}

func (v *secretVolume) path() string { return filepath.Join(v.dir, "token") }

func (v *secretVolume) rotate(token string) {
	v.t.Helper()
	v.n++
	ts := filepath.Join(v.dir, "..2026_12_03_"+strings.Repeat("x", v.n))
	if err := os.Mkdir(ts, 0o755); err != nil {
		v.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ts, "token"), []byte(token), 0o600); err != nil {
		v.t.Fatal(err)
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		v.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		v.t.Fatal(err)
	}
}

// A rotated token file takes effect on the next request, without a restart; a rotation to
// something unusable keeps the last good token.
func TestBearerTokenFileRotation(t *testing.T) {
	type step struct {
		rotateTo string // "" : no rotation before this request
		inPlace  bool   // overwrite the file itself instead of swapping the symlink
		send     string
		want     int
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "Secret rotation", steps: []step{
			{send: "one", want: http.StatusOK},
			{rotateTo: "two\n", send: "one", want: http.StatusUnauthorized},
			{send: "two", want: http.StatusOK},
		}},
		{name: "rotation to an empty Secret keeps the last token", steps: []step{
			{rotateTo: "  \n", send: "one", want: http.StatusOK},
			{send: "", want: http.StatusUnauthorized},
			{rotateTo: "three", send: "three", want: http.StatusOK},
			{send: "one", want: http.StatusUnauthorized},
		}},
		{name: "file rewritten in place", steps: []step{
			{rotateTo: "four-longer", inPlace: true, send: "four-longer", want: http.StatusOK},
			{send: "one", want: http.StatusUnauthorized},
			{rotateTo: "", inPlace: true, send: "four-longer", want: http.StatusOK},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vol := newSecretVolume(t, "one")
			cfg := testConfig()
			cfg.BearerTokenFile = vol.path()
			e := newEnv(t, cfg)
			for i, s := range tt.steps {
				switch {
				case s.inPlace:
					if err := os.WriteFile(vol.path(), []byte(s.rotateTo), 0o600); err != nil {
						t.Fatal(err)
					}
				case s.rotateTo != "":
					vol.rotate(s.rotateTo)
				}
				var header []string
				if s.send != "" {
					header = []string{"Authorization", "Bearer " + s.send}
				}
				if code, resp := e.post(payloadJSON(t), header...); code != s.want {
					t.Fatalf("step %d: token %q answered %d, want %d (%+v)", i, s.send, code, s.want, resp)
				}
			}
		})
	}
}

func TestBearerTokenFileRequiredAtStart(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{empty, filepath.Join(dir, "missing")} {
		cfg := testConfig()
		cfg.BearerTokenFile = path
		if _, err := New(cfg, fake.NewClientset(), &fakeMeasurer{}, WithEventRecorder(events.NewFakeRecorder(1))); err == nil {
			t.Errorf("token file %s accepted", path)
		}
	}
}

// Running the webhook without a bearer token is said loudly at start.
func TestWarnsWithoutAuth(t *testing.T) {
	vol := newSecretVolume(t, "one")
	tests := []struct {
		name     string
		cfg      func(*Config)
		wantWarn bool
	}{
		{"no token", func(*Config) {}, true},
		{"token", func(c *Config) { c.BearerToken = "s3cret" }, false},
		{"token file", func(c *Config) { c.BearerTokenFile = vol.path() }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			cfg := testConfig()
			tt.cfg(&cfg)
			srv, err := New(cfg, fake.NewClientset(), &fakeMeasurer{}, WithLogger(slog.New(slog.NewTextHandler(&buf, nil))),
				WithEventRecorder(events.NewFakeRecorder(1)))
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			warned := strings.Contains(buf.String(), "level=WARN") && strings.Contains(buf.String(), "requires no bearer token")
			if warned != tt.wantWarn {
				t.Errorf("warned %v, want %v: %s", warned, tt.wantWarn, buf.String())
			}
		})
	}
}
