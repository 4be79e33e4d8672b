package integration

import (
	"archive/tar"
	"bytes"
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/internal/testsupport/pythontest"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// mdsWriter is format/mds's independent MDS writer (numpy only, after
// Mosaic Streaming's own), which also checks a tar of members against
// what it wrote.
const mdsWriter = "../format/mds/testdata/mds_writer.py"

// An exact resume at another world size on MDS datasets served in place
// (format/mds's writer's "all" case, raw shards of every encoding, and
// its "zstd" case, compressed): 4 ranks read 3 batches each of an epoch
// and stop; the job resumes at 3 ranks from the offset the Go client
// computes (client.ResumeOffset, what the clients' state_dict keeps).
// The samples read before and after are the epoch exactly once, the same
// samples with the same bytes as an uninterrupted run's, and every member
// is what the writer wrote (its own check reads them as a tar).
func TestMDSResumeOnMinIO(t *testing.T) {
	py := pythontest.Need(t, "scripts/ensure-numpy.sh", "numpy", "zstd")
	ctx := context.Background()
	srv := miniotest.ForTest(t)
	hub, own := srv.NewBucket(t), srv.NewBucket(t)
	proxy := newStoreProxy(t, srv.URL(), hub)
	bin := buildBrand(t)
	env := brandEnv(srv)
	src, err := s3backend.Open(ctx, "s3://"+hub, srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]int{"all": 120, "zstd": 60} // samples
	var datasets []string
	for c := range cases {
		dir := filepath.Join(t.TempDir(), c)
		cmd := exec.Command(py, mdsWriter, "make", c, dir)
		if out, err := runBounded(cmd, 2*time.Minute); err != nil {
			t.Fatalf("mds_writer.py make %s: %v\n%s", c, err, out)
		}
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			b, err := os.ReadFile(p)
			if err == nil {
				putBytes(t, src, c+"/"+filepath.ToSlash(rel), b)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		runBrand(t, bin, env, "index", "--src", "s3://"+hub+"/"+c, "--dst", "s3://"+own+"/"+c, "--s3-endpoint", proxy.URL)
		datasets = append(datasets, "--dataset", c+"=s3://"+own+"/"+c)
	}
	gw := serveProc(t, bin, env, proxy.URL, append([]string{"--cache-size", "64MiB"}, datasets...)...)

	const epoch, batch, consumed = 2, 4, 3
	for c, n := range cases {
		t.Run(c, func(t *testing.T) {
			job := func(world, rank int) api.Job {
				return api.Job{Dataset: c, Params: shuffle.Params{Seed: 13, Window: 2, BatchSize: batch, World: world, Rank: rank}}
			}
			whole := map[string]map[string][]byte{}
			readEpochOf(t, gw.url, job(4, 0), epoch, func(_ int, _ *client.Batch, s client.Sample) {
				if whole[s.Key] != nil {
					t.Fatalf("the uninterrupted epoch served %s twice", s.Key)
				}
				whole[s.Key] = cloneFiles(s.Files)
			})
			if len(whole) != n {
				t.Fatalf("the uninterrupted epoch served %d samples of %d", len(whole), n)
			}

			got := map[string]map[string][]byte{}
			add := func(what string, s client.Sample) {
				if got[s.Key] != nil {
					t.Fatalf("%s: %s served again after the resume", what, s.Key)
				}
				got[s.Key] = cloneFiles(s.Files)
			}
			var plan *client.EpochInfo
			for r := range 4 {
				cl, err := client.New(gw.url, client.Options{Job: job(4, r)})
				if err != nil {
					t.Fatal(err)
				}
				if plan, err = cl.EpochInfo(ctx, epoch); err != nil {
					t.Fatal(err)
				}
				read := 0
				for b, err := range cl.Epoch(ctx, epoch) {
					if err != nil {
						t.Fatal(err)
					}
					for _, s := range b.Samples {
						add("world 4", s)
					}
					b.Release()
					if read++; read == consumed {
						break // preempted
					}
				}
			}
			offset := client.ResumeOffset(plan, consumed)
			if offset != consumed*batch*4 || len(got) != offset {
				t.Fatalf("offset %d after %d samples read; want %d", offset, len(got), consumed*batch*4)
			}
			for r := range 3 {
				cl, err := client.New(gw.url, client.Options{Job: job(3, r)})
				if err != nil {
					t.Fatal(err)
				}
				for b, err := range cl.EpochFrom(ctx, epoch, offset) {
					if err != nil {
						t.Fatal(err)
					}
					for _, s := range b.Samples {
						add("world 3", s)
					}
					b.Release()
				}
			}
			if len(got) != n {
				t.Fatalf("the epoch read at world 4 then resumed at world 3 served %d samples of %d", len(got), n)
			}
			for k, files := range whole {
				g, ok := got[k]
				if !ok || len(g) != len(files) {
					t.Fatalf("%s: %d members after the resume, %d uninterrupted", k, len(g), len(files))
				}
				for ext, b := range files {
					if !bytes.Equal(g[ext], b) {
						t.Fatalf("%s.%s differs between the resumed and the uninterrupted run", k, ext)
					}
				}
			}
			// Every member of the resumed epoch, checked by the writer.
			var tb bytes.Buffer
			tw := tar.NewWriter(&tb)
			for _, k := range slices.Sorted(maps.Keys(got)) {
				for _, ext := range slices.Sorted(maps.Keys(got[k])) {
					b := got[k][ext]
					if err := tw.WriteHeader(&tar.Header{Name: k + "." + ext, Mode: 0o644, Size: int64(len(b))}); err != nil {
						t.Fatal(err)
					}
					_, _ = tw.Write(b)
				}
			}
			if err := tw.Close(); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "epoch.tar")
			if err := os.WriteFile(file, tb.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := runBounded(exec.Command(py, mdsWriter, "check", c, file), 2*time.Minute)
			if err != nil || !strings.HasPrefix(string(out), "ok: ") {
				t.Fatalf("mds_writer.py check %s: %v\n%s", c, err, out)
			}
			t.Logf("%s: %d samples, %d read at world 4, the rest from offset %d at world 3; the writer's check: %s",
				c, n, offset, offset, strings.TrimSpace(string(out)))
		})
	}
	if w := proxy.writesRefused(); len(w) > 0 {
		t.Errorf("Brand tried to write to the source: %v", w)
	}
}

func cloneFiles(m map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = bytes.Clone(v)
	}
	return out
}
