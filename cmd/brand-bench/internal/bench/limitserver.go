package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/s3backend"
)

// The limit servers ServeLimit runs.
const (
	LimitProxy        = "proxy"         // (a): a reverse proxy in front of the store
	LimitStoreForward = "store-forward" // (a′): reads each chunk whole into a kept buffer, then writes it
	LimitStoreVerify  = "store-verify"  // (a″): (a′) checking every sample's CRC32C as it arrives
	LimitMemory       = "memory"        // (b) and (b′): every chunk, or slices of one, from memory
)

// LimitKinds lists the limit servers, in the order a run measures them.
var LimitKinds = []string{LimitProxy, LimitStoreForward, LimitStoreVerify, LimitMemory}

// LimitServerConfig configures ServeLimit.
type LimitServerConfig struct {
	Kind    string           // one of LimitKinds
	Backend s3backend.Config // the store holding the dataset
	Bucket  string           // the dataset's bucket
	Prefix  string           // the dataset's root in the bucket
	Listen  string           // address to listen on, e.g. 127.0.0.1:0
	Log     io.Writer        // JSON lines: "listening" with the address, then "ready"
}

// ServeLimit runs one of the limits of a benchmark as a server of its own
// until ctx is done: `brand-bench limit`, which the harness starts once
// per limit. A gateway is a process between the client and the store, so
// the ceilings it is compared with are measured as processes too: they pay
// for a runtime, a scheduler and a process's share of the two cores as
// Brand's gateway does (a proxy in the client's own process ran 1–12 %
// faster; every run measures that too, see docs/benchmarks.md).
//
// It serves GET /<chunk key> (the key relative to the dataset's root; the
// memory server also answers /<chunk key>?first=i&count=n with a slice),
// GET /readyz (200 once the server can be measured: the memory server has
// loaded every chunk, the store-and-forward server has allocated and
// touched its buffers) and GET /upstream (JSON: the body bytes read from
// the store so far).
func ServeLimit(ctx context.Context, cfg LimitServerConfig) error {
	if !slices.Contains(LimitKinds, cfg.Kind) {
		return fmt.Errorf("bench: unknown limit %q (want one of %v)", cfg.Kind, LimitKinds)
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	store, err := s3backend.NewS3(cfg.Backend, cfg.Bucket, cfg.Prefix)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	var (
		chunks   http.Handler
		upstream *atomic.Int64
		prepare  func(ctx context.Context) error
	)
	switch cfg.Kind {
	case LimitProxy:
		p := &s3Proxy{store: store, tr: newTransport(64), pool: newBufferPool()}
		chunks, upstream = p, &p.upstream
	case LimitStoreForward, LimitStoreVerify, LimitMemory:
		// All need the index: the chunks' keys, sizes, ETags and samples.
		var sf *storeForward
		var mem *memServer
		if cfg.Kind != LimitMemory {
			sf = &storeForward{store: store, verify: cfg.Kind == LimitStoreVerify}
			chunks, upstream = sf, &sf.upstream
		} else {
			mem = &memServer{}
			chunks, upstream = mem, new(atomic.Int64)
		}
		prepare = func(ctx context.Context) error {
			ix, err := stored.ReadIndex(ctx, store)
			if err != nil {
				return err
			}
			if sf != nil {
				sf.init(ix)
				return nil
			}
			return mem.load(ctx, store, ix)
		}
	}

	var ready atomic.Bool
	mux := http.NewServeMux()
	mux.Handle("GET /", chunks)
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "loading", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /upstream", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(upstreamAnswer{Bytes: upstream.Load()})
	})
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	addr := ln.Addr().String()
	logLine(cfg.Log, "listening", addr)

	if prepare != nil {
		if err := prepare(ctx); err != nil {
			_ = srv.Close()
			return fmt.Errorf("bench: limit %s: %w", cfg.Kind, err)
		}
	}
	ready.Store(true)
	logLine(cfg.Log, "ready", addr)

	select {
	case err := <-served:
		return fmt.Errorf("bench: limit %s: %w", cfg.Kind, err)
	case <-ctx.Done():
	}
	// Connections a client opened but never used count as busy for a few
	// seconds; whatever is left after a short grace is closed.
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if srv.Shutdown(sctx) != nil {
		_ = srv.Close()
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("bench: limit %s: %w", cfg.Kind, err)
	}
	return nil
}

// upstreamAnswer is a limit server's GET /upstream answer.
type upstreamAnswer struct {
	Bytes int64 `json:"upstream_bytes"`
}

// logLine writes one JSON log line in the shape startGateway reads.
func logLine(w io.Writer, msg, addr string) {
	b, _ := json.Marshal(struct {
		Time    string `json:"time"`
		Message string `json:"message"`
		Addr    string `json:"addr"`
	}{time.Now().UTC().Format(time.RFC3339Nano), msg, addr})
	_, _ = w.Write(append(b, '\n'))
}

// limitUpstream reads a limit server's upstream byte count.
func (p *gatewayProc) limitUpstream(ctx context.Context) (int64, error) {
	var b strings.Builder
	code, err := p.get(ctx, "/upstream", &b)
	if err == nil && code != http.StatusOK {
		err = errors.New("status " + strconv.Itoa(code))
	}
	var a upstreamAnswer
	if err == nil {
		err = json.Unmarshal([]byte(b.String()), &a)
	}
	if err != nil {
		return 0, fmt.Errorf("bench: limit server /upstream: %w", err)
	}
	return a.Bytes, nil
}
