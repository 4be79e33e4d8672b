package integration

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/tokenize"
)

// TestVisionParquetOnMinIO: the same image-text samples as WebDataset
// shards and as Parquet written by DuckDB (image BLOB, caption VARCHAR,
// conversations STRUCT("from" VARCHAR, "value" VARCHAR)[], zstd) in a
// MinIO bucket, each indexed by `brand index --tokenizer` (the Parquet
// in place, its index in another bucket), are one vision job's epoch
// under `brand serve`: every rank's batch at world 2 holds the same
// sequences, member for member (token IDs, loss mask, image spans, the
// images resized on the data node), from either dataset; and a cluster
// of three `brand serve` processes answers each of the Parquet job's
// batches, from any node, with the single gateway's bytes.
func TestVisionParquetOnMinIO(t *testing.T) {
	const tokenizer = "../tokenize/testdata/hf-golden-tokenizer.json"
	const parts, rows = 3, 8
	node, nodeEnv := duckDB(t)
	ctx := context.Background()
	srv := miniotest.ForTest(t)
	hub, own := srv.NewBucket(t), srv.NewBucket(t)
	bin := buildBrand(t)
	env := brandEnv(srv)
	src, err := s3backend.Open(ctx, "s3://"+hub, srv.Config())
	if err != nil {
		t.Fatal(err)
	}

	// The samples: one in two with a PNG, captions (the placeholder
	// inline or none) and LLaVA conversations.
	work := t.TempDir()
	if err := errors.Join(os.MkdirAll(filepath.Join(work, "images"), 0o755), os.MkdirAll(filepath.Join(work, "d"), 0o755)); err != nil {
		t.Fatal(err)
	}
	texts := []string{"A photo of a cat on a mat.", "Ein Hund läuft über die Wiese, 🐕!", "写真の中の山と川。", "Сравните два изображения."}
	var manifest bytes.Buffer
	for p := range parts {
		var shard bytes.Buffer
		tw := tar.NewWriter(&shard)
		put := func(name string, b []byte) {
			if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
				t.Fatal(err)
			}
			if _, err := tw.Write(b); err != nil {
				t.Fatal(err)
			}
		}
		for i := range rows {
			key := fmt.Sprintf("p%d/s%02d", p, i)
			line := map[string]any{"part": p, "row": i, "file": nil, "caption": nil, "conversations": nil}
			image := (p+i)%2 == 0
			if image {
				w, h := 28+17*i, 28+11*p+5*i
				im := imageOf(w, h, p*rows+i)
				file := filepath.Join(work, "images", fmt.Sprintf("%d-%02d.png", p, i))
				if err := os.WriteFile(file, im, 0o644); err != nil {
					t.Fatal(err)
				}
				line["file"] = file
				put(key+".png", im)
			}
			text := texts[(p+i)%len(texts)]
			if i%3 == 2 {
				q := "What is here? " + text
				if image {
					q = "<image>\n" + q
				}
				turns := []map[string]string{{"from": "human", "value": q}, {"from": "gpt", "value": texts[(p+2*i)%len(texts)]}}
				line["conversations"] = turns
				doc, _ := json.Marshal(map[string]any{"conversations": turns})
				put(key+".json", doc)
			} else {
				if image && i%2 == 0 {
					text = "<image> " + text
				}
				line["caption"] = text
				put(key+".txt", []byte(text))
			}
			b, _ := json.Marshal(line)
			manifest.Write(append(b, '\n'))
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		putBytes(t, src, fmt.Sprintf("tar/%03d.tar", p), shard.Bytes())
	}
	mf := filepath.Join(work, "manifest.jsonl")
	if err := os.WriteFile(mf, manifest.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	runDuckDB(t, node, nodeEnv, "vision", mf, work, strconv.Itoa(parts))
	for p := range parts {
		b, err := os.ReadFile(filepath.Join(work, "d", fmt.Sprintf("part-%d.parquet", p)))
		if err != nil {
			t.Fatal(err)
		}
		putBytes(t, src, fmt.Sprintf("pq/d/part-%d.parquet", p), b)
	}

	facts := fmt.Sprintf("wrote the image-text facts of %d samples (0 at fault", parts*rows)
	if out := runBrand(t, bin, env, "index", "--src", "s3://"+hub+"/tar", "--s3-endpoint", srv.URL(), "--tokenizer", tokenizer); !strings.Contains(out, facts) {
		t.Fatalf("brand index of the shards said %q; want %q", out, facts)
	}
	if out := runBrand(t, bin, env, "index", "--src", "s3://"+hub+"/pq", "--dst", "s3://"+own+"/pq", "--s3-endpoint", srv.URL(), "--tokenizer", tokenizer); !strings.Contains(out, facts) {
		t.Fatalf("brand index of the Parquet said %q; want %q", out, facts)
	}
	gw := serveProc(t, bin, env, srv.URL(), "--cache-size", "64MiB", "--dataset", "tar=s3://"+hub+"/tar", "--dataset", "pq=s3://"+own+"/pq")

	// The placeholder IDs follow the tokenizer's vocabulary.
	tb, err := os.ReadFile(tokenizer)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := tokenize.Load(tb)
	if err != nil {
		t.Fatal(err)
	}
	v := enc.VocabSize()
	q := url.Values{"seq": {"128"}, "batch_size": {"1"}, "world": {"2"}, "seed": {"3"}, "window": {"2"},
		"vision": {fmt.Sprintf("min:3136,max:25088,patch:14,merge:2,image:%d,start:%d,end:%d", v, v+1, v+2)}}
	getFrom := func(base, ds, path string, rank int) []byte {
		t.Helper()
		r := url.Values{"dataset": {ds}}
		for k, x := range q {
			r[k] = x
		}
		r.Set("rank", strconv.Itoa(rank))
		resp, err := http.Get(base + path + "?" + r.Encode())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %s %v %s", ds, path, resp.Status, err, body)
		}
		return body
	}
	get := func(ds, path string, rank int) []byte { return getFrom(gw.url, ds, path, rank) }
	var info struct{ Batches, Samples int }
	if err := json.Unmarshal(get("pq", "/epoch/0", 0), &info); err != nil || info.Batches < 3 {
		t.Fatalf("/epoch/0 of the Parquet: %+v %v; want 3 global batches or more", info, err)
	}
	sequences, images := 0, 0
	bodies := map[string][]byte{} // the Parquet's, by path and rank
	for m := range info.Batches {
		for rank := range 2 {
			path := fmt.Sprintf("/epoch/0/batch/%d", m)
			pq := get("pq", path, rank)
			bodies[fmt.Sprintf("%s/%d", path, rank)] = pq
			want, got := tarMembers(t, get("tar", path, rank)), tarMembers(t, pq)
			if len(got) != len(want) {
				t.Fatalf("batch %d rank %d: %d members from the Parquet, %d from the shards", m, rank, len(got), len(want))
			}
			for i, w := range want {
				if got[i].name != w.name || !bytes.Equal(got[i].data, w.data) {
					t.Fatalf("batch %d rank %d: member %d is %s from the Parquet, %s from the shards, or differs", m, rank, i, got[i].name, w.name)
				}
				switch {
				case strings.HasSuffix(w.name, ".input_ids.npy"):
					sequences++
				case strings.Contains(w.name, ".image."):
					images++
				}
			}
		}
	}
	if sequences != info.Samples || images < parts*rows/2 {
		t.Fatalf("%d sequences holding %d images; /epoch/0 says %d sequences, and the samples have %d images", sequences, images, info.Samples, parts*rows/2)
	}

	// Three `brand serve` processes as one cluster, each loading the
	// facts and fetching the chunks another owns from it: every node
	// answers every rank's batch with the single gateway's bytes.
	const nodes = 3
	ports := freePorts(t, nodes)
	urls := make([]string, nodes)
	for k, port := range ports {
		urls[k] = fmt.Sprintf("http://127.0.0.1:%d", port)
	}
	dir := t.TempDir()
	procs := make([]*clusterProc, nodes)
	for k := range nodes {
		procs[k] = &clusterProc{k: k, url: urls[k], logPath: filepath.Join(dir, fmt.Sprintf("node%d.log", k)),
			args: []string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", ports[k]), "--s3-endpoint", srv.URL(),
				"--dataset", "pq=s3://" + own + "/pq", "--cache-size", "64MiB", "--cache-prefault=false",
				"--peers", strings.Join(urls, ","), "--self", strconv.Itoa(k),
				"--log-format", "json", "--shutdown-timeout", "10s", "--index-poll", "0"}}
	}
	startProcs(t, procs, bin, env, "")
	for m := range info.Batches {
		for rank := range 2 {
			path := fmt.Sprintf("/epoch/0/batch/%d", m)
			for k, u := range urls {
				if !bytes.Equal(getFrom(u, "pq", path, rank), bodies[fmt.Sprintf("%s/%d", path, rank)]) {
					t.Fatalf("batch %d rank %d from node %d of the cluster differs from a single gateway's", m, rank, k)
				}
			}
		}
	}
}

// imageOf is a w×h PNG whose pixels depend on seed.
func imageOf(w, h, seed int) []byte {
	im := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			im.SetNRGBA(x, y, color.NRGBA{uint8(x*7 + seed), uint8(y*3 + 2*seed), uint8((x ^ y) + seed), 255})
		}
	}
	var b bytes.Buffer
	_ = png.Encode(&b, im)
	return b.Bytes()
}

// tarMember is a member of a batch's tar, in order.
type tarMember struct {
	name string
	data []byte
}

func tarMembers(t *testing.T, body []byte) []tarMember {
	t.Helper()
	var out []tarMember
	tr := tar.NewReader(bytes.NewReader(body))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("a batch that is not a tar: %v", err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tarMember{h.Name, b})
	}
}
