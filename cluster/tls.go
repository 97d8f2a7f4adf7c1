package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// LoadTLS returns the mutual-TLS config for Config.RemoteTLS from PEM files: certFile and
// keyFile hold this node's certificate and key, used both to serve and to dial (so the
// certificate needs the serverAuth and clientAuth extended key usages and a subject
// alternative name for the node's actor host), and caFile the certificates of the CAs that
// sign every node's certificate. Peers must present a certificate of those CAs in both
// directions (tls.RequireAndVerifyClientCert); the minimum version is TLS 1.3.
//
// Errors (unreadable files, a key that does not match, a CA file without certificates) wrap
// ErrInvalidConfig. The returned config is the caller's.
func LoadTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	if certFile == "" || keyFile == "" || caFile == "" {
		return nil, fmt.Errorf("%w: tls needs a certificate, a key and a CA file", ErrInvalidConfig)
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: tls certificate: %w", ErrInvalidConfig, err)
	}
	pemCA, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("%w: tls ca: %w", ErrInvalidConfig, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemCA) {
		return nil, fmt.Errorf("%w: tls ca %s holds no PEM certificate", ErrInvalidConfig, caFile)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}, nil
}
