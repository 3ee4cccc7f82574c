// Package security runs the built exporter and remediator binaries with every kind of secret
// they take and checks that none of them ever shows in their logs or on their HTTP endpoints.
// Loopback only: the API server and the kubelet are fakes of the test's own.
package security

import (
	"bytes"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/emptydir-guard/emptydir-guard/internal/testbin"
)

// secrets are the credentials one run hands to the binaries, each distinct and random so that
// a leak names its source.
type secrets struct {
	kubeToken        string // API server bearer token, in both kubeconfigs
	kubeletToken     string // exporter → kubelet, --kubelet.token-file
	webhookToken     string // Alertmanager → remediator, --web.bearer-token-file
	exporterPassword string // Prometheus and remediator → exporter, basic auth (web config)
	exporterHash     string // its bcrypt hash in the exporter's web config
}

const exporterUser = "prometheus"

func newSecrets(t *testing.T) secrets {
	t.Helper()
	s := secrets{
		kubeToken:        "kube-token-" + randomHex(t),
		kubeletToken:     "kubelet-token-" + randomHex(t),
		webhookToken:     "webhook-token-" + randomHex(t),
		exporterPassword: "exporter-password-" + randomHex(t),
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(s.exporterPassword), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	s.exporterHash = string(hash)
	return s
}

// forbidden lists every form in which a secret could leak, by name.
func (s secrets) forbidden() map[string]string {
	return map[string]string{
		"API server token":                    s.kubeToken,
		"kubelet token":                       s.kubeletToken,
		"webhook bearer token":                s.webhookToken,
		"exporter basic auth password":        s.exporterPassword,
		"exporter basic auth password hash":   s.exporterHash,
		"exporter basic auth header (base64)": base64.StdEncoding.EncodeToString([]byte(exporterUser + ":" + s.exporterPassword)),
	}
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestSecretsNeverLogged runs both binaries with every secret they take, drives them through
// success and failure (wrong and missing credentials, a refused API call), and then greps
// their logs and every body they served (/metrics, /live, webhook answers) for the secrets.
func TestSecretsNeverLogged(t *testing.T) {
	sec := newSecrets(t)
	dir := t.TempDir()
	api := newFakeAPIServer(t, sec.kubeToken)
	kubelet := newFakeKubelet(t, sec.kubeletToken)

	kubeconfig := writeFile(t, dir, "kubeconfig", kubeconfigFor(api.URL, caPEM(t, api.Certificate().Raw), sec.kubeToken))
	exporterAddr, remediatorAddr := freeAddr(t), freeAddr(t)
	// The exporter serves TLS: the remediator refuses to send its basic auth password over
	// plain http, and so does every client here.
	exporterCert, exporterKey, exporterCA := serverCert(t)
	exporterURL := "https://" + exporterAddr
	remediatorURL := "http://" + remediatorAddr

	exporter := start(t, dir, "emptydir-exporter",
		"--node.name="+nodeName,
		"--kubeconfig="+kubeconfig,
		"--collection.source=kubelet",
		"--kubelet.url="+kubelet.URL,
		"--kubelet.ca-file="+writeFile(t, dir, "kubelet-ca.pem", caPEM(t, kubelet.Certificate().Raw)),
		"--kubelet.token-file="+writeFile(t, dir, "kubelet-token", sec.kubeletToken),
		"--collection.interval=1s",
		"--web.listen-address="+exporterAddr,
		"--web.config.file="+writeFile(t, dir, "exporter-web.yml",
			fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  %s: %s\n",
				writeFile(t, dir, "exporter.crt", exporterCert), writeFile(t, dir, "exporter.key", exporterKey),
				exporterUser, sec.exporterHash)),
		"--log.level=debug",
	)
	remediator := start(t, dir, "emptydir-remediator",
		"--kubeconfig="+kubeconfig,
		"--web.listen-address="+remediatorAddr,
		"--web.bearer-token-file="+writeFile(t, dir, "webhook-token", sec.webhookToken+"\n"),
		"--exporter.url="+exporterURL,
		"--exporter.http-config.file="+writeFile(t, dir, "exporter-client.yml",
			fmt.Sprintf("basic_auth:\n  username: %s\n  password: %s\ntls_config:\n  ca_file: %s\n",
				exporterUser, sec.exporterPassword, writeFile(t, dir, "exporter-ca.pem", exporterCA))),
		"--log.level=debug",
	)

	var answers []served
	call := func(method, url, body string, header ...string) served {
		t.Helper()
		s := do(t, method, url, body, header...)
		answers = append(answers, s)
		return s
	}
	exporterAuth := []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte(exporterUser+":"+sec.exporterPassword))}
	waitFor(t, "the exporter's pod informer to sync", func() bool {
		return do(t, http.MethodGet, exporterURL+"/readyz", "", exporterAuth...).code == http.StatusOK
	})
	waitFor(t, "the exporter's first collection", func() bool {
		s := do(t, http.MethodGet, exporterURL+"/metrics", "", exporterAuth...)
		return s.code == http.StatusOK && strings.Contains(s.body, `emptydir_used_bytes{`)
	})
	waitFor(t, "the remediator to be ready", func() bool {
		return do(t, http.MethodGet, remediatorURL+"/readyz", "").code == http.StatusOK
	})

	wrongBasic := "Basic " + base64.StdEncoding.EncodeToString([]byte(exporterUser+":wrong-"+sec.exporterPassword[:8]))
	expectCode(t, call(http.MethodGet, exporterURL+"/metrics", "", "Authorization", wrongBasic), http.StatusUnauthorized)
	expectCode(t, call(http.MethodGet, exporterURL+"/metrics", ""), http.StatusUnauthorized)
	expectCode(t, call(http.MethodGet, exporterURL+"/live/namespaces/"+podNS+"/pods/"+podName+"?uid="+podUID, "", exporterAuth...), http.StatusOK)

	webhook := remediatorURL + "/webhook"
	payload := fmt.Sprintf(`{"version":"4","status":"firing","receiver":"emptydir-remediator","alerts":[{"status":"firing",`+
		`"labels":{"alertname":"EmptyDirOverLimit","namespace":%q,"pod":%q,"uid":%q,"volume":%q},"fingerprint":"0123456789abcdef"}]}`,
		podNS, podName, podUID, volume)
	expectCode(t, call(http.MethodPost, webhook, payload), http.StatusUnauthorized)
	expectCode(t, call(http.MethodPost, webhook, payload, "Authorization", "Bearer wrong-"+sec.webhookToken[:8]), http.StatusUnauthorized)
	expectCode(t, call(http.MethodPost, webhook, payload, "Authorization", "Bearer "+sec.webhookToken), http.StatusOK)
	expectCode(t, call(http.MethodGet, remediatorURL+"/metrics", ""), http.StatusOK)
	expectCode(t, call(http.MethodGet, exporterURL+"/metrics", "", exporterAuth...), http.StatusOK)

	exporterLog, remediatorLog := exporter.stop(t), remediator.stop(t)

	// The run did what it should, so the secrets were in use: every API call authenticated,
	// the live re-check went through the exporter's auth and the kubelet's, the pod evicted.
	evictions, authorized, unauthorized := api.counts()
	if evictions != 1 || authorized == 0 || unauthorized != 0 {
		t.Errorf("fake API server: %d evictions (want 1), %d authorized and %d unauthorized requests (want 0)",
			evictions, authorized, unauthorized)
	}
	if !strings.Contains(remediatorLog, podName) || !strings.Contains(exporterLog, nodeName) {
		t.Errorf("the logs do not tell about the run: remediator log mentions %q: %v, exporter log mentions %q: %v",
			podName, strings.Contains(remediatorLog, podName), nodeName, strings.Contains(exporterLog, nodeName))
	}

	outputs := map[string]string{"exporter log": exporterLog, "remediator log": remediatorLog}
	for i, s := range answers {
		outputs[fmt.Sprintf("answer %d to %s %s", i, s.method, s.url)] = s.headers + "\n" + s.body
	}
	for what, text := range outputs {
		for name, secret := range sec.forbidden() {
			if i := strings.Index(text, secret); i >= 0 {
				t.Errorf("%s shows the %s: …%s…", what, name, excerpt(text, i, len(secret)))
			}
		}
	}
}

