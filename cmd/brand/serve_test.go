package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/cli"
	"github.com/brandgw/brand/internal/cluster/membership"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/transform"
)

// TestServeDrainsInFlightOnShutdown starts `brand serve` on a packed local
// dataset, begins reading a large batch slowly, stops the server (as SIGTERM
// does) and checks the response still completes in full.
func TestServeDrainsInFlightOnShutdown(t *testing.T) {
	ctx := context.Background()
	storeDir := packLocal(t, t.TempDir(), synth.Spec{Samples: 400, MeanBytes: 32 << 10, Seed: 2}, dataset.PackOptions{ChunkSize: 1 << 20, Shuffle: true})
	var stderr syncBuffer
	sctx, stop := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() {
		done <- run(sctx, &cli.Env{Stdout: io.Discard, Stderr: &stderr, Getenv: func(string) string { return "" }},
			[]string{"serve", "--listen", "127.0.0.1:0", "--dataset", "d=" + storeDir, "--log-format", "json", "--batch-size", "300", "--shutdown-timeout", "20s", "--memory-limit", "off"})
	}()
	base := waitReady(t, &stderr, done)
	resp, err := http.Get(base + "/epoch/0/batch/0")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	want, _ := strconv.Atoi(resp.Header.Get("Content-Length"))
	if want < 1<<20 {
		t.Fatalf("batch of %d bytes is too small for this test", want)
	}
	first := make([]byte, 4096)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatal(err)
	}
	stop() // what SIGTERM does
	time.Sleep(100 * time.Millisecond)
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("in-flight response cut off by shutdown: %v", err)
	}
	if got := len(first) + len(rest); got != want {
		t.Fatalf("read %d bytes of %d", got, want)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited with %d: %s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit after shutdown")
	}
}

var listening = regexp.MustCompile(`"addr":"([^"]+)"`)

