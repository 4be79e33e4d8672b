package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/format/megatron"
	"github.com/brandgw/brand/format/megatron/megatrontest"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/s3backend"
)

// The datasets a round of TestModel serves, every node the same four:
// two of tar chunks (a job's own, and a mixture's second component), one
// served in place that files are appended to, and a token corpus; and a
// vision round's fifth, image-text samples of tar chunks indexed with
// their facts (withVision).
const (
	mTar   = "tar"
	mTar2  = "tar2"
	mLines = "lines"
	mTok   = "tok"
	mVis   = "vis"
)

// mWorld is a round's datasets: their stores, what each holds (every
// version of each, as the model reads it) and every sample's bytes.
type mWorld struct {
	stores   map[string]s3backend.Store
	versions map[string][]*mVersion // by dataset, oldest first
	content  map[string][]byte      // a sample's key → its defining member's bytes
	appended int                    // files appended to mLines so far
	vocab    int                    // mVis's tokenizer's vocabulary (0: no mVis)
}

// mVersion is one index version of a dataset as the model takes it: its
// chunks' sample counts, each sample's key and stored bytes (its index
// length, what balance=bytes weighs), and the reverse of the keys.
type mVersion struct {
	id     string
	counts []int
	keys   []string
	length []int64
	ids    map[string]int
}

