package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/internal/cache/disktier"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/internal/testsupport/cmdtest"
	"github.com/brandgw/brand/shuffle"
)

// diskStats reads a gateway's /stats "disk".
func diskStats(t *testing.T, url string) api.DiskStats {
	t.Helper()
	resp, err := http.Get(url + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Disk *api.DiskStats `json:"disk"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || st.Disk == nil {
		t.Fatalf("/stats: %v, disk %v", err, st.Disk)
	}
	return *st.Disk
}

// TestDiskTierSurvivesKillAndRestartOnMinIO runs `brand serve` with a disk
// tier over MinIO as a process: killed with SIGKILL in the middle of its
// first epoch (chunk writes in flight), started again on the same disk
// cache, it serves every sample once and right and reads from the store
// only what the disk lacked; once the disk holds the dataset, warm epochs
// and a gateway stopped and started again read at most a hundredth of the
// dataset from the store.
func TestDiskTierSurvivesKillAndRestartOnMinIO(t *testing.T) {
	spec := synth.Spec{Samples: 4096, MeanBytes: 4 << 10, Classes: 10, Seed: 8}
	p := packToMinIO(t, spec, 256<<10)
	ix := p.index(t)
	total := ix.TotalBytes()
	keys := p.keys()
	bin := cmdtest.Build(t, "brand")
	env := append(os.Environ(), "AWS_ACCESS_KEY_ID="+p.server.AccessKey, "AWS_SECRET_ACCESS_KEY="+p.server.SecretKey, "AWS_REGION=us-east-1")
	port := freePorts(t, 1)[0]
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	dir := t.TempDir()
	diskDir := filepath.Join(dir, "disk")
	proc := &clusterProc{url: url, logPath: filepath.Join(dir, "gateway.log"),
		args: []string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", port),
			"--dataset", "synthetic=" + p.url, "--s3-endpoint", p.server.URL(),
			"--cache-size", strconv.FormatInt(total/4, 10), "--cache-prefault=false",
			"--disk-cache", diskDir, "--disk-cache-size", strconv.FormatInt(2*total, 10),
			"--seed", "5", "--window", "4", "--batch-size", "32",
			"--log-format", "json", "--shutdown-timeout", "10s", "--index-poll", "0"}}
	storeBytes := func() float64 {
		return scrape(t, url, "brand_backend_read_bytes_total")["brand_backend_read_bytes_total"]
	}
	epoch := func(e int) {
		t.Helper()
		seen, _ := p.readEpoch(t, url, e, 1, keys)
		exactlyOnce(t, seen, spec.Samples, fmt.Sprintf("epoch %d", e))
	}
	settle := func() {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for diskStats(t, url).Chunks < int64(ix.NumChunks()) {
			if time.Now().After(deadline) {
				t.Fatalf("the disk cache holds %+v, want all %d chunks", diskStats(t, url), ix.NumChunks())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	proc.start(t, bin, env)
	// Half of epoch 0, then SIGKILL while chunks are being written.
	c, err := client.New(url, client.Options{Job: api.Job{Params: shuffle.Params{Seed: 5}}, Ahead: 3})
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for b, err := range c.Epoch(context.Background(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range b.Samples {
			p.checkSample(t, s, keys)
		}
		if read += len(b.Samples); read >= spec.Samples/2 {
			break
		}
	}
	written := diskStats(t, url).Writes
	proc.kill()
	t.Logf("killed after %d of %d samples, %d chunks written to disk", read, spec.Samples, written)

	proc.start(t, bin, env)
	t.Cleanup(func() { proc.stop(t) })
	st := diskStats(t, url)
	if st.Found < written || st.Found > int64(ix.NumChunks()) {
		t.Fatalf("restarted: %d chunks found on disk, %d were written before the kill", st.Found, written)
	}
	sub := filepath.Join(diskDir, disktier.Subdir)
	des, _ := os.ReadDir(sub)
	for _, de := range des {
		if strings.Contains(de.Name(), ".tmp-") {
			t.Fatalf("a temporary file survived the restart: %s", de.Name())
		}
	}
	before := storeBytes()
	epoch(1)
	lacked := total - st.Bytes
	got := storeBytes() - before
	t.Logf("after the kill: epoch 1 read %.3f of the dataset from the store; the disk lacked %.3f", got/float64(total), float64(lacked)/float64(total))
	if got > float64(lacked)+float64(total)/100 {
		t.Fatalf("epoch 1 after the kill read %.0f bytes from the store; the disk lacked only %d", got, lacked)
	}
	settle()
	before = storeBytes()
	epoch(2)
	if got := storeBytes() - before; got > float64(total)/100 {
		t.Fatalf("warm epoch 2 read %.3f of the dataset from the store, want at most 0.01", got/float64(total))
	}

	// A stop and a start on the same disk: the first epoch is warm.
	proc.stop(t)
	proc.start(t, bin, env)
	if st := diskStats(t, url); st.Found != int64(ix.NumChunks()) {
		t.Fatalf("restarted gateway found %d chunks on disk, want %d", st.Found, ix.NumChunks())
	}
	before = storeBytes()
	epoch(3)
	if got := storeBytes() - before; got > float64(total)/100 {
		t.Fatalf("the restarted gateway's first epoch read %.3f of the dataset from the store, want at most 0.01", got/float64(total))
	}
}
