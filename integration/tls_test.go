package integration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/gen/synth"
)

// testCA is a certificate authority of a test, and a certificate it
// issued for 127.0.0.1.
type testCA struct {
	caFile, certFile, keyFile string
	pool                      *x509.CertPool
}

// newTestCA writes a CA certificate and a server certificate for
// 127.0.0.1 it signed (and the server's key) to dir.
func newTestCA(t *testing.T, dir string) testCA {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, srvKey := key(), key()
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "brand test CA"}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "brand node"}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	ca := testCA{caFile: filepath.Join(dir, "ca.pem"), certFile: filepath.Join(dir, "cert.pem"), keyFile: filepath.Join(dir, "key.pem"), pool: x509.NewCertPool()}
	ca.pool.AddCert(caCert)
	for path, b := range map[string]*pem.Block{ca.caFile: {Type: "CERTIFICATE", Bytes: caDER}, ca.certFile: {Type: "CERTIFICATE", Bytes: srvDER},
		ca.keyFile: {Type: "EC PRIVATE KEY", Bytes: kb}} {
		if err := os.WriteFile(path, pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return ca
}

// TestPeersOverTLS runs a cluster of two `brand serve` processes that
// serve HTTPS and list each other as https:// URLs, with a peer secret, as
// docs/scale-out.md ("Security") describes: the certificates come from a
// private CA that the nodes trust through SSL_CERT_FILE. Both see each
// other up, an epoch read from both is every sample exactly once with
// samples fetched between them, and a node that does not trust the CA
// takes its peer for down: peers verify each other's certificates.
func TestPeersOverTLS(t *testing.T) {
	const nodes, world, batchSize = 2, 2, 32
	spec := synth.Spec{Samples: 1024, MeanBytes: 2 << 10, Classes: 10, Seed: 41}
	p := packToMinIO(t, spec, 128<<10)
	cs := newClusterSetup(t, p, nodes, "https", "peer secret of the TLS test cluster")
	bin, env, urls := cs.bin, cs.env, cs.urls
	ca := newTestCA(t, cs.dir)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool}}, Timeout: time.Minute}
	procs := make([]*clusterProc, nodes)
	for k := range nodes {
		// Node 1 restarted without the CA (below) sees node 0 down and
		// reports ready only after the flip timeout: 5 s, not 30.
		procs[k] = cs.proc(k, p, "--tls-cert", ca.certFile, "--tls-key", ca.keyFile, "--cache-size", "64MiB", "--cache-prefault=false", "--membership-flip-timeout", "5s",
			"--peers", strings.Join(urls, ","), "--self", strconv.Itoa(k), "--peer-secret-file", cs.secret)
		procs[k].client = hc
	}
	startProcs(t, procs, bin, append(env, "SSL_CERT_FILE="+ca.caFile), "")
	up := func(k, of int) float64 {
		return scrapeVia(t, hc, urls[k], "", "brand_peer_up")[fmt.Sprintf(`brand_peer_up{peer=%q}`, urls[of])]
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 30 s", what)
			}
		}
	}

	keys := p.keys()
	seen := map[string]int{}
	steps := spec.Samples / (world * batchSize)
	for m := range steps {
		for r := range world {
			path := fmt.Sprintf("/epoch/0/batch/%d?seed=3&window=4&batch_size=%d&world=%d&rank=%d", m, batchSize, world, r)
			body, err := getWithFailover(hc, urls, cluster.Home(r, world, nodes), path)
			if err != nil {
				t.Fatalf("step %d rank %d: %v", m, r, err)
			}
			samples, err := client.DecodeTar(body)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range samples {
				p.checkSample(t, s, keys)
				seen[s.Key]++
			}
		}
	}
	exactlyOnce(t, seen, spec.Samples, "an epoch over TLS")
	var fetched float64
	for k := range nodes {
		fetched += scrapeVia(t, hc, urls[k], "", "brand_peer_bytes_fetched_total")["brand_peer_bytes_fetched_total"]
	}
	if fetched == 0 {
		t.Error("no sample crossed between the nodes: the epoch did not go through the peers")
	}

	// Node 1 again, without the CA: it cannot verify node 0's certificate,
	// and takes it for down; node 0, which trusts it, still sees it up.
	procs[1].kill()
	procs[1].start(t, bin, env)
	waitFor("node 1, not trusting the CA, sees node 0 down", func() bool { return up(1, 0) == 0 })
	waitFor("node 0 sees node 1 up", func() bool { return up(0, 1) == 1 })
}