// newMWorld makes a round's datasets, their sizes drawn from r: tar
// chunks of 1 to 14 samples (6 to 10 chunks; tar2 4 to 6), files of
// lines indexed in chunks of about 200 bytes, and a token corpus of 60
// to 90 documents.
func newMWorld(t *testing.T, r *rand.Rand) *mWorld {
	t.Helper()
	w := &mWorld{stores: map[string]s3backend.Store{}, versions: map[string][]*mVersion{}, content: map[string][]byte{}}
	for _, d := range []struct{ name, prefix string }{{mTar, ""}, {mTar2, "b/"}} {
		name, prefix := d.name, d.prefix
		counts := make([]int, 6+r.IntN(5))
		if name == mTar2 {
			counts = counts[:4+r.IntN(3)]
		}
		for c := range counts {
			counts[c] = 1 + r.IntN(14)
		}
		f := newFixtureCounts(t, t.TempDir(), prefix, counts, 0)
		w.stores[name] = f.store
		for k, files := range f.content {
			w.content[k] = files["jpg"]
		}
	}
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]string{}
	for f := range 2 + r.IntN(2) {
		for l := range 12 + r.IntN(14) {
			line := fmt.Sprintf("file %d line %d %s", f, l, strings.Repeat("x", r.IntN(40)))
			name := fmt.Sprintf("data/f%d.lines", f)
			files[name] = append(files[name], line)
			w.content[fmt.Sprintf("data/f%d/%d", f, l)] = []byte(line)
		}
	}
	for k, b := range formattest.Write(files) {
		if _, err := st.Put(context.Background(), k, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dataset.IndexInPlace(context.Background(), st, st, dataset.InPlaceOptions{
		Formats: []format.Format{formattest.Lines{}}, Options: format.Options{ChunkBytes: 200}}); err != nil {
		t.Fatal(err)
	}
	w.stores[mLines] = st
	corpus := [][][]int64{megatrontest.LogNormal(60+r.IntN(31), 60, 1.0, 50000, r.Uint64())}
	w.stores[mTok] = tokenStore(t, "uint16", corpus, 1<<10)
	for _, name := range []string{mTar, mTar2, mLines, mTok} {
		w.versions[name] = []*mVersion{readMVersion(t, w.stores[name])}
	}
	return w
}

// withVision adds mVis to w: 3 to 5 shards of 8 to 16 image-text
// samples (visionCorpus; a sample is at most 160 tokens under
// mVisRule), indexed with their facts.
func (w *mWorld) withVision(t *testing.T, r *rand.Rand) {
	t.Helper()
	ctx := context.Background()
	tok, enc, st := visionStore(t)
	visionCorpus(t, st, 3+r.IntN(3), 8+r.IntN(9))
	res, err := dataset.IndexShards(ctx, st, dataset.IndexOptions{Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dataset.WriteVisionFacts(ctx, st, res.Index, tok, 0, 2); err != nil {
		t.Fatal(err)
	}
	w.stores[mVis], w.vocab = st, enc.VocabSize()
	w.versions[mVis] = []*mVersion{readMVersion(t, st)}
}

// readMVersion reads the index a store holds now.
func readMVersion(t *testing.T, st s3backend.Store) *mVersion {
	t.Helper()
	ctx := context.Background()
	info, err := st.Stat(ctx, chunkindex.IndexKey)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, info.Size)
	if err := st.ReadRange(ctx, chunkindex.IndexKey, info.ETag, 0, b); err != nil {
		t.Fatal(err)
	}
	ix, err := chunkindex.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	v := &mVersion{id: ix.ID(), counts: ix.SampleCounts(), ids: map[string]int{}}
	for id := range ix.NumSamples() {
		_, _, n, _ := ix.SampleRange(id)
		v.keys = append(v.keys, ix.SampleKey(id))
		v.length = append(v.length, n)
		v.ids[ix.SampleKey(id)] = id
	}
	return v
}

// newest is dataset's newest version.
func (w *mWorld) newest(ds string) *mVersion { vs := w.versions[ds]; return vs[len(vs)-1] }

// first is dataset's first version.
func (w *mWorld) first(ds string) *mVersion { return w.versions[ds][0] }

// grow appends a file of 20 lines to mLines (brand index --append) and
// has every gateway of gws load the new version, which it returns.
func (w *mWorld) grow(t *testing.T, gws []*gateway.Gateway) *mVersion {
	t.Helper()
	w.appended++
	name := fmt.Sprintf("g%d", w.appended)
	appendFile(t, w.stores[mLines], name)
	for l := range 20 {
		w.content[fmt.Sprintf("data/%s/%d", name, l)] = fmt.Appendf(nil, "%s line %d", name, l)
	}
	for _, g := range gws {
		if _, err := g.Reload(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	v := readMVersion(t, w.stores[mLines])
	w.versions[mLines] = append(w.versions[mLines], v)
	return v
}

// specs are the datasets as a gateway serves them.
func (w *mWorld) specs() []gateway.DatasetSpec {
	specs := []gateway.DatasetSpec{
		{Name: mTar, URL: "file:///tar", Store: w.stores[mTar]},
		{Name: mTar2, URL: "file:///tar2", Store: w.stores[mTar2]},
		{Name: mLines, URL: "file:///lines", Store: w.stores[mLines], Formats: []format.Format{formattest.Lines{}}},
		{Name: mTok, URL: "file:///tok", Store: w.stores[mTok], Formats: []format.Format{megatron.Format{}}},
	}
	if st, ok := w.stores[mVis]; ok {
		specs = append(specs, gateway.DatasetSpec{Name: mVis, URL: "file:///vis", Store: st})
	}
	for _, name := range []string{mImg, mImg2} {
		if st, ok := w.stores[name]; ok {
			specs = append(specs, gateway.DatasetSpec{Name: name, URL: "file:///" + name, Store: st})
		}
	}
	return specs
}

// mNodes are the gateways a round's job is served by: one, or a cluster
// of three.
type mNodes struct {
	urls []string
	gws  []*gateway.Gateway
}

// startMNodes starts n gateways serving w's datasets (a cluster if n > 1).
func startMNodes(t *testing.T, w *mWorld, n int) *mNodes {
	t.Helper()
	datasets := func(c *gateway.Config) { c.Datasets = w.specs() }
	if n == 1 {
		g, srv := start(t, nil, datasets)
		return &mNodes{urls: []string{srv.URL}, gws: []*gateway.Gateway{g}}
	}
	ns := &mNodes{}
	for _, node := range startCluster(t, &fixture{store: w.stores[mTar].(*s3backend.Local)}, n, nil, datasets) {
		ns.urls = append(ns.urls, node.srv.URL)
		ns.gws = append(ns.gws, node.g)
	}
	return ns
}
