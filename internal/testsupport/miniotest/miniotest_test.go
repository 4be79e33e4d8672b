package miniotest

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/s3backend"
)

func TestForTestServesS3(t *testing.T) {
	s := ForTest(t)
	if host, _, err := net.SplitHostPort(s.Endpoint); err != nil || (os.Getenv(EnvEndpoint) == "" && host != "127.0.0.1") {
		t.Errorf("Endpoint = %q, want a 127.0.0.1 address", s.Endpoint)
	}
	bucket := s.NewBucket(t)
	// Creating it again is not an error.
	if err := s.MakeBucket(context.Background(), bucket); err != nil {
		t.Errorf("MakeBucket again: %v", err)
	}
	st, err := s3backend.NewS3(s.Config(), bucket, "p")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	info, err := st.Put(ctx, "k", bytes.NewReader([]byte("hello")), 5)
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 5)
	if err := st.ReadRange(ctx, "k", info.ETag, 0, p); err != nil || string(p) != "hello" {
		t.Fatalf("ReadRange = %q, %v", p, err)
	}

	// Wrong credentials are refused: the server really checks them.
	cfg := s.Config()
	cfg.SecretKey += "x"
	cfg.MaxRetries = -1
	bad, err := s3backend.NewS3(cfg, bucket, "p")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Stat(ctx, "k"); err == nil {
		t.Error("Stat with a wrong secret key succeeded")
	}
}

func TestCloseStopsServer(t *testing.T) {
	if os.Getenv(EnvEndpoint) != "" {
		t.Skip("an external server is configured; this test needs a local one")
	}
	s := ForTest(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	select {
	case <-s.exited:
	default:
		t.Error("process still running after Close")
	}
	if _, err := os.Stat(s.home); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("private home %s left behind: %v", s.home, err)
	}
	if c, err := net.DialTimeout("tcp", s.Endpoint, time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after Close", s.Endpoint)
	}
}

func TestServersAreIndependent(t *testing.T) {
	if os.Getenv(EnvEndpoint) != "" {
		t.Skip("an external server is configured; this test needs local ones")
	}
	a, b := ForTest(t), ForTest(t)
	if a.Endpoint == b.Endpoint || a.AccessKey == b.AccessKey || a.SecretKey == b.SecretKey {
		t.Errorf("two servers share an endpoint or credentials: %+v %+v", a, b)
	}
}

// fakeBinary writes an executable shell script and points BRAND_MINIO_BIN
// at it.
func fakeBinary(t *testing.T, script string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("shell-script fake binaries need a Unix shell")
	}
	bin := filepath.Join(t.TempDir(), "minio")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("BRAND_MINIO_BIN", bin)
}

func TestStartFailsFastWhenMinIOExits(t *testing.T) {
	fakeBinary(t, "echo 'FATAL: Unable to start the server: disk on fire' >&2\nexit 1\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Start(ctx, t.TempDir())
	if err == nil {
		t.Fatal("Start succeeded with a binary that exits")
	}
	if !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("error %q does not include the server's output", err)
	}
	if ctx.Err() != nil {
		t.Errorf("Start waited for its deadline instead of noticing the exit: %v", err)
	}
}

func TestStartRetriesPortRace(t *testing.T) {
	// The fake fails like a bind race twice, then exits for good: Start
	// must try three times and report the last failure.
	count := filepath.Join(t.TempDir(), "count")
	fakeBinary(t, "echo x >> '"+count+"'\necho 'listen tcp 127.0.0.1:1: bind: address already in use' >&2\nexit 1\n")
	_, err := Start(context.Background(), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("Start = %v, want the bind error", err)
	}
	b, rerr := os.ReadFile(count)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if n := strings.Count(string(b), "x"); n != 3 {
		t.Errorf("binary started %d times, want 3", n)
	}
}

func TestStartRetriesWhenMinIOKeepsRunningAfterABindError(t *testing.T) {
	// MinIO does not always exit when its port is taken: in a CI run it
	// logged "Unable to listen on ...: address already in use" and kept
	// running, so Start waited out its 60 s deadline. The fake does the
	// same; Start must notice the message, stop the process and try a new
	// port, well before its deadline.
	count := filepath.Join(t.TempDir(), "count")
	fakeBinary(t, "echo x >> '"+count+"'\necho 'Error: Unable to listen on `127.0.0.1:1`: listen tcp 127.0.0.1:1: bind: address already in use' >&2\nexec sleep 60\n")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Start(ctx, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("Start = %v, want the bind error", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("Start waited for its deadline instead of noticing the bind error: %v", err)
	}
	b, rerr := os.ReadFile(count)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if n := strings.Count(string(b), "x"); n != 3 {
		t.Errorf("binary started %d times, want 3", n)
	}
}

func TestStartHonoursContext(t *testing.T) {
	fakeBinary(t, "exec sleep 60\n")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := Start(ctx, t.TempDir())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Start = %v, want context.DeadlineExceeded", err)
	}
}

