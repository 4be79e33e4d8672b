package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/internal/cli"
	"github.com/brandgw/brand/internal/gen/synth"
)

// TestServeTLSTokensAndAdmin runs `brand serve` with a generated
// certificate, a token file and an admin listener: batches need the token
// and arrive over TLS; the admin endpoints are on their own port.
func TestServeTLSTokensAndAdmin(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	storeDir := packLocal(t, root, synth.Spec{Samples: 40, MeanBytes: 1 << 10, Seed: 3}, dataset.PackOptions{ChunkSize: 16 << 10})
	certFile, keyFile := writeCert(t, root, "brand-test", time.Now())
	tokens := filepath.Join(root, "tokens")
	if err := os.WriteFile(tokens, []byte("# rotated monthly\nold-token\n\nnew-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan int, 1)
	go func() {
		done <- run(sctx, &cli.Env{Stdout: io.Discard, Stderr: &stderr, Getenv: func(string) string { return "" }},
			[]string{"serve", "--listen", "127.0.0.1:0", "--dataset", "d=" + storeDir, "--log-format", "json", "--memory-limit", "off",
				"--tls-cert", certFile, "--tls-key", keyFile, "--auth-token-file", tokens, "--admin-listen", "127.0.0.1:0"})
	}()
	pem, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	get := func(url, token string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return -1
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	addr := regexp.MustCompile(`"addr":"([^"]+)","cache_bytes"`)
	adminAddr := regexp.MustCompile(`"addr":"([^"]+)"[^\n]*"message":"serving /metrics`)
	var base, admin string
	deadline := time.Now().Add(60 * time.Second)
	for base == "" || admin == "" || get(base+"/readyz", "") != 200 {
		select {
		case code := <-done:
			t.Fatalf("serve exited with %d: %s", code, stderr.String())
		default:
		}
		if m := addr.FindStringSubmatch(stderr.String()); m != nil {
			base = "https://" + m[1]
		}
		if m := adminAddr.FindStringSubmatch(stderr.String()); m != nil {
			admin = "https://" + m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve never became ready: %s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, tt := range []struct {
		url, token string
		want       int
	}{
		{base + "/epoch/0/batch/0", "", 401},
		{base + "/epoch/0/batch/0", "wrong", 401},
		{base + "/epoch/0/batch/0", "old-token", 200},
		{base + "/epoch/0/batch/0", "new-token", 200},
		{base + "/metrics", "new-token", 404},
		{admin + "/metrics", "", 401},
		{admin + "/metrics", "new-token", 200},
		{admin + "/stats", "old-token", 200},
		{strings.Replace(base, "https", "http", 1) + "/healthz", "", 400},
	} {
		if got := get(tt.url, tt.token); got != tt.want && !(tt.want == 400 && got == -1) {
			t.Errorf("GET %s with token %q: %d, want %d", tt.url, tt.token, got, tt.want)
		}
	}
	// A token removed from the file is refused without a restart; one
	// the file keeps still works, and a file left empty keeps the tokens
	// in force. The reproduction: a removed token kept working until the
	// gateway restarted.
	if err := os.WriteFile(tokens, []byte("new-token # the old one rotated out\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	within := time.Now().Add(30 * time.Second) // tokenPoll is 2 s
	for get(base+"/epoch/0/batch/0", "old-token") != 401 {
		if time.Now().After(within) {
			t.Fatal("the removed token still works 30 s after the file changed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := get(base+"/epoch/0/batch/0", "new-token"); got != 200 {
		t.Errorf("the kept token after the re-read: %d, want 200", got)
	}
	if err := os.WriteFile(tokens, []byte("# nobody\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	within = time.Now().Add(30 * time.Second)
	for !strings.Contains(stderr.String(), "the token file changed but does not load") {
		if time.Now().After(within) {
			t.Fatal("an empty token file was not reported 30 s after it was written")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := get(base+"/epoch/0/batch/0", "new-token"); got != 200 {
		t.Errorf("the kept token after an empty file: %d, want 200", got)
	}
	stop()
	if code := <-done; code != 0 {
		t.Errorf("serve exited with %d: %s", code, stderr.String())
	}
	if strings.Contains(stderr.String(), "new-token") || strings.Contains(stderr.String(), "old-token") {
		t.Error("a token appears in the log")
	}
}

// TestServeListensOnLoopbackByDefault: `brand serve` given no --listen
// serves this machine alone. The reproduction: its default was ":8080",
// every interface, with no authentication, so the README's serve
// commands, copied on a shared GPU node, served every dataset to anyone
// who could reach the port. The default is read as `brand help serve`
// shows it (the test cannot count on port 8080 being free on a shared
// machine), then a gateway is started on that host with a free port: its
// listener is loopback, it answers there, and every other address of this
// machine refuses the port.
func TestServeListensOnLoopbackByDefault(t *testing.T) {
	var help syncBuffer
	if code := run(t.Context(), &cli.Env{Stdout: &help, Stderr: &help, Getenv: func(string) string { return "" }}, []string{"help", "serve"}); code != 0 {
		t.Fatalf("brand help serve exited %d:\n%s", code, help.String())
	}
	m := regexp.MustCompile(`(?m)^  -listen string\n(?:    .*\n)*?    .*\(default "([^"]*)"\)`).FindStringSubmatch(help.String())
	if m == nil {
		t.Fatalf("brand help serve shows no default for -listen:\n%s", help.String())
	}
	host, port, err := net.SplitHostPort(m[1])
	if err != nil {
		t.Fatalf("the default --listen %q: %v", m[1], err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		t.Fatalf("the default --listen %q serves %s, not loopback alone: anyone who reaches port %s reads the datasets", m[1], orEvery(host), port)
	}

	storeDir := packLocal(t, t.TempDir(), synth.Spec{Samples: 20, MeanBytes: 1 << 10, Seed: 3}, dataset.PackOptions{ChunkSize: 16 << 10})
	var stderr syncBuffer
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, &cli.Env{Stdout: io.Discard, Stderr: &stderr, Getenv: func(string) string { return "" }},
			[]string{"serve", "--listen", net.JoinHostPort(host, "0"), "--dataset", "d=" + storeDir, "--log-format", "json", "--memory-limit", "off"})
	}()
	base := waitReady(t, &stderr, done)
	ap, err := netip.ParseAddrPort(strings.TrimPrefix(base, "http://"))
	if err != nil || !ap.Addr().IsLoopback() {
		t.Fatalf("the gateway listens on %s (%v), not loopback", base, err)
	}
	if strings.Contains(stderr.String(), "without authentication") {
		t.Errorf("a loopback gateway warns of serving without authentication:\n%s", stderr.String())
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	others := 0
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.IsLinkLocalUnicast() || ipn.IP.IsMulticast() {
			continue // a link-local address needs its zone to be dialled
		}
		others++
		target := net.JoinHostPort(ipn.IP.String(), strconv.Itoa(int(ap.Port())))
		if c, err := net.DialTimeout("tcp", target, 2*time.Second); err == nil {
			c.Close()
			t.Errorf("the gateway given the default host accepts connections at %s, beyond loopback", target)
		}
	}
	t.Logf("%d non-loopback addresses of this machine refuse the port", others)
	stop()
	if code := <-done; code != 0 {
		t.Errorf("serve exited with %d: %s", code, stderr.String())
	}
}

// orEvery names a listen host for a message: "" is every interface.
func orEvery(host string) string {
	if host == "" {
		return "every interface"
	}
	return host
}

// TestTokenFileExampleServes: the scoped token file docs/http-api.md
// shows is one brand serve takes. The reproduction: its comments after
// the tokens made brand serve exit 1 (field 1 after the secret is not
// KEY=VALUE).
func TestTokenFileExampleServes(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "http-api.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```text\n\\s*(# TOKEN \\[rights=.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/http-api.md has no token file example (```text, # TOKEN [rights=...)")
	}
	file := filepath.Join(t.TempDir(), "tokens")
	var text strings.Builder
	for _, line := range strings.Split(string(m[1]), "\n") {
		text.WriteString(strings.TrimSpace(line) + "\n")
	}
	if err := os.WriteFile(file, []byte(text.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	f := securityFlags{tokenFile: file}
	tokens, err := f.tokens()
	if err != nil {
		t.Fatalf("the docs' example: %v", err)
	}
	if len(tokens) != 3 {
		t.Errorf("the docs' example holds %d tokens, want its 3", len(tokens))
	}
}
