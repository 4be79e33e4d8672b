package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/megatron"
	"github.com/brandgw/brand/format/megatron/megatrontest"
	"github.com/brandgw/brand/internal/testsupport/cmdtest"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/s3backend"
)

// A schedule over two Megatron token datasets in MinIO, served by a
// `brand serve` process: stored under a job's name, read as sequences
// (seq=), edited twice mid-run. Each step (a global batch of 8
// sequences) holds each source's sequences as its phase says; an edit
// from a served step is refused (409 naming it); after each edit the
// steps before it are the same bytes; and the job, resumed after the two
// edits at world 1 from its position, reads exactly what a job of the
// final schedule reads uninterrupted at world 2.
func TestTokenScheduleEditsOverMinIO(t *testing.T) {
	ctx := context.Background()
	srv := miniotest.ForTest(t)
	if err := srv.MakeBucket(ctx, "tok"); err != nil {
		t.Fatal(err)
	}
	names := []string{"web", "code"}
	const source = 10_000_000 // token / source is its source
	for k, name := range names {
		store, err := s3backend.Open(ctx, "s3://tok/"+name, srv.Config())
		if err != nil {
			t.Fatal(err)
		}
		docs := megatrontest.Corpus(300, 300, 1, uint64(70+k))
		for d := range docs {
			for i := range docs[d] {
				docs[d][i] = int64(k*source + d*1000 + i)
			}
		}
		bin, idx := megatrontest.Files("int32", docs)
		for key, b := range map[string][]byte{"p_text_document.bin": bin, "p_text_document.idx": idx} {
			if _, err := store.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := dataset.IndexInPlace(ctx, store, store, dataset.InPlaceOptions{
			Formats: []format.Format{megatron.Format{}}, Options: format.Options{ChunkBytes: 16 << 10}}); err != nil {
			t.Fatal(err)
		}
	}
	port := freePorts(t, 1)[0]
	p := &clusterProc{url: fmt.Sprintf("http://127.0.0.1:%d", port), logPath: filepath.Join(t.TempDir(), "serve.log"),
		args: []string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--s3-endpoint", srv.URL(),
			"--dataset", "web=s3://tok/web", "--dataset", "code=s3://tok/code",
			"--cache-size", "32MiB", "--cache-prefault=false", "--log-format", "json", "--shutdown-timeout", "10s", "--index-poll", "0"}}
	startProcs(t, []*clusterProc{p}, cmdtest.Build(t, "brand"),
		append(os.Environ(), "AWS_ACCESS_KEY_ID="+srv.AccessKey, "AWS_SECRET_ACCESS_KEY="+srv.SecretKey, "AWS_REGION=us-east-1"), "")

	hc := &http.Client{Timeout: time.Minute}
	const pad = 2_000_000_000
	const tok = "seq=128&window=2&mix_block=8&seed=4&pad=2000000000"
	// step reads global batch b of epoch e under q at world ranks of
	// 8/world sequences: the bodies' hash, each sequence's source (from
	// its tokens, checked against Brand-Mix-Components) and its tokens.
	type seqs = [][]int32
	step := func(q string, e, b, world int) (string, []int, seqs) {
		t.Helper()
		h := sha256.New()
		var comps []int
		var all seqs
		for r := range world {
			u := fmt.Sprintf("%s/epoch/%d/batch/%d?%s&%s&batch_size=%d&world=%d&rank=%d", p.url, e, b, tok, q, 8/world, world, r)
			resp, err := hc.Get(u)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %s %v %s", u, resp.Status, err, body)
			}
			h.Write(body)
			samples, err := client.DecodeTar(body)
			if err != nil {
				t.Fatal(err)
			}
			named := strings.Split(resp.Header.Get(api.HeaderMixComponents), ",")
			for i, s := range samples {
				ids, err := client.Int32s(s.Files[client.InputIDs])
				if err != nil {
					t.Fatal(err)
				}
				c := int(ids[0]) / source
				for _, id := range ids {
					if id != pad && int(id)/source != c {
						t.Fatalf("%s: sequence %d holds tokens of two sources", u, i)
					}
				}
				if named[i] != fmt.Sprint(c) {
					t.Fatalf("%s: sequence %d of source %d named %s", u, i, c, named[i])
				}
				comps = append(comps, c)
				all = append(all, ids)
			}
		}
		return fmt.Sprintf("%x", h.Sum(nil)[:8]), comps, all
	}
	codeOf := func(comps []int) int {
		n := 0
		for _, c := range comps {
			n += c
		}
		return n
	}
	first := "0:web:0.5,code:0.5"
	st, v1, body := scheduleEditAt(t, p.url, "run", first, 0, "")
	if st != http.StatusCreated {
		t.Fatalf("PUT: %d %s", st, body)
	}
	job := "job=run&schedule=latest"
	var head []string
	for s := range 4 {
		sum, comps, _ := step(job, 0, s, 2)
		if n := codeOf(comps); n != 4 {
			t.Fatalf("step %d holds %d sequences of code of 8, want 4", s, n)
		}
		head = append(head, sum)
	}
	if st, _, body := scheduleEditAt(t, p.url, "run", "3:web:1,code:3", 3, v1); st != http.StatusConflict || !strings.Contains(body, "step 3") {
		t.Fatalf("an edit from step 3 after it was served: %d %s; want 409 naming step 3", st, body)
	}
	st, v2, body := scheduleEditAt(t, p.url, "run", "4:web:1,code:3", 4, v1)
	if st != http.StatusOK {
		t.Fatalf("edit from step 4: %d %s", st, body)
	}
	for s := range 10 {
		sum, comps, _ := step(job, 0, s, 2)
		switch {
		case s < 4 && sum != head[s]:
			t.Fatalf("step %d changed under the first edit", s)
		case s >= 4 && codeOf(comps) != 6:
			t.Fatalf("step %d holds %d sequences of code of 8, want 6", s, codeOf(comps))
		}
		if s < 4 {
			continue
		}
		head = append(head, sum)
	}
	third := first + ";4:web:1,code:3;10~14:web:1,code:0"
	st, v3, body := scheduleEditAt(t, p.url, "run", "10~14:web:1,code:0", 10, v2)
	if st != http.StatusOK {
		t.Fatalf("edit from step 10: %d %s", st, body)
	}
	// Resumed at world 1 after step 9, pinned to the third version,
	// through epoch 1's first steps; against the final schedule's run.
	var info struct{ Batches int }
	resp, err := hc.Get(fmt.Sprintf("%s/epoch/0?%s&job=run&schedule=%s&batch_size=8", p.url, tok, v3))
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if err != nil || info.Batches < 15 {
		t.Fatalf("epoch 0 of the final version: %d steps, %v", info.Batches, err)
	}
	var edited, whole seqs
	for s := range 10 {
		_, _, q := step(job, 0, s, 2)
		edited = append(edited, q...)
	}
	pinned := "job=run&schedule=" + v3
	for g := 10; g < info.Batches+4; g++ {
		_, comps, q := step(pinned, g/info.Batches, g%info.Batches, 1)
		if g >= 14 && codeOf(comps) != 0 {
			t.Fatalf("step %d holds code after the ramp to web alone", g)
		}
		edited = append(edited, q...)
	}
	for g := range info.Batches + 4 {
		_, _, q := step("mix_schedule="+url.QueryEscape(third), g/info.Batches, g%info.Batches, 2)
		whole = append(whole, q...)
	}
	if !slices.EqualFunc(edited, whole, slices.Equal) {
		t.Fatalf("the edited, resumed run is not the final schedule's run (%d and %d sequences)", len(edited), len(whole))
	}
}
