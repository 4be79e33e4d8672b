package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/megatron"
	"github.com/brandgw/brand/format/megatron/megatrontest"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/s3backend"
)

// A token job's global steps are the same sequences from one gateway and
// from a cluster of three `brand serve` processes (its ranks at their
// homes, documents of other nodes' chunks read through peers), at world
// 1 and as the union of world 8's ranks, over Megatron files in MinIO;
// and every token of every document is served once an epoch.
func TestTokensOneAndThreeGateways(t *testing.T) {
	ctx := context.Background()
	srv := miniotest.ForTest(t)
	if err := srv.MakeBucket(ctx, "tok"); err != nil {
		t.Fatal(err)
	}
	const url = "s3://tok/corpus"
	store, err := s3backend.Open(ctx, url, srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	const stride = 1000
	var docs [][]int64
	for p := range 4 {
		ds := megatrontest.Corpus(300, 900, 1, uint64(40+p))
		for i := range ds {
			for j := range ds[i] {
				ds[i][j] = int64((len(docs)+i)*stride + j)
			}
		}
		docs = append(docs, ds...)
		bin, idx := megatrontest.Files("int32", ds)
		for name, b := range map[string][]byte{fmt.Sprintf("p%d_text_document.bin", p): bin, fmt.Sprintf("p%d_text_document.idx", p): idx} {
			if _, err := store.Put(ctx, name, bytes.NewReader(b), int64(len(b))); err != nil {
				t.Fatal(err)
			}
		}
	}
	res, err := dataset.IndexInPlace(ctx, store, store, dataset.InPlaceOptions{
		Formats: []format.Format{megatron.Format{}}, Options: format.Options{ChunkBytes: 32 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	if n := res.Index.NumChunks(); n < 24 {
		t.Fatalf("%d chunks: the fixture is too small for 3 nodes", n)
	}
	p := &packed{server: srv, url: url}
	one := newClusterSetup(t, p, 1, "http", "tokens-single-node-secret-0123456789")
	single := one.proc(0, p)
	three := newClusterSetup(t, p, 3, "http", "tokens-three-node-secret-0123456789")
	procs := make([]*clusterProc, 3)
	for k := range procs {
		procs[k] = three.proc(k, p, "--peers", strings.Join(three.urls, ","), "--self", strconv.Itoa(k), "--peer-secret-file", three.secret)
	}
	startProcs(t, []*clusterProc{single}, one.bin, one.env, "")
	startProcs(t, procs, three.bin, three.env, "")

	hc := &http.Client{Timeout: time.Minute}
	getBody := func(u string) []byte {
		t.Helper()
		resp, err := hc.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s %v %s", u, resp.Status, err, b)
		}
		return b
	}
	const seq, global = 512, 16
	const pad = 2_000_000_000
	job := fmt.Sprintf("dataset=synthetic&seq=%d&seed=3&window=2&pad=%d", seq, pad)
	// step reads global batch m: at world 1 from base, or as world 8's
	// ranks from their homes among urls. It returns the sequences' keys
	// and tokens in rank order.
	step := func(urls []string, world, m int) (keys []string, ids [][]int32) {
		for r := range world {
			u := fmt.Sprintf("%s/epoch/0/batch/%d?%s&batch_size=%d&world=%d&rank=%d", urls[cluster.Home(r, world, len(urls))], m, job, global/world, world, r)
			samples, err := client.DecodeTar(getBody(u))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range samples {
				v, err := client.Int32s(s.Files[client.InputIDs])
				if err != nil {
					t.Fatal(err)
				}
				keys, ids = append(keys, s.Key), append(ids, v)
			}
		}
		return keys, ids
	}
	var info struct{ Batches, Samples int }
	resp, err := hc.Get(single.url + "/epoch/0?" + job + "&batch_size=16")
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if err != nil || info.Batches < 10 {
		t.Fatalf("/epoch/0: %+v %v", info, err)
	}
	seen := make([][]int, len(docs))
	for d := range docs {
		seen[d] = make([]int, len(docs[d]))
	}
	for m := range info.Batches {
		wantKeys, want := step([]string{single.url}, 1, m)
		for _, c := range []struct {
			name  string
			urls  []string
			world int
		}{{"one gateway, world 8", []string{single.url}, 8}, {"three gateways, world 1", three.urls[:1], 1},
			{"three gateways, world 8", three.urls, 8}} {
			keys, got := step(c.urls, c.world, m)
			if strings.Join(keys, ",") != strings.Join(wantKeys, ",") {
				t.Fatalf("step %d, %s: sequences %v, want %v", m, c.name, keys, wantKeys)
			}
			for i := range got {
				if !slicesEqual(got[i], want[i]) {
					t.Fatalf("step %d, %s: sequence %s's tokens differ", m, c.name, keys[i])
				}
			}
		}
		for _, ids := range want {
			for _, id := range ids {
				d, j := int(id)/stride, int(id)%stride
				if id != pad && (d >= len(docs) || j >= len(docs[d])) {
					t.Fatalf("step %d: token %d is no document's", m, id)
				}
				if id != pad {
					seen[d][j]++
				}
			}
		}
	}
	for d := range docs {
		for j, n := range seen[d] {
			if n != 1 {
				t.Fatalf("document %d token %d served %d times", d, j, n)
			}
		}
	}
}

func slicesEqual(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