func TestStartMissingBinary(t *testing.T) {
	t.Setenv("BRAND_MINIO_BIN", filepath.Join(t.TempDir(), "nothing-here"))
	_, err := Start(context.Background(), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "ensure-minio.sh") {
		t.Errorf("Start = %v, want an error naming the install script", err)
	}
}

func TestBinaryPath(t *testing.T) {
	tests := []struct {
		name           string
		bin, xdg, home string
		want           string
	}{
		{"explicit", "/opt/minio", "/xdg", "/home/u", "/opt/minio"},
		{"xdg", "", "/xdg", "/home/u", "/xdg/brand/minio-" + Version + "/minio"},
		{"home", "", "", "/home/u", "/home/u/.cache/brand/minio-" + Version + "/minio"},
		{"relative xdg", "", "rel", "/home/u", ""},
		{"nothing", "", "", "", ""},
	}
	if runtime.GOOS != "linux" {
		t.Skip("cache directory rules differ off Linux")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("BRAND_MINIO_BIN", tt.bin)
			t.Setenv("XDG_CACHE_HOME", tt.xdg)
			t.Setenv("HOME", tt.home)
			if got := BinaryPath(); got != tt.want {
				t.Errorf("BinaryPath() = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestScriptAgrees checks that scripts/ensure-minio.sh reads Version from
// this package and installs where BinaryPath looks.
func TestScriptAgrees(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the script's cache-directory rules are checked on Linux")
	}
	script := filepath.Join("..", "..", "..", "scripts", "ensure-minio.sh")
	run := func(t *testing.T, arg string) string {
		t.Helper()
		out, err := exec.Command("bash", script, arg).Output()
		if err != nil {
			t.Fatalf("%s %s: %v", script, arg, err)
		}
		return strings.TrimSpace(string(out))
	}
	if got := run(t, "--print-version"); got != Version {
		t.Errorf("script version %q, Version %q", got, Version)
	}
	tests := []struct {
		name           string
		bin, xdg, home string
	}{
		{"explicit", "/opt/minio-custom", "/xdg", "/home/u"},
		{"xdg", "", "/xdg/cache", "/home/u"},
		{"home", "", "", "/home/u"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("BRAND_MINIO_BIN", tt.bin)
			t.Setenv("XDG_CACHE_HOME", tt.xdg)
			t.Setenv("HOME", tt.home)
			if got, want := run(t, "--print-path"), BinaryPath(); got != want {
				t.Errorf("script path %q, BinaryPath() %q", got, want)
			}
		})
	}
}

// TestScriptInstalls runs scripts/ensure-minio.sh with a fake go command
// that "builds" a stub binary, checking what it asks go for, that the result
// lands at BRAND_MINIO_BIN, and that a working binary is not rebuilt.
func TestScriptInstalls(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the script needs a Unix shell")
	}
	script := filepath.Join("..", "..", "..", "scripts", "ensure-minio.sh")
	tools := t.TempDir()
	calls := filepath.Join(t.TempDir(), "go-calls")
	fakeGo := `#!/bin/sh
echo "$* CGO_ENABLED=$CGO_ENABLED GOFLAGS=$GOFLAGS" >> '` + calls + `'
printf '#!/bin/sh\necho "minio version stub"\n' > "$GOBIN/minio"
chmod +x "$GOBIN/minio"
`
	if err := os.WriteFile(filepath.Join(tools, "go"), []byte(fakeGo), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "nested", "my-minio")
	t.Setenv("PATH", tools+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("BRAND_MINIO_BIN", bin)
	run := func() string {
		t.Helper()
		out, err := exec.Command("bash", script).CombinedOutput()
		if err != nil {
			t.Fatalf("ensure-minio.sh: %v\n%s", err, out)
		}
		return string(out)
	}
	goCalls := func() []string {
		b, err := os.ReadFile(calls)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}

	out := run()
	want := "install github.com/minio/minio@" + Version + " CGO_ENABLED=0 GOFLAGS=-trimpath"
	if got := goCalls(); len(got) != 1 || got[0] != want {
		t.Fatalf("go calls = %q, want [%q]", got, want)
	}
	if !isExecutable(bin) {
		t.Fatalf("no executable at %s after install; output:\n%s", bin, out)
	}
	if !strings.Contains(out, bin) || !strings.Contains(out, "5 minutes") {
		t.Errorf("output does not name the binary or warn about the build time:\n%s", out)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(bin), ".install.*")); len(leftovers) != 0 {
		t.Errorf("scratch directories left behind: %q", leftovers)
	}

	// Installed and working: nothing to do.
	run()
	if got := goCalls(); len(got) != 1 {
		t.Errorf("a working binary was rebuilt: go calls %q", got)
	}

	// Present but broken: rebuilt.
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	run()
	if got := goCalls(); len(got) != 2 {
		t.Errorf("a broken binary was not rebuilt: go calls %q", got)
	}
}

func TestExternal(t *testing.T) {
	tests := []struct {
		endpoint, access, secret string
		wantEndpoint, wantURL    string
		ok                       bool
	}{
		{"127.0.0.1:9000", "a", "s", "127.0.0.1:9000", "http://127.0.0.1:9000", true},
		{"http://minio:9000", "a", "s", "minio:9000", "http://minio:9000", true},
		{"https://s3.example.com", "a", "s", "s3.example.com", "https://s3.example.com", true},
		{"127.0.0.1:9000", "", "s", "", "", false},
		{"127.0.0.1:9000", "a", "", "", "", false},
		{"ftp://x", "a", "s", "", "", false},
	}
	for _, tt := range tests {
		s, err := external(tt.endpoint, tt.access, tt.secret)
		if (err == nil) != tt.ok {
			t.Errorf("external(%q) error = %v, want ok=%v", tt.endpoint, err, tt.ok)
			continue
		}
		if err != nil {
			continue
		}
		if s.Endpoint != tt.wantEndpoint || s.URL() != tt.wantURL || s.Config().Endpoint != tt.wantURL {
			t.Errorf("external(%q) = %q / %q, want %q / %q", tt.endpoint, s.Endpoint, s.URL(), tt.wantEndpoint, tt.wantURL)
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close of an external server: %v", err)
		}
	}
}

func TestForTestUsesExternalServer(t *testing.T) {
	real := ForTest(t)
	t.Setenv(EnvEndpoint, real.URL())
	t.Setenv(EnvAccessKey, real.AccessKey)
	t.Setenv(EnvSecretKey, real.SecretKey)
	ext := ForTest(t)
	if ext.cmd != nil {
		t.Fatal("ForTest started a server although BRAND_S3_* name one")
	}
	if ext.Endpoint != real.Endpoint || ext.AccessKey != real.AccessKey {
		t.Errorf("external server %+v, want %+v", ext, real)
	}
	ext.NewBucket(t) // reaches the server
}

func TestBucketSafe(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"TestS3/ReadRange", 40, "tests3-readrange"},
		{"Test__x--y", 40, "test-x-y"},
		{"/lead/", 40, "lead"},
		{"abcdefgh", 4, "abcd"},
		{"ab/cd", 3, "ab"},
	}
	for _, tt := range tests {
		if got := bucketSafe(tt.in, tt.n); got != tt.want {
			t.Errorf("bucketSafe(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
		}
	}
}

