package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	pq "github.com/apache/arrow-go/v18/parquet"

	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/s3backend"
)

// appendParquet is a Parquet file of rows (text, label), 8 rows a row
// group: row i's text is "name/i", i as wide as its key has it.
func appendParquet(t *testing.T, name string, rows int) []byte {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{{Name: "text", Type: arrow.BinaryTypes.String}, {Name: "label", Type: arrow.PrimitiveTypes.Int64}}, nil)
	var recs []arrow.RecordBatch
	for g := 0; g < rows; g += 8 {
		recs = append(recs, newRecord(sc, func(b *array.RecordBuilder) {
			for i := g; i < min(g+8, rows); i++ {
				b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("%s/%0*d", name, len(strconv.Itoa(rows)), i))
				b.Field(1).(*array.Int64Builder).Append(int64(i % 5))
			}
		}))
	}
	return writeParquet(t, sc, pq.NewWriterProperties(), recs...)
}

// Files appended to a Parquet dataset on MinIO while a job reads it,
// through the processes a user runs: `brand index`, `brand serve`, a job
// reading 3 steps, two more files written, `brand index --append`, the
// gateway's reload, POST /jobs/run/append from step 4. Steps 3 and
// before are what they were (bytes and ETags); the epoch holding step 4
// serves every old and new row once, as does the next epoch; every
// answer names the index the job pinned; a gateway started afterwards
// serves the same batches.
func TestInPlaceAppend(t *testing.T) {
	ctx := context.Background()
	srv := miniotest.ForTest(t)
	bin, env := buildBrand(t), brandEnv(srv)
	hub, own := srv.NewBucket(t), srv.NewBucket(t)
	st, err := s3backend.Open(ctx, "s3://"+hub, srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	for f := range 2 {
		putBytes(t, st, fmt.Sprintf("data/train-%d.parquet", f), appendParquet(t, fmt.Sprintf("train-%d", f), 40))
	}
	dataset := "s3://" + own + "/d"
	index := func(args ...string) string {
		return runBrand(t, bin, env, append([]string{"index", "--src", "s3://" + hub, "--dst", dataset, "--s3-endpoint", srv.URL()}, args...)...)
	}
	index()
	gw := serveProc(t, bin, env, srv.URL(), "--cache-size", "64MiB", "--dataset", "d="+dataset, "--index-poll", "300ms")
	const shape = "batch_size=5&world=2&seed=11&window=2"
	resp, body := httpGet(t, gw.url+"/epoch/0/batch/0?"+shape)
	v := resp.Header.Get("Brand-Index")
	if resp.StatusCode != http.StatusOK || v == "" {
		t.Fatalf("first batch: %s %s", resp.Status, body)
	}
	type read struct {
		etag string
		body []byte
	}
	batch := func(base string, epoch, step, rank int, job string) read {
		t.Helper()
		resp, body := httpGet(t, fmt.Sprintf("%s/epoch/%d/batch/%d?%s&rank=%d&index=%s%s", base, epoch, step, shape, rank, v, job))
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Brand-Index") != v {
			t.Fatalf("epoch %d step %d rank %d: %s, index %s: %s", epoch, step, rank, resp.Status, resp.Header.Get("Brand-Index"), body)
		}
		return read{resp.Header.Get("ETag"), body}
	}
	rows := func(r read) []string {
		keys, samples := splitSamples(t, r.body)
		for _, k := range keys {
			if !bytes.Contains(samples[k], []byte(strings.TrimPrefix(k, "data/"))) {
				t.Fatalf("sample %s does not hold its row's text", k)
			}
		}
		return keys
	}
	var ref [8][2]read // the order before the append: 80 rows, 8 steps
	for m := range 8 {
		for r := range 2 {
			ref[m][r] = batch(gw.url, 0, m, r, "")
		}
	}
	seen := map[string]int{}
	for m := range 3 {
		for r := range 2 {
			for _, k := range rows(batch(gw.url, 0, m, r, "&job=run")) {
				seen[k]++
			}
		}
	}

	putBytes(t, st, "data/train-2.parquet", appendParquet(t, "train-2", 12))
	putBytes(t, st, "data/extra-0.parquet", appendParquet(t, "extra-0", 8))
	out := index("--append")
	m := regexp.MustCompile(`index ([0-9a-f]{16}) extends ` + v).FindStringSubmatch(out)
	if m == nil || !strings.HasPrefix(out, "appended 20 samples") {
		t.Fatalf("brand index --append printed\n%s", out)
	}
	x := m[1]
	if out := index("--append"); !strings.HasPrefix(out, "nothing new") {
		t.Fatalf("brand index --append again printed\n%s", out)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, body := httpGet(t, gw.url+"/datasets")
		if bytes.Contains(body, []byte(x)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway did not load index %s in 30 s: %s", x, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	req, err := http.NewRequest(http.MethodPost, gw.url+"/jobs/run/append?dataset=d&"+shape+"&index="+v,
		strings.NewReader(`{"from_step": 4, "index": "`+x+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var made struct {
		Version      string `json:"version"`
		FromPosition int    `json:"from_position"`
		NewSamples   int    `json:"new_samples"`
		Samples      int    `json:"samples"`
	}
	err = json.NewDecoder(resp.Body).Decode(&made)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated || made.FromPosition != 40 || made.NewSamples != 20 || made.Samples != 100 {
		t.Fatalf("POST /jobs/run/append: %s %+v %v", resp.Status, made, err)
	}
	var ep struct {
		Index   string `json:"index"`
		Samples int    `json:"samples"`
		Batches int    `json:"batches"`
	}
	resp, body = httpGet(t, gw.url+"/epoch/0?"+shape+"&job=run&index="+v)
	if err := json.Unmarshal(body, &ep); err != nil || ep.Index != v || ep.Samples != 100 || ep.Batches != 10 {
		t.Fatalf("/epoch/0: %s %s", resp.Status, body)
	}
	restarted := serveProc(t, bin, env, srv.URL(), "--cache-size", "64MiB", "--dataset", "d="+dataset)
	for m := 3; m < 10; m++ {
		for r := range 2 {
			got := batch(gw.url, 0, m, r, "&job=run")
			if m < 4 && (got.etag != ref[m][r].etag || !bytes.Equal(got.body, ref[m][r].body)) {
				t.Fatalf("step %d rank %d, before the append's step, changed", m, r)
			}
			if again := batch(restarted.url, 0, m, r, "&job=run"); again.etag != got.etag || !bytes.Equal(again.body, got.body) {
				t.Fatalf("step %d rank %d: a gateway started after the append serves other bytes", m, r)
			}
			for _, k := range rows(got) {
				seen[k]++
			}
		}
	}
	checkOnce := func(what string, seen map[string]int) {
		t.Helper()
		if len(seen) != 100 {
			t.Fatalf("%s: %d distinct rows, want 100", what, len(seen))
		}
		for k, n := range seen {
			if n != 1 {
				t.Fatalf("%s: %s read %d times", what, k, n)
			}
		}
		for _, k := range []string{"data/train-2/11", "data/extra-0/0", "data/train-0/00"} {
			if seen[k] != 1 {
				t.Fatalf("%s: %s not read", what, k)
			}
		}
	}
	checkOnce("the append's epoch", seen)
	seen = map[string]int{}
	for m := range 10 {
		for r := range 2 {
			for _, k := range rows(batch(gw.url, 1, m, r, "&job=run")) {
				seen[k]++
			}
		}
	}
	checkOnce("the next epoch", seen)
}
