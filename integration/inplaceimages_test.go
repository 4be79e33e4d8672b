package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/internal/gen/photos"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/internal/testsupport/pythontest"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// hubSchema is the Hugging Face Hub's layout of an image dataset (what
// `datasets` writes for an Image feature and a ClassLabel): a struct of
// the image's bytes and its path, and an int64 label.
var hubSchema = arrow.NewSchema([]arrow.Field{
	{Name: "image", Type: arrow.StructOf(
		arrow.Field{Name: "bytes", Type: arrow.BinaryTypes.Binary, Nullable: true},
		arrow.Field{Name: "path", Type: arrow.BinaryTypes.String, Nullable: true},
	), Nullable: true},
	{Name: "label", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

// hubImages is an image dataset in three forms: photo-like JPEGs in a
// class-folder tree (packed as tar), and the same images in the Hub's
// Parquet layout, shuffled into files, written by arrow-go and by DuckDB.
type hubImages struct {
	tree   photos.Tree
	dir    string   // the class-folder tree
	jpegs  [][]byte // photo i's bytes
	byHash map[[32]byte]int
	// Parquet files by key (data/train-0000K-of-0000N.parquet), and which
	// photo each file's rows hold, in order.
	arrow, duckdb         map[string][]byte
	arrowRows, duckdbRows map[string][]int
}

// makeHubImages makes n photos and writes them as a tree and as Parquet:
// arrow-go's in 3 files of row groups of 8 rows (dictionary-encoded and
// snappy, pyarrow's defaults, which the Hub's files have), DuckDB's in 4
// files (DuckDB cuts row groups at 2,048 rows: a row group each).
func makeHubImages(t *testing.T, n int, node string, nodeEnv []string) *hubImages {
	t.Helper()
	h := &hubImages{tree: photos.Tree{Samples: n, Classes: 4, MaxSide: 128, Seed: 41}, dir: filepath.Join(t.TempDir(), "tree"),
		byHash: map[[32]byte]int{}, arrow: map[string][]byte{}, duckdb: map[string][]byte{},
		arrowRows: map[string][]int{}, duckdbRows: map[string][]int{}}
	if err := h.tree.Write(context.Background(), h.dir); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		b, err := os.ReadFile(filepath.Join(h.dir, filepath.FromSlash(h.tree.Key(i))+".jpg"))
		if err != nil {
			t.Fatal(err)
		}
		h.jpegs = append(h.jpegs, b)
		h.byHash[sha256.Sum256(b)] = i
	}
	if len(h.byHash) != n {
		t.Fatalf("%d distinct photos of %d", len(h.byHash), n)
	}
	perm := rand.New(rand.NewPCG(5, 6)).Perm(n) // a Hub split is shuffled

	const arrowFiles, rowGroup = 3, 8
	for k := range arrowFiles {
		rows := perm[k*n/arrowFiles : (k+1)*n/arrowFiles]
		var recs []arrow.RecordBatch
		for lo := 0; lo < len(rows); lo += rowGroup {
			recs = append(recs, newRecord(hubSchema, func(b *array.RecordBuilder) {
				sb := b.Field(0).(*array.StructBuilder)
				bb := sb.FieldBuilder(0).(*array.BinaryBuilder)
				pb := sb.FieldBuilder(1).(*array.StringBuilder)
				lb := b.Field(1).(*array.Int64Builder)
				for _, i := range rows[lo:min(lo+rowGroup, len(rows))] {
					sb.Append(true)
					bb.Append(h.jpegs[i])
					pb.Append(h.name(i))
					lb.Append(int64(h.tree.Class(i)))
				}
			}))
		}
		key := fmt.Sprintf("data/train-%05d-of-%05d.parquet", k, arrowFiles)
		h.arrow[key] = writeParquet(t, hubSchema, pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Snappy)), recs...)
		h.arrowRows[key] = rows
	}

	const duckdbFiles = 4
	work := t.TempDir()
	pics := filepath.Join(work, "photos")
	if err := os.Mkdir(pics, 0o755); err != nil {
		t.Fatal(err)
	}
	var manifest strings.Builder
	manifest.WriteString("file,path,label,part,row\n")
	for k := range duckdbFiles {
		rows := perm[k*n/duckdbFiles : (k+1)*n/duckdbFiles]
		h.duckdbRows[fmt.Sprintf("data/train-%05d-of-%05d.parquet", k, duckdbFiles)] = rows
		for r, i := range rows {
			file := filepath.Join(pics, fmt.Sprintf("p%05d.jpg", i))
			if err := os.WriteFile(file, h.jpegs[i], 0o644); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&manifest, "%s,%s,%d,%d,%d\n", file, h.name(i), h.tree.Class(i), k, r)
		}
	}
	if err := os.WriteFile(filepath.Join(work, "manifest.csv"), []byte(manifest.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(work, "out")
	if err := os.MkdirAll(filepath.Join(out, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	runDuckDB(t, node, nodeEnv, "images", filepath.Join(work, "manifest.csv"), pics, out, strconv.Itoa(duckdbFiles), "2048")
	for key := range h.duckdbRows {
		b, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(key)))
		if err != nil {
			t.Fatal(err)
		}
		h.duckdb[key] = b
	}
	return h
}

// name is photo i's file name, its path in the Parquet image struct.
func (h *hubImages) name(i int) string { return filepath.Base(h.tree.Key(i)) + ".jpg" }

// photoOf is the photo a sample's image is, checked whole: its JPEG's
// bytes are one of the photos' and its label that photo's class.
func (h *hubImages) photoOf(t *testing.T, what string, s client.Sample) int {
	t.Helper()
	i, ok := h.byHash[sha256.Sum256(s.Files["jpg"])]
	if !ok {
		t.Fatalf("%s: sample %s's jpg (%d bytes) is none of the photos; members %v", what, s.Key, len(s.Files["jpg"]), exts(s))
	}
	if got, want := string(s.Files["cls"]), strconv.Itoa(h.tree.Class(i)); got != want || len(s.Files) != 2 {
		t.Fatalf("%s: sample %s (photo %d): cls %q, want %q; members %v", what, s.Key, i, got, want, exts(s))
	}
	return i
}

func exts(s client.Sample) []string {
	var out []string
	for e := range s.Files {
		out = append(out, e)
	}
	return out
}

// An image dataset in the Hugging Face Hub's layout (image {bytes, path}
// and an int64 label), written by arrow-go and by DuckDB into a bucket
// Brand may only read, is indexed in place into another bucket (`brand
// index --src … --dst …`) and served by `brand serve`, processes both,
// beside the same photos packed as tar (`brand pack`):
//
//   - every sample of an epoch is a photo, whole, with its label, once;
//   - with transform=imagenet-eval each sample's tensor is byte for byte
//     the tar sample's of the same photo, through the Go client and
//     through PyTorch's DataLoader over BrandDataset with columns= (a
//     label not selected is not served);
//   - a mixture of the Parquet and the tar dataset holds each within one
//     sample of its share in every global batch, every sample whole;
//   - no object of the source changed, and nothing was written to it.
func TestHubImagesInPlaceOnMinIO(t *testing.T) {
	node, nodeEnv := duckDB(t)
	ctx := context.Background()
	srv := miniotest.ForTest(t)
	hub, own := srv.NewBucket(t), srv.NewBucket(t)
	proxy := newStoreProxy(t, srv.URL(), hub)
	bin := buildBrand(t)
	env := brandEnv(srv)

	const n = 96
	h := makeHubImages(t, n, node, nodeEnv)
	src, err := s3backend.Open(ctx, "s3://"+hub, srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		name  string
		files map[string][]byte
	}{{"arrow", h.arrow}, {"duckdb", h.duckdb}} {
		files := map[string][]byte{}
		for k, b := range w.files {
			files[w.name+"/"+k] = b
		}
		putObjects(t, src, files)
	}
	before := listing(t, src)

	runBrand(t, bin, env, "pack", "--src", h.dir, "--dst", "s3://"+own+"/tar", "--chunk-size", "96KiB", "--s3-endpoint", proxy.URL)
	for _, w := range []string{"arrow", "duckdb"} {
		out := runBrand(t, bin, env, "index", "--src", "s3://"+hub+"/"+w, "--dst", "s3://"+own+"/"+w, "--s3-endpoint", proxy.URL)
		if !strings.Contains(out, fmt.Sprintf("indexed %d samples", n)) || !strings.Contains(out, "of parquet") {
			t.Fatalf("brand index of %s: %s", w, out)
		}
	}
	gw := serveProc(t, bin, env, proxy.URL, "--cache-size", "128MiB",
		"--dataset", "tar=s3://"+own+"/tar", "--dataset", "arrow=s3://"+own+"/arrow", "--dataset", "duckdb=s3://"+own+"/duckdb")

	job := func(dataset string, columns ...string) api.Job {
		return api.Job{Dataset: dataset, Columns: columns, Params: shuffle.Params{Seed: 7, BatchSize: 16, World: 2}}
	}
	// Which photo each sample of a Parquet dataset is, by key.
	photoKeys := map[string]map[string]int{}
	t.Run("samples", func(t *testing.T) {
		for _, ds := range []string{"arrow", "duckdb"} {
			keys := map[string]int{}
			seen := make([]int, n)
			readEpochOf(t, gw.url, job(ds), 0, func(_ int, _ *client.Batch, s client.Sample) {
				i := h.photoOf(t, ds, s)
				seen[i]++
				keys[s.Key] = i
			})
			for i, c := range seen {
				if c != 1 {
					t.Fatalf("%s: photo %d served %d times in an epoch", ds, i, c)
				}
			}
			// Each row is keyed by its file and row: the photo the writer
			// put there.
			rows := h.arrowRows
			if ds == "duckdb" {
				rows = h.duckdbRows
			}
			for file, ids := range rows {
				for r, i := range ids {
					key := fmt.Sprintf("%s/%02d", strings.TrimSuffix(file, ".parquet"), r)
					if got, ok := keys[key]; !ok || got != i {
						t.Fatalf("%s: %s is photo %d (%v), the writer put photo %d there", ds, key, got, ok, i)
					}
				}
			}
			photoKeys[ds] = keys
		}
	})
	if t.Failed() {
		return
	}

	t.Run("imagenet-eval", func(t *testing.T) {
		tar := map[int][]byte{}
		tr := job("tar")
		tr.Transform = "imagenet-eval"
		readEpochOf(t, gw.url, tr, 0, func(_ int, _ *client.Batch, s client.Sample) {
			var i int
			if _, err := fmt.Sscanf(s.Key[strings.IndexByte(s.Key, '/')+1:], "img_%d", &i); err != nil || s.Key != h.tree.Key(i) {
				t.Fatalf("tar sample %s", s.Key)
			}
			tn, err := client.ParseNPY(s.Files["npy"])
			if err != nil || tn.DType != "|u1" || fmt.Sprint(tn.Shape) != "[3 224 224]" {
				t.Fatalf("tar sample %s: %v %v %v", s.Key, tn.DType, tn.Shape, err)
			}
			tar[i] = bytes.Clone(s.Files["npy"])
		})
		if len(tar) != n {
			t.Fatalf("%d tensors of the tar dataset", len(tar))
		}
		for _, ds := range []string{"arrow", "duckdb"} {
			j := job(ds, "image", "label")
			j.Transform = "imagenet-eval"
			got := 0
			readEpochOf(t, gw.url, j, 0, func(_ int, _ *client.Batch, s client.Sample) {
				i, ok := photoKeys[ds][s.Key]
				if !ok {
					t.Fatalf("%s: unknown sample %s", ds, s.Key)
				}
				if !bytes.Equal(s.Files["npy"], tar[i]) {
					t.Fatalf("%s: %s's tensor differs from the tar sample's of photo %d", ds, s.Key, i)
				}
				if string(s.Files["cls"]) != strconv.Itoa(h.tree.Class(i)) || len(s.Files) != 2 {
					t.Fatalf("%s: %s: members %v, cls %q", ds, s.Key, exts(s), s.Files["cls"])
				}
				got++
			})
			if got != n {
				t.Fatalf("%s: %d tensors", ds, got)
			}
		}
	})

	t.Run("pytorch", func(t *testing.T) {
		py := pythontest.Need(t, "scripts/test-python.sh", "torch", "numpy")
		pairs := map[string]any{"tar": "tar"}
		sets := map[string]map[string]string{}
		for ds, keys := range photoKeys {
			sets[ds] = map[string]string{}
			for k, i := range keys {
				sets[ds][k] = h.tree.Key(i)
			}
		}
		pairs["datasets"] = sets
		b, _ := json.Marshal(pairs)
		file := filepath.Join(t.TempDir(), "pairs.json")
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		repo, _ := filepath.Abs("..")
		cmd := exec.Command(py, filepath.Join("testdata", "inplace_torch.py"), gw.url, file)
		cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(repo, "python"))
		out, err := runBounded(cmd, 3*time.Minute)
		if err != nil {
			t.Fatalf("inplace_torch.py: %v\n%s", err, out)
		}
		var figures map[string]int
		if err := json.Unmarshal(lastLine(out), &figures); err != nil || figures["tar"] != n || figures["arrow"] != n || figures["duckdb"] != n {
			t.Fatalf("inplace_torch.py: %v\n%s", err, out)
		}
		t.Logf("PyTorch DataLoader over BrandDataset: %d tensors of each Parquet dataset (columns=image,label; and columns=image, without labels) equal the tar's", n)
	})

	t.Run("mixture", func(t *testing.T) {
		mix, err := api.ParseMix("arrow:0.5,tar:0.5")
		if err != nil {
			t.Fatal(err)
		}
		const batch, world = 16, 2
		perBatch := map[int][2]int{}
		seen := map[string]map[int]int{"arrow": {}, "tar": {}}
		readEpochOf(t, gw.url, api.Job{Mix: mix, Params: shuffle.Params{Seed: 3, BatchSize: batch, World: world}}, 0,
			func(_ int, b *client.Batch, s client.Sample) {
				i := h.photoOf(t, "mixture "+s.Dataset, s)
				c := perBatch[b.Index]
				switch s.Dataset {
				case "arrow":
					if photoKeys["arrow"][s.Key] != i {
						t.Fatalf("mixture: arrow sample %s is photo %d", s.Key, i)
					}
					c[0]++
				case "tar":
					if s.Key != h.tree.Key(i) {
						t.Fatalf("mixture: tar sample %s is photo %d", s.Key, i)
					}
					c[1]++
				default:
					t.Fatalf("mixture: sample %s of dataset %q", s.Key, s.Dataset)
				}
				perBatch[b.Index] = c
				seen[s.Dataset][i]++
			})
		for b, c := range perBatch {
			if c[0] != batch*world/2 || c[1] != batch*world/2 {
				t.Errorf("global batch %d holds %d Parquet and %d tar samples; want %d each", b, c[0], c[1], batch*world/2)
			}
		}
		for ds, s := range seen {
			for i := range n {
				if s[i] != 1 {
					t.Fatalf("mixture: %s's photo %d drawn %d times in an epoch of one pass", ds, i, s[i])
				}
			}
		}
	})

	// The source: nothing written (the proxy refuses writes to it), nothing
	// changed.
	if w := proxy.writesRefused(); len(w) > 0 {
		t.Errorf("Brand tried to write to the source: %v", w)
	}
	sameListing(t, "the source bucket", before, listing(t, src))
}
