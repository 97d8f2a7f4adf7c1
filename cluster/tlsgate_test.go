package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
)

// testPKI is a CA and one certificate it signed for 127.0.0.1 (server and client auth).
type testPKI struct {
	pool *x509.CertPool
	cert tls.Certificate
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	gen := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, leafKey := gen(), gen()
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, NotBefore: now.Add(-time.Minute),
		NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "node"}, NotBefore: now.Add(-time.Minute),
		NotAfter: now.Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return testPKI{pool: pool, cert: tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}}
}

func (p testPKI) config() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{p.cert}, RootCAs: p.pool, ClientCAs: p.pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
}

// serveTLS accepts TLS connections with cfg, completing each handshake, until the test ends.
func serveTLS(t *testing.T, cfg *tls.Config) Member {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		if err := ln.Close(); err != nil {
			t.Log(err)
		}
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if err := c.(*tls.Conn).Handshake(); err != nil {
				t.Logf("server handshake: %v", err)
			}
			if err := c.Close(); err != nil {
				t.Logf("close: %v", err)
			}
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	return Member{ID: "peer-" + strconv.Itoa(port), NodeID: "peer", Host: "127.0.0.1", Port: port, Address: ln.Addr().String()}
}

// TestTLSGate_admitted: a member whose endpoint presents a certificate of our CA is admitted
// after its probe; one with a foreign CA is not, and is not probed again before the retry.
func TestTLSGate_admitted(t *testing.T) {
	ours, foreign := newTestPKI(t), newTestPKI(t)
	good := serveTLS(t, ours.config())
	bad := serveTLS(t, foreign.config())
	g := newTLSGate(ours.config(), time.Hour, zap.NewNop())
	var probes sync.WaitGroup
	start := func(f func()) {
		probes.Add(1)
		go func() { defer probes.Done(); f() }()
	}
	if g.admitted(good, start) || g.admitted(bad, start) {
		t.Fatal("admitted before any probe")
	}
	probes.Wait()
	if !g.admitted(good, start) {
		t.Fatal("member with our CA not admitted")
	}
	if g.admitted(bad, start) {
		t.Fatal("member with a foreign CA admitted")
	}
	probes.Wait()
	if n := g.state[bad.ID].failures; n != 1 {
		t.Fatalf("foreign member probed %d times within the retry interval, want 1", n)
	}
	g.forget(map[string]bool{good.ID: true})
	if _, ok := g.state[bad.ID]; ok {
		t.Fatal("state of a member memberlist no longer lists was kept")
	}
	if !newTLSGate(nil, time.Hour, zap.NewNop()).admitted(bad, start) {
		t.Fatal("without TLS every member is admitted")
	}
}
