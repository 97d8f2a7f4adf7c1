package testkit

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCA is a throwaway certificate authority for mutual-TLS tests (`dair node --tls-cert
// --tls-key --tls-ca`). Its files live in a test temporary directory.
type TestCA struct {
	// CertFile is the CA certificate (PEM), the --tls-ca of the nodes it signs for.
	CertFile string
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	dir      string
}

// NodeCert is a certificate and key signed by a TestCA.
type NodeCert struct {
	// CertFile and KeyFile are the PEM certificate and key: --tls-cert and --tls-key.
	CertFile, KeyFile string
	// CAFile is the signing CA's certificate: --tls-ca.
	CAFile string
}

// NewTestCA creates a CA (ECDSA P-256, valid one hour) named name. It fails the test on error.
func NewTestCA(t testing.TB, name string) *TestCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testkit: ca key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("testkit: ca certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testkit: parse ca certificate: %v", err)
	}
	dir := t.TempDir()
	ca := &TestCA{CertFile: filepath.Join(dir, name+"-ca.pem"), cert: cert, key: key, dir: dir}
	writePEM(t, ca.CertFile, "CERTIFICATE", der)
	return ca
}

// Issue signs a node certificate for name with the server and client auth usages and the
// given IP or DNS subject alternative names (default 127.0.0.1 and localhost).
func (ca *TestCA) Issue(t testing.TB, name string, hosts ...string) NodeCert {
	t.Helper()
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1", "localhost"}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testkit: node key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("testkit: node certificate: %v", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("testkit: marshal node key: %v", err)
	}
	nc := NodeCert{CertFile: filepath.Join(ca.dir, name+".pem"), KeyFile: filepath.Join(ca.dir, name+"-key.pem"), CAFile: ca.CertFile}
	writePEM(t, nc.CertFile, "CERTIFICATE", der)
	writePEM(t, nc.KeyFile, "PRIVATE KEY", keyDER)
	return nc
}

// Args returns the node flags for c: --tls-cert, --tls-key and --tls-ca.
func (c NodeCert) Args() []string {
	return []string{"--tls-cert", c.CertFile, "--tls-key", c.KeyFile, "--tls-ca", c.CAFile}
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("testkit: serial: %v", err)
	}
	return n
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatalf("testkit: write %s: %v", path, err)
	}
}
