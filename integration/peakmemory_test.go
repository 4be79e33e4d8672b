package integration

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The harness of the tests that hold a gateway's peak resident memory
// to its --memory-limit (TestReadPathsWithinTheMemoryLimit, TestDecodesWithinTheMemoryLimit,
// TestBodiesWithinTheMemoryLimit): a node of its own, asked at once, its
// VmHWM read after.

// procKB reads a field of /proc/PID/status, in bytes.
func procKB(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// startLimited starts `brand serve` (bin) with args on a port of its own
// and a JSON log at logPath, without the test's GOMEMLIMIT and GOGC (the
// node sets Go's limit from --memory-limit), and stops it when the test
// ends.
func startLimited(t *testing.T, bin, logPath string, args ...string) *clusterProc {
	t.Helper()
	port := freePorts(t, 1)[0]
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOMEMLIMIT=") && !strings.HasPrefix(kv, "GOGC=") {
			env = append(env, kv)
		}
	}
	p := &clusterProc{url: fmt.Sprintf("http://127.0.0.1:%d", port), logPath: logPath,
		args: append([]string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--log-format", "json"}, args...)}
	p.start(t, bin, env)
	t.Cleanup(func() { p.stop(t) })
	return p
}

// getAtOnce asks every URL at once and reads each answer whole: each
// must be 200 with at least least bytes, or 503 with Retry-After (the
// test fails otherwise). It returns how many were of each.
func getAtOnce(t *testing.T, hc *http.Client, urls []string, least int64) (served, busy int) {
	t.Helper()
	statuses := make([]int, len(urls))
	retry := make([]string, len(urls))
	says := make([][]byte, len(urls))
	errs := make([]error, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Go(func() {
			resp, err := hc.Get(u)
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				says[i], _ = io.ReadAll(io.LimitReader(resp.Body, 300))
			}
			n, err := io.Copy(io.Discard, resp.Body)
			errs[i], statuses[i], retry[i] = err, resp.StatusCode, resp.Header.Get("Retry-After")
			if err == nil && resp.StatusCode == http.StatusOK && n < least {
				errs[i] = fmt.Errorf("%d bytes, fewer than %d", n, least)
			}
		})
	}
	wg.Wait()
	for i := range urls {
		switch {
		case errs[i] != nil:
			t.Errorf("request %d: %v", i, errs[i])
		case statuses[i] == http.StatusOK:
			served++
		case statuses[i] == http.StatusServiceUnavailable && retry[i] != "":
			busy++
		default:
			t.Errorf("request %d: status %d (Retry-After %q): %q; want 200, or 503 with Retry-After", i, statuses[i], retry[i], says[i])
		}
	}
	return served, busy
}
