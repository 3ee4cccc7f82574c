package monitoring

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestExpandVars(t *testing.T) {
	env := map[string]string{"POD_NAME": "prometheus-kps-0", "SHARD": "0"}
	for in, want := range map[string]string{
		"replica: $(POD_NAME)":           "replica: prometheus-kps-0",
		"$(SHARD)/$(POD_NAME)":           "0/prometheus-kps-0",
		"$(UNKNOWN) stays":               "$(UNKNOWN) stays",
		"$POD_NAME and ${POD_NAME} stay": "$POD_NAME and ${POD_NAME} stay",
	} {
		if got := expandVars(in, env); got != want {
			t.Errorf("expandVars(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEnvOf(t *testing.T) {
	ct := &corev1.Container{Env: []corev1.EnvVar{
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "SHARD", Value: "0"},
		{Name: "PEER", Value: "$(POD_NAME).svc"},
	}}
	env := envOf(ct, "am-0", "10.0.0.2")
	want := map[string]string{"POD_NAME": "am-0", "POD_IP": "10.0.0.2", "SHARD": "0", "PEER": "am-0.svc"}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q (env %v)", k, env[k], v, env)
		}
	}
}

func TestListenAddr(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "127.0.0.1:9090"},
		{[]string{"--web.listen-address=:9093"}, "127.0.0.1:9093"},
		{[]string{"--web.listen-address=10.1.2.3:9095"}, "10.1.2.3:9095"},
		{[]string{"--web.listen-address=[::]:9091"}, "127.0.0.1:9091"},
	} {
		if got := listenAddr(tc.args, "web.listen-address", ":9090"); got != tc.want {
			t.Errorf("listenAddr(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

func TestWriteKeys(t *testing.T) {
	data := map[string][]byte{"a.yaml": []byte("A"), "b.yaml": []byte("B")}
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	all := filepath.Join(t.TempDir(), "all")
	if err := os.MkdirAll(all, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeKeys(data, nil, "", all); err != nil {
		t.Fatal(err)
	}
	if read(filepath.Join(all, "a.yaml")) != "A" || read(filepath.Join(all, "b.yaml")) != "B" {
		t.Error("every key of a volume without items is a file")
	}

	items := filepath.Join(t.TempDir(), "items")
	if err := os.MkdirAll(items, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeKeys(data, []corev1.KeyToPath{{Key: "a.yaml", Path: "sub/renamed.yaml"}}, "", items); err != nil {
		t.Fatal(err)
	}
	if read(filepath.Join(items, "sub", "renamed.yaml")) != "A" {
		t.Error("an item is written at its path")
	}
	if _, err := os.Stat(filepath.Join(items, "b.yaml")); err == nil {
		t.Error("a key not among the items was written")
	}

	sub := filepath.Join(t.TempDir(), "web-config.yaml")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeKeys(data, nil, "b.yaml", sub); err != nil {
		t.Fatal(err)
	}
	if read(sub) != "B" {
		t.Error("a subPath mount is the one file")
	}

	if err := writeKeys(data, []corev1.KeyToPath{{Key: "missing", Path: "x"}}, "", t.TempDir()); err == nil {
		t.Error("an item naming a missing key is no error")
	}
}

func TestPathRewriter(t *testing.T) {
	rw := pathRewriter("/work", []string{"/prometheus", "/etc/prometheus/config_out", "/etc/prometheus/rules/r-0"})
	for in, want := range map[string]string{
		"--storage.tsdb.path=/prometheus":                              "--storage.tsdb.path=/work/prometheus",
		"--config.file=/etc/prometheus/config_out/prometheus.env.yaml": "--config.file=/work/etc/prometheus/config_out/prometheus.env.yaml",
		"rule_files:\n- /etc/prometheus/rules/r-0/*.yaml":              "rule_files:\n- /work/etc/prometheus/rules/r-0/*.yaml",
		"/etc/prometheus/certs/ca.crt":                                 "/etc/prometheus/certs/ca.crt",
		"metrics_path: /metrics":                                       "metrics_path: /metrics",
	} {
		if got := rw(in); got != want {
			t.Errorf("rewrite(%q) = %q, want %q", in, got, want)
		}
	}
}
