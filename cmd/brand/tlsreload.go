package main

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// certReloader serves the certificate in a pair of PEM files and reloads it
// when either file changes, so that a renewed certificate (cert-manager, a
// cron job) is served without a restart. It looks at the files' times at
// most once per interval, on a handshake; a pair that fails to load keeps
// the old certificate in service and is logged.
type certReloader struct {
	certFile, keyFile string
	interval          time.Duration
	log               zerolog.Logger

	mu              sync.Mutex
	cert            *tls.Certificate
	certMod, keyMod time.Time
	checked         time.Time
}

func newCertReloader(certFile, keyFile string, log zerolog.Logger) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile, interval: time.Second, log: log}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *certReloader) load() error {
	cst, err := os.Stat(r.certFile)
	if err != nil {
		return fmt.Errorf("TLS certificate: %w", err)
	}
	kst, err := os.Stat(r.keyFile)
	if err != nil {
		return fmt.Errorf("TLS key: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("TLS certificate and key: %w", err)
	}
	r.cert, r.certMod, r.keyMod = &cert, cst.ModTime(), kst.ModTime()
	return nil
}

// GetCertificate is a tls.Config.GetCertificate.
func (r *certReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.checked) >= r.interval {
		r.checked = now
		cst, cerr := os.Stat(r.certFile)
		kst, kerr := os.Stat(r.keyFile)
		if cerr == nil && kerr == nil && (!cst.ModTime().Equal(r.certMod) || !kst.ModTime().Equal(r.keyMod)) {
			if err := r.load(); err != nil {
				r.log.Warn().Err(err).Msg("TLS certificate changed but does not load; serving the previous one")
			} else {
				r.log.Info().Str("cert", r.certFile).Msg("TLS certificate reloaded")
			}
		}
	}
	return r.cert, nil
}

// tlsConfig is the server's TLS configuration over the reloader.
func (r *certReloader) tlsConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate}
}