// served is one HTTP answer of a binary.
type served struct {
	method, url   string
	code          int
	headers, body string
}

func do(t *testing.T, method, url, body string, header ...string) served {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := testClient.Do(req)
	if err != nil {
		return served{method: method, url: url, body: err.Error()}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, url, err)
	}
	var h bytes.Buffer
	_ = resp.Header.Write(&h)
	return served{method: method, url: url, code: resp.StatusCode, headers: h.String(), body: string(b)}
}

func expectCode(t *testing.T, s served, want int) {
	t.Helper()
	if s.code != want {
		t.Fatalf("%s %s: %d, want %d: %s", s.method, s.url, s.code, want, s.body)
	}
}

// waitFor polls cond until it holds; a minute without is a failure.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func excerpt(text string, i, n int) string {
	from, to := max(0, i-60), min(len(text), i+n+60)
	return text[from:to]
}

// process is a started binary whose output goes to a file.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan error
}

func start(t *testing.T, dir, name string, args ...string) *process {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	out, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testbin.Path(t, name), args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		t.Fatalf("starting %s: %v", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait(); _ = out.Close() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("%s log:\n%s", name, b)
			}
		}
	})
	return p
}

// stop ends the process as Kubernetes would (SIGTERM) and returns everything it logged.
func (p *process) stop(t *testing.T) string {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
	case <-time.After(30 * time.Second):
		t.Errorf("%s did not stop within 30s of SIGTERM", p.name)
		_ = p.cmd.Process.Kill()
	}
	b, err := os.ReadFile(p.log)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// testClient asks the binaries; it trusts the certificate serverCert made.
var testClient = &http.Client{Timeout: 30 * time.Second}

// serverCert returns the PEM certificate and key of httptest's TLS server (valid for
// 127.0.0.1) and the same certificate as the CA to trust, and makes testClient trust it.
func serverCert(t *testing.T) (certPEM, keyPEM, caPEM string) {
	t.Helper()
	ts := httptest.NewTLSServer(http.NotFoundHandler())
	defer ts.Close()
	testClient.Transport = ts.Client().Transport
	c := ts.TLS.Certificates[0]
	key, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	cert := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}))
	return cert, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key})), cert
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func caPEM(t *testing.T, der []byte) string {
	t.Helper()
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func kubeconfigFor(server, ca, token string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: fake
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: fake
  user:
    token: %s
contexts:
- name: fake
  context: {cluster: fake, user: fake}
current-context: fake
`, server, base64.StdEncoding.EncodeToString([]byte(ca)), token)
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
