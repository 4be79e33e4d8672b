package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"

	"github.com/brandgw/brand/internal/gen/photos"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/internal/testsupport/pythontest"
	"github.com/brandgw/brand/s3backend"
)

// docBlocks returns the shell and the Python block that follow a line
// starting with heading in a Markdown file.
func docBlocks(t *testing.T, file, heading string) (sh, py string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n"+heading)
	if i < 0 {
		t.Fatalf("%s has no %q", file, heading)
	}
	m := regexp.MustCompile("(?s)```sh\n(.*?)```.*?```python\n(.*?)```").FindStringSubmatch(s[i:])
	if m == nil {
		t.Fatalf("%s: no sh and python blocks after %q", file, heading)
	}
	return m[1], m[2]
}

// The README's "Train on a Hugging Face dataset without converting it",
// run as written (and docs/format.md's copy of it, which must say the
// same): a mirror of a Hub dataset in MinIO — train and validation
// files, a README — is indexed with the README's `brand index` and
// served with its `brand serve`, both given only the store's endpoint
// besides (and serve a port); its PyTorch loop then reads two epochs, each
// holding every training row once, its image a 3×224×224 tensor, its
// label the row's.
func TestReadmeHuggingFace(t *testing.T) {
	const heading = "Train on a Hugging Face dataset without converting it"
	sh, snippet := docBlocks(t, "../README.md", "## "+heading)
	if fsh, fpy := docBlocks(t, "../docs/format.md", "**"+heading+".**"); fsh != sh || fpy != snippet {
		t.Fatalf("docs/format.md's commands differ from the README's:\n%s%s\nREADME:\n%s%s", fsh, fpy, sh, snippet)
	}
	py := pythontest.Need(t, "scripts/test-python.sh", "torch", "numpy")
	ctx := context.Background()
	srv := miniotest.ForTest(t)
	for _, b := range []string{"mirror", "brand"} {
		if err := srv.MakeBucket(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	proxy := newStoreProxy(t, srv.URL(), "mirror")
	bin := buildBrand(t)
	env := brandEnv(srv)

	// The mirror: food101's layout, small photos.
	mirror, err := s3backend.Open(ctx, "s3://mirror/food101", srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	tree := photos.Tree{Samples: 170, Classes: 5, MaxSide: 96, Seed: 8}
	label := map[string]int{} // training rows' labels by key
	file := func(split string, k, n int, ids []int) {
		rec := newRecord(hubSchema, func(b *array.RecordBuilder) {
			sb := b.Field(0).(*array.StructBuilder)
			for r, i := range ids {
				p, err := tree.Photo(i)
				if err != nil {
					t.Fatal(err)
				}
				sb.Append(true)
				sb.FieldBuilder(0).(*array.BinaryBuilder).Append(p.JPEG)
				sb.FieldBuilder(1).(*array.StringBuilder).Append(p.Name)
				b.Field(1).(*array.Int64Builder).Append(int64(tree.Class(i)))
				if split == "train" {
					label[fmt.Sprintf("data/train-%05d-of-%05d/%02d", k, n, r)] = tree.Class(i)
				}
			}
		})
		name := fmt.Sprintf("data/%s-%05d-of-%05d.parquet", split, k, n)
		putBytes(t, mirror, name, writeParquet(t, hubSchema, pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Snappy)), []arrow.RecordBatch{rec}...))
	}
	for k := range 3 {
		ids := make([]int, 50)
		for r := range ids {
			ids[r] = k*50 + r
		}
		file("train", k, 3, ids)
	}
	file("validation", 0, 1, []int{150, 151, 152, 153, 154, 155, 156, 157, 158, 159})
	putBytes(t, mirror, "README.md", []byte("---\nlicense: unknown\n---\n# food101, as the Hub holds it\n"))
	putBytes(t, mirror, ".gitattributes", []byte("*.parquet filter=lfs diff=lfs merge=lfs -text\n"))
	before := listing(t, mirror)

	var gw *clusterProc
	for _, line := range strings.Split(sh, "\n") {
		if !strings.HasPrefix(line, "brand ") {
			continue
		}
		args := strings.Fields(line)[1:]
		switch args[0] {
		case "index":
			out := runBrand(t, bin, env, append(args, "--s3-endpoint", proxy.URL)...)
			t.Logf("%s\n→ %s", line, strings.TrimSpace(out))
		case "serve":
			gw = serveProc(t, bin, env, proxy.URL, args[1:]...)
			t.Logf("%s\n→ serving at %s", line, gw.url)
		default:
			t.Fatalf("the README runs brand %s, which this test does not know how to run", args[0])
		}
	}
	if gw == nil {
		t.Fatalf("the README's commands start no gateway:\n%s", sh)
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "snippet.py"), []byte(snippet), 0o644); err != nil {
		t.Fatal(err)
	}
	repo, _ := filepath.Abs("..")
	cmd := exec.Command(py, filepath.Join("testdata", "readme_torch.py"), filepath.Join(dir, "snippet.py"), gw.url)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(repo, "python"))
	out, err := runBounded(cmd, 3*time.Minute)
	if err != nil {
		t.Fatalf("the README's PyTorch loop: %v\n%s", err, out)
	}
	var got struct {
		Epochs map[string]map[string][]string
		Shapes []string
	}
	if err := json.Unmarshal(lastLine(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(got.Epochs) != 2 || strings.Join(got.Shapes, ";") != "torch.uint8 (3, 224, 224)" {
		t.Fatalf("the loop read epochs %d, tensors %v", len(got.Epochs), got.Shapes)
	}
	for e, keys := range got.Epochs {
		if len(keys) != len(label) {
			t.Errorf("epoch %s: %d samples, the training split has %d", e, len(keys), len(label))
		}
		for k, ls := range keys {
			want, ok := label[k]
			if !ok || len(ls) != 1 || ls[0] != strconv.Itoa(want) {
				t.Fatalf("epoch %s: sample %s with labels %v (a training row: %v, label %d)", e, k, ls, ok, want)
			}
		}
	}
	if w := proxy.writesRefused(); len(w) > 0 {
		t.Errorf("Brand tried to write to the mirror: %v", w)
	}
	sameListing(t, "the mirror", before, listing(t, mirror))
}
