package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/mds"
	"github.com/brandgw/brand/internal/testsupport/pythontest"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// mdsDataset has format/mds's independent writer (testdata/mds_writer.py)
// make its "images" case — shards of a caption, an embedding, a JPEG image and a
// label per sample — in a directory of its own, and returns it.
func mdsDataset(t *testing.T) string {
	t.Helper()
	py := pythontest.Need(t, "scripts/ensure-numpy.sh", "numpy", "zstd")
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, py, "../../format/mds/testdata/mds_writer.py", "make", "images", dir).CombinedOutput(); err != nil {
		t.Fatalf("mds_writer.py make images: %v\n%s", err, out)
	}
	return dir
}

// `brand plan` of an MDS dataset served in place plans it as a gateway
// reads it: its shards decoded in the cache (their resident bounds with
// the fields read) and read whole from the store, whichever fields; with
// --columns, the view of those fields, whose chunks are smaller in the
// cache and the same in the store. The index may be written elsewhere
// than the data (--dst): the format's description is beside it. The text
// report names both sizes.
func TestPlanInPlace(t *testing.T) {
	data := mdsDataset(t)
	idx := t.TempDir()
	if code, _, stderr := brand(t, "index", "--src", data, "--dst", idx); code != 0 {
		t.Fatalf("brand index: exit %d: %s", code, stderr)
	}
	ctx := context.Background()
	store, err := s3backend.NewLocal(idx)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := stored.ReadIndex(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	meta, err := stored.ReadFormat(ctx, store, ix)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := mds.Format{}.Open(meta)
	if err != nil {
		t.Fatal(err)
	}
	label, err := format.Select(dec.Fields(), []string{"label"})
	if err != nil {
		t.Fatal(err)
	}
	all, some := planner.DatasetInPlace(ix, dec, nil), planner.DatasetInPlace(ix, dec, label)
	var resident, labels, stored int64
	for c := range all.ChunkSizes {
		resident += all.ChunkSizes[c]
		labels += some.ChunkSizes[c]
		stored += all.StoreSizes[c]
		if some.StoreSizes[c] != all.StoreSizes[c] {
			t.Errorf("chunk %d: %d bytes read with every field, %d with the label: an MDS shard is read whole", c, all.StoreSizes[c], some.StoreSizes[c])
		}
	}
	if ix.NumChunks() < 3 || labels >= resident/2 || stored == resident {
		t.Fatalf("the fixture: %d chunks, %d bytes resident, %d with the label alone, %d stored", ix.NumChunks(), resident, labels, stored)
	}
	job := planner.Job{Params: shuffle.Params{Seed: 3, Window: 2, BatchSize: 4, World: 1}, Epochs: 3}
	cache := resident / 2
	args := []string{"plan", "--src", idx, "--cache-size", itoa(cache), "--seed", "3", "--window", "2", "--batch-size", "4"}
	encode := func(v interface{ WriteText(io.Writer) error }, asJSON bool) string {
		t.Helper()
		var b bytes.Buffer
		if asJSON {
			enc := json.NewEncoder(&b)
			enc.SetIndent("", "  ")
			if err := enc.Encode(v); err != nil {
				t.Fatal(err)
			}
		} else if err := v.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	for _, tt := range []struct {
		name string
		args []string
		d    planner.Dataset
	}{
		{"every field", nil, all},
		{"the label", []string{"--columns", "label"}, some},
		{"every field named", []string{"--columns", "label,image,caption,emb"}, all},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want, err := planner.MakePlan(ctx, planner.PlanInput{Dataset: tt.d, Job: job, CacheBytes: cache,
				BackendBytesPerSec: 1 << 30, PrefetchWindows: 1})
			if err != nil {
				t.Fatal(err)
			}
			if want.DatasetStoreBytes != stored || want.Optimal.Epochs[0].BackendBytes != stored {
				t.Fatalf("the plan's dataset: %d bytes in the store, %d read in the first epoch; want %d", want.DatasetStoreBytes, want.Optimal.Epochs[0].BackendBytes, stored)
			}
			wantCl, err := planner.MakeClusterPlan(ctx, planner.ClusterInput{Dataset: tt.d, Job: job, IndexKey: cluster.IndexKey(ix.ID()), Nodes: 2, NodeCacheBytes: cache / 2})
			if err != nil {
				t.Fatal(err)
			}
			for _, run := range []struct {
				name string
				args []string
				want string
			}{
				{"json", append(append(args, tt.args...), "--json"), encode(want, true)},
				{"text", append(args, tt.args...), encode(want, false)},
				{"nodes", append(append(args, tt.args...), "--nodes", "2", "--world", "1", "--cache-size", itoa(cache/2), "--json"), encode(wantCl, true)},
			} {
				code, stdout, stderr := brand(t, run.args...)
				if code != 0 {
					t.Fatalf("%s: exit %d: %s", run.name, code, stderr)
				}
				if stdout != run.want {
					t.Errorf("%s: printed\n%s\nwant\n%s", run.name, stdout, run.want)
				}
			}
		})
	}
	_, text, _ := brand(t, append(args, "--columns", "label")...)
	if first, _, _ := strings.Cut(text, "\n"); !strings.Contains(first, " resident, ") || !strings.Contains(first, " in the store") {
		t.Errorf("the report's dataset line does not name its resident and store bytes: %s", first)
	}

	for _, tt := range []struct {
		args []string
		says string
	}{
		{[]string{"--columns", "nope"}, `no field "nope"`},
		{[]string{"--columns", "label,,id"}, "--columns"},
		{[]string{"--columns", "label,label"}, "named twice"},
	} {
		if code, _, stderr := brand(t, append(args, tt.args...)...); code == 0 || !strings.Contains(stderr, tt.says) {
			t.Errorf("%v: exit %d, %s; want a failure saying %q", tt.args, code, stderr, tt.says)
		}
	}
}

// --columns names fields of a dataset served in place: a tar dataset,
// whose samples are served whole, has none.
func TestPlanColumnsOfTar(t *testing.T) {
	dir, _, _ := planDataset(t)
	code, _, stderr := brand(t, "plan", "--src", dir, "--columns", "jpg")
	if code == 0 || !strings.Contains(stderr, "tar chunks") {
		t.Errorf("exit %d, %s; want a failure naming tar chunks", code, stderr)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
