package main

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

	"github.com/rs/zerolog"
)

// writeCert writes a self-signed certificate for 127.0.0.1 with the given
// common name to dir/cert.pem and dir/key.pem, with modification time mod.
func writeCert(t *testing.T, dir, name string, mod time.Time) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for _, f := range []struct {
		path string
		b    *pem.Block
	}{{certFile, &pem.Block{Type: "CERTIFICATE", Bytes: der}}, {keyFile, &pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}}} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(f.b), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(f.path, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}

func TestCertReloader(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Now().Add(-time.Minute)
	certFile, keyFile := writeCert(t, dir, "first", t0)
	r, err := newCertReloader(certFile, keyFile, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	r.interval = 0
	name := func() string {
		c, err := r.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return leaf.Subject.CommonName
	}
	if got := name(); got != "first" {
		t.Fatalf("serving %q, want first", got)
	}
	writeCert(t, dir, "second", t0.Add(time.Second))
	if got := name(); got != "second" {
		t.Errorf("after the files changed: serving %q, want second", got)
	}
	// A broken pair keeps the previous certificate in service.
	if err := os.WriteFile(keyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(keyFile, t0.Add(2*time.Second), t0.Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := name(); got != "second" {
		t.Errorf("after a broken key: serving %q, want the previous, second", got)
	}
	if _, err := newCertReloader(certFile, keyFile, zerolog.Nop()); err == nil {
		t.Error("a broken pair loads at start")
	}
}
