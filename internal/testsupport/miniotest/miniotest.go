// Package miniotest starts a pinned MinIO server on the loopback
// interface for Brand's tests and benchmarks, so that the S3 path is
// exercised against a real server rather than a fake.
//
// The binary is built once per machine by scripts/ensure-minio.sh into the
// path BinaryPath returns. Each Server has its own data directory, port and
// random credentials; nothing is shared between servers, so tests may start
// several in one process.
package miniotest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/brandgw/brand/s3backend"
)

// Version is the github.com/minio/minio module version Brand tests against.
// scripts/ensure-minio.sh reads it from this line; keep it a single-line
// constant.
const Version = "v0.0.0-20260212201848-7aac2a2c5b7c"

// readyTimeout bounds how long Start waits for a new server to report ready.
const readyTimeout = 60 * time.Second

// BinaryPath returns where the MinIO binary is expected: $BRAND_MINIO_BIN if
// set, else <user cache dir>/brand/minio-<Version>/minio (on Linux
// $XDG_CACHE_HOME or ~/.cache). It returns "" if neither can be determined.
func BinaryPath() string {
	if p := os.Getenv("BRAND_MINIO_BIN"); p != "" {
		return p
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(cache, "brand", "minio-"+Version, "minio")
}

// Server is a running MinIO server, or an external one (see ForTest).
type Server struct {
	Endpoint  string // host:port
	AccessKey string
	SecretKey string

	secure   bool // external server reached over https
	dataDir  string
	cmd      *exec.Cmd
	exited   chan struct{} // closed when the process has exited
	output   *tailBuffer
	home     string // private $HOME of the process, removed by Close
	close    sync.Once
	closeErr error
}

// Start starts a MinIO server storing its data in dataDir (created if
// needed) and returns once it reports ready. The server listens on a free
// 127.0.0.1 port with random credentials; its console is disabled. ctx bounds
// the start only: the server runs until Close.
func Start(ctx context.Context, dataDir string) (*Server, error) {
	return startWith(ctx, dataDir, "brand"+randomHex(6), randomHex(20))
}

// Restart kills the server, as a crash would, and starts a new one on the
// same data directory with the same credentials: the objects survive, the
// port changes (the new server's Endpoint). The old Server is closed; the
// caller closes the new one. An external server cannot be restarted.
func (s *Server) Restart(ctx context.Context) (*Server, error) {
	if s.cmd == nil {
		return nil, errors.New("miniotest: cannot restart an external server")
	}
	if err := s.Close(); err != nil {
		return nil, err
	}
	return startWith(ctx, s.dataDir, s.AccessKey, s.SecretKey)
}

func startWith(ctx context.Context, dataDir, accessKey, secretKey string) (*Server, error) {
	bin := BinaryPath()
	if bin == "" {
		return nil, errors.New("miniotest: cannot locate the MinIO binary: set BRAND_MINIO_BIN or HOME")
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("miniotest: MinIO binary: %w (install it with %s)", err, InstallCommand())
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("miniotest: data directory: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()

	// A port found free may be taken before MinIO binds it; try again with
	// new ports when that happens.
	var lastErr error
	for range 3 {
		s, err := start(ctx, bin, dataDir, accessKey, secretKey)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if !errors.Is(err, errAddrInUse) || ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

var errAddrInUse = errors.New("address already in use")

func start(ctx context.Context, bin, dataDir, accessKey, secretKey string) (*Server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	console, err := freeAddr()
	if err != nil {
		return nil, err
	}
	// MinIO keeps certificates and config under $HOME/.minio. Give it a
	// private home instead of the user's, outside dataDir (where any
	// directory is taken for a bucket).
	home, err := os.MkdirTemp("", "brand-minio-home-")
	if err != nil {
		return nil, fmt.Errorf("miniotest: %w", err)
	}
	s := &Server{
		Endpoint:  addr,
		AccessKey: accessKey,
		SecretKey: secretKey,
		dataDir:   dataDir,
		exited:    make(chan struct{}),
		output:    &tailBuffer{max: 8 << 10},
		home:      home,
	}
	cmd := exec.Command(bin, "server",
		"--address", addr,
		"--console-address", console,
		"--certs-dir", filepath.Join(home, "certs"),
		dataDir)
	cmd.Env = append(environWithoutMinIO(),
		"HOME="+home,
		"MINIO_ROOT_USER="+s.AccessKey,
		"MINIO_ROOT_PASSWORD="+s.SecretKey,
		"MINIO_BROWSER=off",
		"MINIO_UPDATE=off",
		// The background scanner (usage, healing, lifecycle) starts a
		// minute after the server and then takes about 8 % of a core
		// scanning 100,000 objects, whatever the load; a benchmark would
		// charge it to whichever configuration runs then. "slowest"
		// starts its cycles 30 minutes apart, after any test or run.
		"MINIO_SCANNER_SPEED=slowest",
	)
	cmd.Stdout = s.output
	cmd.Stderr = s.output
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		os.RemoveAll(home)
		return nil, fmt.Errorf("miniotest: start %s: %w", bin, err)
	}
	s.cmd = cmd
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()

	if err := s.waitReady(ctx); err != nil {
		s.Close()
		return nil, err
	}
	// The server that answered may not be ours: if another one took the
	// port first, ours is failing to bind while that one reports ready. Only
	// ours knows these credentials.
	if err := s.checkCredentials(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("%w: the server on %s rejects this server's credentials: %w", errAddrInUse, s.Endpoint, err)
	}
	return s, nil
}

// checkCredentials makes one authenticated request.
func (s *Server) checkCredentials(ctx context.Context) error {
	c, err := s.client()
	if err != nil {
		return err
	}
	_, err = c.ListBuckets(ctx)
	return err
}

// client returns a minio-go client for administrative calls.
func (s *Server) client() (*minio.Client, error) {
	c, err := minio.New(s.Endpoint, &minio.Options{
		Creds:        credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Secure:       s.secure,
		Region:       "us-east-1",
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		return nil, fmt.Errorf("miniotest: client: %w", err)
	}
	return c, nil
}

// waitReady polls the readiness endpoint until it answers 200, the process
// exits, or ctx ends.
func (s *Server) waitReady(ctx context.Context) error {
	transport := &http.Transport{DisableKeepAlives: true}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 2 * time.Second}
	url := "http://" + s.Endpoint + "/minio/health/ready"
	delay := 20 * time.Millisecond
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("miniotest: %w", err)
		}
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		// MinIO may log that it cannot bind its port and keep running
		// (seen in CI): waiting for it would only run out the deadline.
		if out := s.output.String(); strings.Contains(out, "address already in use") {
			return fmt.Errorf("%w: MinIO could not bind %s and did not exit; its output ends with:\n%s", errAddrInUse, s.Endpoint, out)
		}
		select {
		case <-s.exited:
			out := s.output.String()
			err := fmt.Errorf("miniotest: MinIO exited before becoming ready (%s); its output ends with:\n%s", s.cmd.ProcessState, out)
			if strings.Contains(out, "address already in use") {
				err = fmt.Errorf("%w: %w", errAddrInUse, err)
			}
			return err
		case <-ctx.Done():
			return fmt.Errorf("miniotest: MinIO at %s not ready: %w; its output ends with:\n%s", s.Endpoint, ctx.Err(), s.output.String())
		case <-time.After(delay):
			delay = min(2*delay, 250*time.Millisecond)
		}
	}
}

// Close stops the server (SIGKILL: test data is disposable) and waits for
// it to exit. It is safe to call more than once; for an external server it
// does nothing.
func (s *Server) Close() error {
	s.close.Do(func() {
		if s.cmd == nil {
			return
		}
		if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			s.closeErr = fmt.Errorf("miniotest: kill: %w", err)
		}
		<-s.exited
		if err := os.RemoveAll(s.home); err != nil && s.closeErr == nil {
			s.closeErr = fmt.Errorf("miniotest: %w", err)
		}
	})
	return s.closeErr
}

// Pid returns the server process's ID, or 0 for an external server.
func (s *Server) Pid() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// URL returns the server's base URL, http://host:port.
func (s *Server) URL() string {
	if s.secure {
		return "https://" + s.Endpoint
	}
	return "http://" + s.Endpoint
}

// Config returns an s3backend configuration for this server, ready for
// s3backend.NewS3 or s3backend.Open. Fields other than the endpoint,
// credentials and region are left to their defaults.
func (s *Server) Config() s3backend.Config {
	return s3backend.Config{
		Endpoint:  s.URL(),
		AccessKey: s.AccessKey,
		SecretKey: s.SecretKey,
		Region:    "us-east-1",
		Secure:    s.secure,
	}
}

// MakeBucket creates a bucket. A bucket this server's credentials already
// own is not an error, so tests can share an external server.
func (s *Server) MakeBucket(ctx context.Context, name string) error {
	c, err := s.client()
	if err != nil {
		return err
	}
	err = c.MakeBucket(ctx, name, minio.MakeBucketOptions{Region: "us-east-1"})
	if err != nil && minio.ToErrorResponse(err).Code != "BucketAlreadyOwnedByYou" {
		return fmt.Errorf("miniotest: make bucket %q: %w", name, err)
	}
	return nil
}

// freeAddr returns a 127.0.0.1 address with a port that was free a moment
// ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("miniotest: find a free port: %w", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return "", fmt.Errorf("miniotest: find a free port: %w", err)
	}
	return addr, nil
}

// environWithoutMinIO returns this process's environment minus HOME and
// the MINIO_* variables, which would otherwise reconfigure the test server
// (volumes, credentials, KMS, ...) from a developer's shell.
func environWithoutMinIO() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MINIO_") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	return env
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// tailBuffer keeps the last max bytes written to it: enough of a failed
// server's output to explain the failure.
type tailBuffer struct {
	max int
	mu  sync.Mutex
	buf bytes.Buffer
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}
