package integration

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/testsupport/cmdtest"
)

// keyList is an exclusion body of n keys of 60 bytes each, written as it
// is read so that the client holds none of it: the shape of issue 66's
// lists (a 252 MB body of 4 million keys).
type keyList struct {
	n, next int
	buf     []byte
}

// keyListBytes is the length of keyList{n: n}'s body.
func keyListBytes(n int) int64 {
	return int64(len(`{"from_step": 1, "keys": [`)) + int64(n)*int64(len(`"`+listKey(0)+`"`)) + int64(n-1)*2 + int64(len(`]}`))
}

func listKey(i int) string { return fmt.Sprintf("never/a/sample/of/this/dataset/%028d", i) }

func (l *keyList) Read(p []byte) (int, error) {
	for len(l.buf) < len(p) && l.next <= l.n {
		switch {
		case l.next == 0 && l.buf == nil:
			l.buf = append(l.buf, `{"from_step": 1, "keys": [`...)
		case l.next == l.n:
			l.buf = append(l.buf, `]}`...)
			l.next++
			continue
		case l.next > 0:
			l.buf = append(l.buf, ", "...)
		}
		l.buf = append(append(append(l.buf, '"'), listKey(l.next)...), '"')
		l.next++
	}
	if len(l.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, l.buf)
	l.buf = l.buf[n:]
	return n, nil
}

// TestBodiesWithinTheMemoryLimit is issue 66's reproduction of its item
// 7: four exclusion lists of 150 MB (2.5 million keys of 60 bytes each)
// posted at once to `brand serve --memory-limit 1GiB`, a process of its
// own with a 64 MiB cache. Each list is decoded whole (its keys name no
// sample, so each is refused 422 naming them once decoded) or refused
// 503 with Retry-After while the others hold the memory bodies are
// decoded in; and the process's peak resident memory (VmHWM) stays
// within the limit and the slack TestDecodesWithinTheMemoryLimit allows.
// Before bodies were reserved against the budget, one 252 MB list peaked
// at 990 MB and four at 2,275 MB; these four at 1,800-odd MiB.
func TestBodiesWithinTheMemoryLimit(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/PID/status")
	}
	if testing.Short() {
		t.Skip("sends 600 MB of exclusion lists")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src", "d")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("%03d.txt", i)), []byte(strings.Repeat("x", 100)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Without the race detector whatever this test runs under: its
	// shadow memory would be most of the peak measured.
	bin := filepath.Join(t.TempDir(), "brand")
	cmdtest.Go(t, "build", "-o", bin, "github.com/brandgw/brand/cmd/brand")
	store := filepath.Join(dir, "store")
	if out, err := exec.CommandContext(ctx, bin, "pack", "--src", filepath.Join(dir, "src"), "--dst", store).CombinedOutput(); err != nil {
		t.Fatalf("brand pack: %v\n%s", err, out)
	}
	var limit int64 = 1 << 30
	proc := startLimited(t, bin, filepath.Join(dir, "gateway.log"), "--dataset", "d="+store,
		"--cache-size", "64MiB", "--copy-bytes", "64MiB", "--memory-limit", strconv.FormatInt(limit, 10), "--index-poll", "0")
	url := proc.url

	const lists, keys = 4, 2_500_000
	var wg sync.WaitGroup
	statuses := make([]int, lists)
	says := make([]string, lists)
	retry := make([]string, lists)
	errs := make([]error, lists)
	hc := &http.Client{Timeout: 4 * time.Minute}
	for i := range lists {
		wg.Go(func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost,
				fmt.Sprintf("%s/jobs/run%d/exclude?dataset=d&seed=7&window=1&batch_size=2", url, i), &keyList{n: keys})
			if err != nil {
				errs[i] = err
				return
			}
			req.ContentLength = keyListBytes(keys)
			resp, err := hc.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			statuses[i], says[i], retry[i], errs[i] = resp.StatusCode, string(body), resp.Header.Get("Retry-After"), err
		})
	}
	wg.Wait()
	decoded := 0
	for i := range lists {
		switch {
		case errs[i] != nil:
			t.Errorf("list %d: %v", i, errs[i])
		case statuses[i] == http.StatusUnprocessableEntity && strings.Contains(says[i], fmt.Sprintf("%d of the %d keys are not samples", keys, keys)):
			decoded++
		case statuses[i] == http.StatusServiceUnavailable && retry[i] != "":
		default:
			t.Errorf("list %d: status %d (Retry-After %q): %.300s; want 422 naming every key, or 503 with Retry-After", i, statuses[i], retry[i], says[i])
		}
	}
	peak := procKB(t, proc.cmd.Process.Pid, "VmHWM")
	bound := int64(float64(limit)*(1+limitSlackRatio)) + limitSlackBytes
	t.Logf("%d of %d lists of %d bytes decoded; peak resident %.0f MiB, %.2f × the limit (%d MiB; bound %.0f MiB)",
		decoded, lists, keyListBytes(keys), float64(peak)/(1<<20), float64(peak)/float64(limit), limit>>20, float64(bound)/(1<<20))
	if decoded == 0 {
		t.Error("no list decoded")
	}
	if peak > bound {
		t.Errorf("the gateway's peak resident memory is %.0f MiB, over its --memory-limit of %d MiB and the slack (%.0f MiB)",
			float64(peak)/(1<<20), limit>>20, float64(bound)/(1<<20))
	}
}
