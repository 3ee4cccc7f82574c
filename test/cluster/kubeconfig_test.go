package cluster

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The admin and kubelet kubeconfigs must give a client the server, the CA and the user's
// credentials, and stay private to the test's user (they hold a token or a key).
func TestWriteKubeconfig(t *testing.T) {
	// The client checks that the files it is pointed at exist.
	pki := t.TempDir()
	ca, cert, key := filepath.Join(pki, "ca.crt"), filepath.Join(pki, "node.crt"), filepath.Join(pki, "node.key")
	for _, f := range []string{ca, cert, key} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name      string
		user      *clientcmdapi.AuthInfo
		wantToken string
		wantCert  string
		wantKey   string
	}{
		{"token", &clientcmdapi.AuthInfo{Token: "s3cret"}, "s3cret", "", ""},
		{"client certificate", &clientcmdapi.AuthInfo{ClientCertificate: cert, ClientKey: key}, "", cert, key},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "kubeconfig")
			if err := writeKubeconfig(path, "https://10.0.0.1:6443", ca, "someone", tc.user); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if mode := fi.Mode().Perm(); mode != 0o600 {
				t.Errorf("mode %o, want 600", mode)
			}
			rc, err := clientcmd.BuildConfigFromFlags("", path)
			if err != nil {
				t.Fatal(err)
			}
			if rc.Host != "https://10.0.0.1:6443" || rc.CAFile != ca {
				t.Errorf("host %q, CA %q; want https://10.0.0.1:6443, %s", rc.Host, rc.CAFile, ca)
			}
			if rc.BearerToken != tc.wantToken || rc.CertFile != tc.wantCert || rc.KeyFile != tc.wantKey {
				t.Errorf("token %q, cert %q, key %q; want %q, %q, %q", rc.BearerToken, rc.CertFile, rc.KeyFile, tc.wantToken, tc.wantCert, tc.wantKey)
			}
		})
	}
}
