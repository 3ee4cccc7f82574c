package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds the file paths of every credential the cluster uses. Everything is generated
// fresh per cluster so that no state is shared between runs or concurrent clusters.
type pki struct {
	dir                 string
	caCert, caKey       string
	apiserverCert       string
	apiserverKey        string
	kubeletClientCert   string // apiserver -> kubelet, O=system:masters
	kubeletClientKey    string
	nodeClientCert      string // kubelet -> apiserver, system:node:NAME
	nodeClientKey       string
	kubeletServingCert  string
	kubeletServingKey   string
	saPub, saKey        string
	tokenFile           string
	adminToken          string
	caPEM               []byte
	caX509              *x509.Certificate
	caSigner            *ecdsa.PrivateKey
	serial              int64
	notBefore, notAfter time.Time
}

func newPKI(dir, nodeName string, nodeIP net.IP) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{dir: dir, notBefore: time.Now().Add(-time.Hour), notAfter: time.Now().Add(7 * 24 * time.Hour)}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "emptydir-guard-test-ca"},
		NotBefore:             p.notBefore,
		NotAfter:              p.notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	p.caX509, _ = x509.ParseCertificate(der)
	p.caSigner = caKey
	p.serial = 1
	p.caPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	p.caCert = filepath.Join(dir, "ca.crt")
	p.caKey = filepath.Join(dir, "ca.key")
	if err := os.WriteFile(p.caCert, p.caPEM, 0o644); err != nil {
		return nil, err
	}
	if err := writeKey(p.caKey, caKey); err != nil {
		return nil, err
	}

	loop := net.ParseIP("127.0.0.1")
	serviceIP := net.ParseIP(serviceClusterIP)
	if p.apiserverCert, p.apiserverKey, err = p.issue("apiserver", pkix.Name{CommonName: "kube-apiserver"},
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		[]net.IP{loop, nodeIP, serviceIP}, x509.ExtKeyUsageServerAuth); err != nil {
		return nil, err
	}
	if p.kubeletClientCert, p.kubeletClientKey, err = p.issue("apiserver-kubelet-client",
		pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		nil, nil, x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}
	if p.nodeClientCert, p.nodeClientKey, err = p.issue("kubelet-client",
		pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}},
		nil, nil, x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}
	if p.kubeletServingCert, p.kubeletServingKey, err = p.issue("kubelet-serving",
		pkix.Name{CommonName: nodeName}, []string{nodeName, "localhost"}, []net.IP{nodeIP, loop},
		x509.ExtKeyUsageServerAuth); err != nil {
		return nil, err
	}

	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	p.saKey = filepath.Join(dir, "sa.key")
	p.saPub = filepath.Join(dir, "sa.pub")
	if err := writeKey(p.saKey, saKey); err != nil {
		return nil, err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(p.saPub, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		return nil, err
	}

	tok := make([]byte, 24)
	if _, err := rand.Read(tok); err != nil {
		return nil, err
	}
	p.adminToken = hex.EncodeToString(tok)
	p.tokenFile = filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(p.tokenFile, []byte(fmt.Sprintf("%s,admin,admin,\"system:masters\"\n", p.adminToken)), 0o600); err != nil {
		return nil, err
	}
	return p, nil
}

// issue signs a leaf certificate with the test CA and writes cert and key as NAME.crt/NAME.key.
func (p *pki) issue(name string, subj pkix.Name, dns []string, ips []net.IP, usage x509.ExtKeyUsage) (string, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	p.serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial),
		Subject:      subj,
		NotBefore:    p.notBefore,
		NotAfter:     p.notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caX509, &key.PublicKey, p.caSigner)
	if err != nil {
		return "", "", err
	}
	certPath := filepath.Join(p.dir, name+".crt")
	keyPath := filepath.Join(p.dir, name+".key")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return "", "", err
	}
	return certPath, keyPath, writeKey(keyPath, key)
}

func writeKey(path string, key any) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}