func TestTailBuffer(t *testing.T) {
	tb := &tailBuffer{max: 10}
	for _, s := range []string{"0123", "456789", "abcdef"} {
		tb.Write([]byte(s))
	}
	if got := tb.String(); got != "6789abcdef" {
		t.Errorf("tail = %q, want %q", got, "6789abcdef")
	}
}

// A restarted server keeps its objects and credentials.
func TestRestartKeepsObjects(t *testing.T) {
	if os.Getenv(EnvEndpoint) != "" {
		t.Skip("an external server is configured; this test needs a local one")
	}
	s := ForTest(t)
	bucket := s.NewBucket(t)
	ctx := context.Background()
	st, err := s3backend.NewS3(s.Config(), bucket, "p")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Put(ctx, "k", bytes.NewReader([]byte("hello")), 5)
	if err != nil {
		t.Fatal(err)
	}
	oldPid := s.Pid()
	s2, err := s.Restart(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s2.Close() })
	if s2.Pid() == oldPid || s2.AccessKey != s.AccessKey {
		t.Fatalf("restart: pid %d (was %d), access key %q (was %q)", s2.Pid(), oldPid, s2.AccessKey, s.AccessKey)
	}
	st2, err := s3backend.NewS3(s2.Config(), bucket, "p")
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 5)
	if err := st2.ReadRange(ctx, "k", info.ETag, 0, p); err != nil || string(p) != "hello" {
		t.Fatalf("after a restart, ReadRange = %q, %v", p, err)
	}
}