// waitReady waits for a serve command logging JSON to stderr to listen and
// answer /readyz, and returns its base URL.
func waitReady(t *testing.T, stderr *syncBuffer, done <-chan int) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	base := ""
	for {
		select {
		case code := <-done:
			t.Fatalf("serve exited with %d: %s", code, stderr.String())
		default:
		}
		if base == "" {
			if m := listening.FindStringSubmatch(stderr.String()); m != nil {
				base = "http://" + m[1]
			}
		}
		if base != "" {
			if resp, err := http.Get(base + "/readyz"); err == nil { // else: not listening yet
				resp.Body.Close()
				if resp.StatusCode == 200 {
					return base
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve never became ready: %s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The fault-handling flags reach the gateway's configuration, with a
// flag's 0 meaning "off" where the Config's 0 means "default".
func TestServeFaultFlags(t *testing.T) {
	tests := []struct {
		args       []string
		idle, poll time.Duration
		rereads    int
		onDamaged  string
		maxText    int64
	}{
		{nil, s3backend.DefaultIdleTimeout, gateway.DefaultIndexPoll, gateway.DefaultChecksumRereads, "fail", gateway.DefaultMaxTextBytes},
		{[]string{"--s3-idle-timeout=0", "--index-poll=0", "--checksum-rereads=0", "--on-damaged-chunk=skip", "--max-text-bytes=0"}, -1, -1, -1, "skip", -1},
		{[]string{"--s3-idle-timeout=5s", "--index-poll=1m", "--checksum-rereads=4", "--max-text-bytes=64MiB"}, 5 * time.Second, time.Minute, 4, "fail", 64 << 20},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var f serveFlags
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			f.register(fs, ":0")
			if err := fs.Parse(append([]string{"--dataset", "/tmp/x"}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			cfg, err := f.gatewayConfig(zerolog.Nop())
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Backend.IdleTimeout != tc.idle || cfg.IndexPoll != tc.poll || cfg.ChecksumRereads != tc.rereads || cfg.OnDamagedChunk != tc.onDamaged ||
				cfg.MaxTextBytes != tc.maxText {
				t.Fatalf("config: idle %s poll %s rereads %d on-damaged %q max-text %d", cfg.Backend.IdleTimeout, cfg.IndexPoll, cfg.ChecksumRereads, cfg.OnDamagedChunk, cfg.MaxTextBytes)
			}
		})
	}
}

// packLocal writes spec's synthetic tree under root and packs it into a
// local store in root/store, whose directory it returns.
func packLocal(t *testing.T, root string, spec synth.Spec, opts dataset.PackOptions) string {
	t.Helper()
	src := filepath.Join(root, "src")
	if err := spec.WriteTree(src); err != nil {
		t.Fatal(err)
	}
	storeDir := filepath.Join(root, "store")
	store, err := s3backend.NewLocal(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dataset.Pack(context.Background(), src, store, opts); err != nil {
		t.Fatal(err)
	}
	return storeDir
}

// TestServeWindowIndependentOfPeers: a node of a cluster defaults to the
// single gateway's window, so a job that names no window reads the same
// order whatever the cluster's size. The reproduction: --peers of two
// nodes made the default window 16 (8 per node), of nine 72.
func TestServeWindowIndependentOfPeers(t *testing.T) {
	storeDir := packLocal(t, t.TempDir(), synth.Spec{Samples: 200, MeanBytes: 1 << 10, Seed: 2}, dataset.PackOptions{ChunkSize: 16 << 10})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	self := "http://" + addr
	var stderr syncBuffer
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, &cli.Env{Stdout: io.Discard, Stderr: &stderr, Getenv: func(string) string { return "" }},
			[]string{"serve", "--listen", addr, "--dataset", "d=" + storeDir, "--log-format", "json", "--memory-limit", "off",
				"--peers", self + ",http://127.0.0.1:1", "--advertise", self})
	}()
	base := waitReady(t, &stderr, done)
	resp, err := http.Get(base + "/epoch/0")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info api.EpochInfo
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		t.Fatal(err)
	}
	if info.Window != query.DefaultWindow {
		t.Errorf("a node of two defaults to a window of %d chunks, a single gateway to %d", info.Window, query.DefaultWindow)
	}
	stop()
	<-done
}

// TestClusterSources: brand serve takes its members from one of --peers,
// --peers-file and --peers-dns, and knows itself by --advertise (or, with
// --peers, --self).
func TestClusterSources(t *testing.T) {
	file := filepath.Join(t.TempDir(), "peers")
	tests := []struct {
		name string
		args []string
		want any // the member source's type; nil: no cluster; error: refused
		self string
	}{
		{"none", nil, nil, ""},
		{"peers and self", []string{"--peers", "http://b:1,http://a:1", "--self", "0"}, membership.Static{}, "http://b:1"},
		{"peers and advertise", []string{"--peers", "http://a:1,http://b:1", "--advertise", "http://b:1/"}, membership.Static{}, "http://b:1"},
		{"file", []string{"--peers-file", file, "--advertise", "http://a:1"}, membership.File(""), "http://a:1"},
		{"dns", []string{"--peers-dns", "brand.ns.svc.cluster.local", "--advertise", "https://brand-0.brand.ns.svc.cluster.local:8443"}, membership.DNS{}, "https://brand-0.brand.ns.svc.cluster.local:8443"},
		{"two sources", []string{"--peers", "http://a:1", "--peers-file", file, "--advertise", "http://a:1"}, errors.New(""), ""},
		{"file without advertise", []string{"--peers-file", file}, errors.New(""), ""},
		{"dns with self", []string{"--peers-dns", "brand", "--self", "0", "--advertise", "http://a:1"}, errors.New(""), ""},
		{"advertise not a URL", []string{"--peers-dns", "brand", "--advertise", "brand-0"}, errors.New(""), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f clusterFlags
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			f.register(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			cc, err := f.layout()
			switch want := tt.want.(type) {
			case error:
				if err == nil {
					t.Fatalf("accepted: %+v", cc)
				}
				return
			case nil:
				if err != nil || cc.Members != nil {
					t.Fatalf("%+v, %v; want no cluster", cc, err)
				}
				return
			default:
				if err != nil {
					t.Fatal(err)
				}
				if fmt.Sprintf("%T", cc.Members) != fmt.Sprintf("%T", want) || cc.Advertise != tt.self {
					t.Fatalf("members from %T, advertise %q; want %T, %q", cc.Members, cc.Advertise, want, tt.self)
				}
			}
		})
	}
}

// TestStartupNamesDecoder: the start-up log names the JPEG decoder, and
// the pure-Go build says once what it costs and how to get libjpeg-turbo
// (the libjpeg-turbo build says nothing more), so that an operator of a
// slow node learns it at start rather than from a profile.
func TestStartupNamesDecoder(t *testing.T) {
	storeDir := packLocal(t, t.TempDir(), synth.Spec{Samples: 20, MeanBytes: 1 << 10, Seed: 2}, dataset.PackOptions{ChunkSize: 16 << 10})
	var stderr syncBuffer
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, &cli.Env{Stdout: io.Discard, Stderr: &stderr, Getenv: func(string) string { return "" }},
			[]string{"serve", "--listen", "127.0.0.1:0", "--dataset", "d=" + storeDir, "--log-format", "json", "--memory-limit", "off"})
	}()
	waitReady(t, &stderr, done)
	stop()
	<-done
	var decoder string
	notes := 0
	for line := range strings.Lines(stderr.String()) {
		var e struct {
			Level, Message string
			JPEGDecoder    string `json:"jpeg_decoder"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if e.JPEGDecoder != "" {
			decoder = e.JPEGDecoder
		}
		if strings.Contains(e.Message, "brand_turbojpeg") {
			notes++
			if e.Level != "warn" || !strings.Contains(e.Message, "2.6×") {
				t.Errorf("the pure-Go decoder's note: %+v", e)
			}
		}
	}
	if decoder != transform.JPEGDecoderBuild() {
		t.Errorf("the start-up log names the decoder %q, want %q", decoder, transform.JPEGDecoderBuild())
	}
	want := 0
	if transform.DefaultJPEGDecoder().Name() == "go" {
		want = 1
	}
	if notes != want {
		t.Errorf("the pure-Go decoder's note logged %d times, want %d:\n%s", notes, want, stderr.String())
	}
}

// TestServeRefusesBudgetsAndPrices: a store budget no store can be read
// under, or a price a bill cannot be made of, is refused at start naming
// its flag. The reproductions: --store-gets-per-sec -5 or NaN started
// unbounded, 0.0001 never became ready and said nothing, a NaN price per
// 1,000 GETs made every GET /plan a 500, and a price per GiB of -1 a
// negative bill.
func TestServeRefusesBudgetsAndPrices(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--store-gets-per-sec=-5"}, "--store-gets-per-sec"},
		{[]string{"--store-gets-per-sec=NaN"}, "--store-gets-per-sec"},
		{[]string{"--store-gets-per-sec=+Inf"}, "--store-gets-per-sec"},
		{[]string{"--store-gets-per-sec=0.0001"}, "under the least of 1 GET a second"},
		{[]string{"--store-bytes-per-sec=1KiB"}, "--store-bytes-per-sec"},
		{[]string{"--price-per-1000-gets=NaN"}, "--price-per-1000-gets NaN"},
		{[]string{"--price-per-gib=-1"}, "--price-per-gib -1"},
		{[]string{"--price-cross-node-per-gib=+Inf"}, "--price-cross-node-per-gib"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var f serveFlags
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			f.register(fs, ":0")
			if err := fs.Parse(append([]string{"--dataset", "/tmp/x"}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			if _, err := f.gatewayConfig(zerolog.Nop()); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v: %v, want a refusal naming %q", tc.args, err, tc.want)
			}
		})
	}
	for _, ok := range [][]string{{"--store-gets-per-sec=0"}, {"--store-gets-per-sec=1"}, {"--store-bytes-per-sec=2GiB", "--price-per-gib=0.09"}} {
		var f serveFlags
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		f.register(fs, ":0")
		if err := fs.Parse(append([]string{"--dataset", "/tmp/x"}, ok...)); err != nil {
			t.Fatal(err)
		}
		if _, err := f.gatewayConfig(zerolog.Nop()); err != nil {
			t.Fatalf("%v: %v", ok, err)
		}
	}
}

// TestServeMaxIdleConns: --max-idle-conns reaches the data listener: of
// five keep-alive connections left idle under a cap of two, three are
// closed (the ones idle longest) and two kept. The cap itself is
// internal/server/idleconns' test; this is its wiring, untested before.
func TestServeMaxIdleConns(t *testing.T) {
	storeDir := packLocal(t, t.TempDir(), synth.Spec{Samples: 40, MeanBytes: 1 << 10, Seed: 3}, dataset.PackOptions{ChunkSize: 64 << 10})
	var stderr syncBuffer
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, &cli.Env{Stdout: io.Discard, Stderr: &stderr, Getenv: func(string) string { return "" }},
			[]string{"serve", "--listen", "127.0.0.1:0", "--dataset", "d=" + storeDir, "--log-format", "json", "--memory-limit", "off", "--max-idle-conns", "2"})
	}()
	defer func() {
		stop()
		<-done
	}()
	base := waitReady(t, &stderr, done)
	var conns []net.Conn
	for i := range 5 {
		c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: brand\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(c)
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if r.Buffered() != 0 {
			t.Fatalf("connection %d: %d bytes past the answer", i, r.Buffered())
		}
		conns = append(conns, c)
	}
	closed := 0
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		var b [1]byte
		_, err := c.Read(b[:])
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
		case err != nil:
			closed++
		default:
			t.Errorf("connection %d: a byte from the server unasked", i)
		}
	}
	if closed != 3 {
		t.Errorf("%d of 5 idle connections closed under --max-idle-conns 2, want 3", closed)
	}
}
