package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/internal/testsupport/cmdtest"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// TestMixtureClusterOnMinIO serves a mixture of three datasets packed
// into one MinIO (3,000, 1,200 and 200 samples at weights 0.5, 0.3, 0.2:
// the smallest repeats about four times an epoch) from two `brand serve`
// processes forming a cluster. Four ranks read an epoch through the Go
// client from their homes: every sample is its source's, every global
// batch holds each dataset within one sample of its weight, each dataset's
// samples appear once per pass, and the cluster reads each chunk from the
// store once. Both nodes answer a batch with the same bytes, and so does
// a node killed and started again.
func TestMixtureClusterOnMinIO(t *testing.T) {
	ctx := context.Background()
	srv := miniotest.ForTest(t)
	if err := srv.MakeBucket(ctx, "train"); err != nil {
		t.Fatal(err)
	}
	names := []string{"web", "code", "books"}
	specs := map[string]synth.Spec{
		"web":   {Samples: 3000, MeanBytes: 4 << 10, Classes: 10, Seed: 31},
		"code":  {Samples: 1200, MeanBytes: 4 << 10, Classes: 10, Seed: 32},
		"books": {Samples: 200, MeanBytes: 4 << 10, Classes: 10, Seed: 33},
	}
	keys := map[string]map[string]int{}
	var datasetBytes int64
	for _, name := range names {
		spec := specs[name]
		src := filepath.Join(t.TempDir(), name)
		if err := spec.WriteTree(src); err != nil {
			t.Fatal(err)
		}
		store, err := s3backend.Open(ctx, "s3://train/"+name, srv.Config())
		if err != nil {
			t.Fatal(err)
		}
		res, err := dataset.Pack(ctx, src, store, dataset.PackOptions{ChunkSize: 128 << 10, Shuffle: true, Seed: 11, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		datasetBytes += res.Index.TotalBytes()
		keys[name] = map[string]int{}
		for i := range spec.Samples {
			keys[name][spec.Sample(i).Key] = i
		}
	}

	const nodes, world, batch = 2, 4, 32
	const mix = "web:0.5,code:0.3,books:0.2"
	bin := cmdtest.Build(t, "brand")
	env := append(os.Environ(), "AWS_ACCESS_KEY_ID="+srv.AccessKey, "AWS_SECRET_ACCESS_KEY="+srv.SecretKey, "AWS_REGION=us-east-1")
	ports := freePorts(t, nodes)
	urls := make([]string, nodes)
	for k, port := range ports {
		urls[k] = fmt.Sprintf("http://127.0.0.1:%d", port)
	}
	dir := t.TempDir()
	procs := make([]*clusterProc, nodes)
	for k := range nodes {
		args := []string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", ports[k]), "--s3-endpoint", srv.URL(),
			"--cache-size", "64MiB", "--cache-prefault=false", "--peers", strings.Join(urls, ","), "--self", strconv.Itoa(k),
			"--log-format", "json", "--shutdown-timeout", "10s", "--index-poll", "0"}
		for _, name := range names {
			args = append(args, "--dataset", name+"=s3://train/"+name)
		}
		procs[k] = &clusterProc{k: k, url: urls[k], logPath: filepath.Join(dir, fmt.Sprintf("node%d.log", k)), args: args}
	}
	startProcs(t, procs, bin, env, "")

	m, err := api.ParseMix(mix)
	if err != nil {
		t.Fatal(err)
	}
	perBatch := map[int][]int{} // global batch → samples per component
	streams := map[string][]string{}
	for r := range world {
		c, err := client.New(urls[0], client.Options{Peers: urls, Job: api.Job{Mix: m,
			Params: shuffle.Params{Seed: 4, Window: 4, BatchSize: batch, World: world, Rank: r}}})
		if err != nil {
			t.Fatal(err)
		}
		for b, err := range c.Epoch(ctx, 0) {
			if err != nil {
				t.Fatalf("rank %d: %v", r, err)
			}
			if perBatch[b.Index] == nil {
				perBatch[b.Index] = make([]int, len(names))
			}
			for _, s := range b.Samples {
				i, ok := keys[s.Dataset][s.Key]
				if !ok {
					t.Fatalf("rank %d batch %d: sample %s/%s is not in its dataset", r, b.Index, s.Dataset, s.Key)
				}
				want := specs[s.Dataset].Sample(i)
				if !bytes.Equal(s.Files["jpg"], want.Image) || !bytes.Equal(s.Files["cls"], want.Label()) {
					t.Fatalf("sample %s/%s differs from its source", s.Dataset, s.Key)
				}
				perBatch[b.Index][indexOf(names, s.Dataset)]++
				streams[s.Dataset] = append(streams[s.Dataset], s.Key)
			}
		}
	}
	weights := []float64{0.5, 0.3, 0.2}
	for b, counts := range perBatch {
		for i, n := range counts {
			if d := float64(n) - weights[i]*batch*world; d <= -1 || d >= 1 {
				t.Errorf("global batch %d holds %d of %s; want within one of %.1f", b, n, names[i], weights[i]*batch*world)
			}
		}
	}
	// Per rank the samples of a dataset arrive rank by rank, not in stream
	// order; a pass is whole when each key appears once per pass overall.
	for _, name := range names {
		n := specs[name].Samples
		count := map[string]int{}
		for _, k := range streams[name] {
			count[k]++
		}
		total := len(streams[name])
		for k, c := range count {
			if lo, hi := total/n, (total+n-1)/n; c < lo || c > hi {
				t.Errorf("%s: sample %s served %d times in %d draws of %d samples", name, k, c, total, n)
			}
		}
	}
	if len(streams["books"]) < 3*specs["books"].Samples {
		t.Errorf("books served %d samples; its share is about 880", len(streams["books"]))
	}
	var read float64
	for _, u := range urls {
		read += scrape(t, u, "brand_backend_read_bytes_total")["brand_backend_read_bytes_total"]
	}
	t.Logf("the cluster read %.0f bytes from the store for the epoch; the three datasets hold %d", read, datasetBytes)
	if read > float64(datasetBytes)*1.02 {
		t.Errorf("the cluster read %.0f bytes; each chunk once is at most %d", read, datasetBytes)
	}

	raw := func(u string, r int) []byte {
		t.Helper()
		q := fmt.Sprintf("/epoch/1/batch/2?mix=%s&seed=4&window=4&batch_size=%d&world=%d&rank=%d", mix, batch, world, r)
		resp, err := http.Get(u + q)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s%s: %d %v %s", u, q, resp.StatusCode, err, body)
		}
		return body
	}
	var want [world][]byte
	for r := range world {
		want[r] = raw(urls[0], r)
		if !bytes.Equal(raw(urls[1], r), want[r]) {
			t.Fatalf("rank %d: the two nodes served different bytes", r)
		}
	}
	procs[1].kill()
	procs[1].start(t, bin, env)
	waitUp(t, urls, 1)
	for r := range world {
		if !bytes.Equal(raw(urls[1], r), want[r]) {
			t.Fatalf("rank %d: the restarted node served different bytes", r)
		}
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
