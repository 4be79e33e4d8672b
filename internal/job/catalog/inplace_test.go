package catalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/s3backend"
)

// inPlaceDataset is a dataset of .lines files served in place, opened as
// openInPlace opens one, with its decoder.
func inPlaceDataset(t *testing.T) (*Dataset, format.Decoder) {
	t.Helper()
	ctx := context.Background()
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string][]string{}
	for l := range 30 {
		lines["f.lines"] = append(lines["f.lines"], fmt.Sprintf("line %d %s", l, bytes.Repeat([]byte("y"), l%7)))
	}
	for k, b := range formattest.Write(lines) {
		if _, err := st.Put(ctx, k, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	res, err := dataset.IndexInPlace(ctx, st, st, dataset.InPlaceOptions{Formats: []format.Format{formattest.Lines{}}, Options: format.Options{ChunkBytes: 100}})
	if err != nil {
		t.Fatal(err)
	}
	ip, err := openInPlace(ctx, opening{formats: []format.Format{formattest.Lines{}}}, st, res.Index)
	if err != nil {
		t.Fatal(err)
	}
	d := NewDataset("lines", "file:///lines", st, res.Index)
	d.InPlace = ip
	return d, ip.Decoder
}

// A chunk's store size is what its load reads — a tar chunk whole, a
// chunk served in place its store extent with the fields read — and its
// chunk size what the cache holds: the same for tar, the resident bound
// for a chunk served in place, smaller for a view of some fields.
func TestStoreSize(t *testing.T) {
	tar := packed(t, 1536, 4096)
	for c := range 2 {
		if tar.StoreSize(c) != tar.ChunkSize(c) {
			t.Errorf("tar chunk %d: store size %d, chunk size %d", c, tar.StoreSize(c), tar.ChunkSize(c))
		}
	}
	d, dec := inPlaceDataset(t)
	view, err := d.Select([]string{"len"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Index.NumChunks() < 3 {
		t.Fatalf("%d chunks", d.Index.NumChunks())
	}
	for c := range d.Index.NumChunks() {
		for _, ds := range []*Dataset{d, view} {
			ranges, resident := dec.Extent(c, ds.Selection())
			if got := ds.StoreSize(c); got != format.Concat(ranges) || got == 0 || got >= resident {
				t.Errorf("chunk %d read with %q: store size %d, want %d (its extent), below its resident %d", c, ds.Selected(), got, format.Concat(ranges), resident)
			}
			if ds.ChunkSize(c) != resident {
				t.Errorf("chunk %d read with %q: chunk size %d, want its resident bound %d", c, ds.Selected(), ds.ChunkSize(c), resident)
			}
		}
		if view.ChunkSize(c) >= d.ChunkSize(c) {
			t.Errorf("chunk %d: %d bytes cached with len alone, %d with every field", c, view.ChunkSize(c), d.ChunkSize(c))
		}
	}
}

// recording is memory that records what a loader takes of it.
type recording struct {
	gets, puts int
	reserved   []int64
	held       int64
	refuse     error
}

func (r *recording) Get(n int64) []byte { r.gets++; return make([]byte, 0, n) }
func (r *recording) Put([]byte)         { r.puts++ }
func (r *recording) Reserve(_ context.Context, n int64) (func(), error) {
	if r.refuse != nil {
		return nil, r.refuse
	}
	r.reserved = append(r.reserved, n)
	r.held += n
	return func() { r.held -= n }, nil
}

// TestLoaderMemory: a chunk served in place is read into a buffer of the
// node's pools, given back once decoded, within what reading and
// decoding it takes, reserved from the node's memory for decodes before
// it is read; with no room there, the load fails with the memory's
// refusal, and nothing is read or called damaged.
func TestLoaderMemory(t *testing.T) {
	d, dec := inPlaceDataset(t)
	c := New([]string{"lines"}, "lines", NewMetrics(prometheus.NewRegistry()), zerolog.Nop())
	c.Add(d)
	c.MarkReady()
	mem := &recording{}
	l := NewLoader(c, time.Minute, 0).WithMemory(mem, mem)
	for ch := range d.Index.NumChunks() {
		req := d.ChunkRequest(ch)
		if err := l.Load(context.Background(), req.Key, make([]byte, req.Size)); err != nil {
			t.Fatal(err)
		}
		ranges, _ := dec.Extent(ch, d.Selection())
		if got := mem.reserved[len(mem.reserved)-1]; got < format.Concat(ranges) {
			t.Errorf("chunk %d: reserved %d bytes, it reads %d", ch, got, format.Concat(ranges))
		}
	}
	if mem.gets != d.Index.NumChunks() || mem.puts != mem.gets || mem.held != 0 {
		t.Errorf("%d buffers taken, %d given back, %d bytes still reserved", mem.gets, mem.puts, mem.held)
	}
	busy := errors.New("no memory now")
	l = NewLoader(c, time.Minute, 0).WithMemory(mem, &recording{refuse: busy})
	req := d.ChunkRequest(0)
	err := l.Load(context.Background(), req.Key, make([]byte, req.Size))
	var dce *DamagedChunkError
	if !errors.Is(err, busy) || errors.As(err, &dce) {
		t.Errorf("no room to decode: %v", err)
	}
}

// TestViewChunksTakePreallocatedBuffers: the gateway preallocates a
// dataset's buffers in its own class (MaxChunk), before any job says
// which fields it reads; a job that reads some of them reads a view
// whose chunks are smaller. Its loads decode into those buffers, touched
// already, rather than into new memory the decode faults in page by page
// (measured: a third of a cold projected Parquet epoch's gateway CPU was
// that first touch), and hold no more buffer memory than was
// preallocated; a buffer of the view's own class, free, is taken first.
func TestViewChunksTakePreallocatedBuffers(t *testing.T) {
	ctx := context.Background()
	d, _ := inPlaceDataset(t)
	view, err := d.Select([]string{"len"})
	if err != nil {
		t.Fatal(err)
	}
	if view.MaxChunk >= d.MaxChunk {
		t.Fatalf("the view's buffer class %d is not below the dataset's %d", view.MaxChunk, d.MaxChunk)
	}
	c := New([]string{"lines"}, "lines", NewMetrics(prometheus.NewRegistry()), zerolog.Nop())
	c.Add(d)
	c.MarkReady()
	n := d.Index.NumChunks()
	cache := chunkcache.New(chunkcache.Config{Capacity: int64(n) * d.MaxChunk, Loader: NewLoader(c, time.Minute, 0)})
	defer cache.Close()
	if err := cache.Preallocate(ctx, d.MaxChunk, n); err != nil {
		t.Fatal(err)
	}
	pre := cache.Stats().BufferBytes
	for ch := range n {
		l, err := cache.Acquire(ctx, []chunkcache.Request{view.ChunkRequest(ch)})
		if err != nil {
			t.Fatal(err)
		}
		if got := cap(l.Bytes(0)); int64(got) != d.MaxChunk {
			t.Errorf("view chunk %d decoded into a buffer of capacity %d, not a preallocated one (%d)", ch, got, d.MaxChunk)
		}
		if _, err := format.Verify(l.Bytes(0)); err != nil {
			t.Errorf("view chunk %d: %v", ch, err)
		}
		l.Release()
	}
	if got := cache.Stats().BufferBytes; got != pre {
		t.Errorf("the view's %d chunks hold %d bytes of buffers, %d were preallocated", n, got, pre)
	}
	// A free buffer of the view's own class is taken before a larger one.
	small := chunkcache.New(chunkcache.Config{Capacity: int64(n) * d.MaxChunk, Loader: NewLoader(c, time.Minute, 0)})
	defer small.Close()
	if err := small.Preallocate(ctx, d.MaxChunk, 1); err != nil {
		t.Fatal(err)
	}
	if err := small.Preallocate(ctx, view.MaxChunk, 1); err != nil {
		t.Fatal(err)
	}
	if err := small.Preallocate(ctx, d.MaxChunk, 1); err != nil {
		t.Fatal(err)
	}
	l, err := small.Acquire(ctx, []chunkcache.Request{view.ChunkRequest(0)})
	if err != nil {
		t.Fatal(err)
	}
	if got := int64(cap(l.Bytes(0))); got != view.MaxChunk {
		t.Errorf("with a free buffer of its class, a view chunk took one of capacity %d, want %d", got, view.MaxChunk)
	}
	l.Release()
}

// TestSelect: no fields, or every field, is the dataset itself; some
// fields a view, the same value each time they are named; fields a
// dataset does not have, a view's fields again, or any field of a tar
// dataset are ErrSelect, saying why.
func TestSelect(t *testing.T) {
	d, _ := inPlaceDataset(t)
	view, err := d.Select([]string{"txt"})
	if err != nil || view == d || view.Selected() != "txt" {
		t.Fatalf("Select(txt): %v, %v (selected %q)", view, err, view.Selected())
	}
	if again, _ := d.Select([]string{"txt"}); again != view {
		t.Error("a second Select(txt) made another view")
	}
	for _, names := range [][]string{nil, {"txt", "len"}} {
		if got, err := d.Select(names); err != nil || got != d {
			t.Errorf("Select(%q): %v, %v; want the dataset itself", names, got, err)
		}
	}
	tar := NewDataset("web", "", nil, d.Index)
	for _, tt := range []struct {
		d     *Dataset
		names []string
		says  string
	}{
		{d, []string{"nope"}, "nope"},
		{view, []string{"txt"}, "already read with fields txt"},
		{tar, []string{"jpg"}, "tar chunks"},
	} {
		if _, err := tt.d.Select(tt.names); !errors.Is(err, ErrSelect) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%s: Select(%q): %v; want ErrSelect saying %q", tt.d.Name, tt.names, err, tt.says)
		}
	}
}
