package catalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/s3backend"
)

// packChunks writes chunks tar chunks of perChunk samples (a .cls and a
// .jpg of 300 to 2,700 bytes each) and their index to store.
func packChunks(t *testing.T, store s3backend.Store, chunks, perChunk int) {
	t.Helper()
	ctx := context.Background()
	var cs []chunkindex.Chunk
	var ss []chunkindex.Sample
	id := 0
	for c := range chunks {
		var buf bytes.Buffer
		w := chunkindex.NewChunkWriter(&buf)
		for range perChunk {
			key := fmt.Sprintf("class%d/sample%05d", id%3, id)
			img := bytes.Repeat([]byte{byte(id), byte(id >> 8), byte(c)}, 100+(id*37)%900)
			cls := []byte(fmt.Sprint(id % 3))
			off, n, crc, err := w.WriteSample(key, []chunkindex.Member{
				{Name: key + ".cls", Size: int64(len(cls)), Body: bytes.NewReader(cls)},
				{Name: key + ".jpg", Size: int64(len(img)), Body: bytes.NewReader(img)}})
			if err != nil {
				t.Fatal(err)
			}
			ss = append(ss, chunkindex.Sample{Key: key, Chunk: c, Offset: off, Length: n, CRC: crc})
			id++
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("chunks/%06d.tar", c)
		info, err := store.Put(ctx, name, bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, chunkindex.Chunk{Key: name, Size: info.Size, ETag: info.ETag, Samples: perChunk})
	}
	ix, err := chunkindex.New(cs, ss)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ix.MarshalBinary()
	if _, err := store.Put(ctx, chunkindex.IndexKey, bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
}

// packedStore is a local store in a temporary directory holding chunks
// chunks of perChunk samples (packChunks).
func packedStore(t *testing.T, chunks, perChunk int) *s3backend.Local {
	t.Helper()
	local, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	packChunks(t, local, chunks, perChunk)
	return local
}

// loadCatalog loads the dataset in store as "test" into a ready catalog.
func loadCatalog(t *testing.T, store s3backend.Store) (*Dataset, *Catalog) {
	t.Helper()
	ds, err := Load(context.Background(), Spec{Name: "test", URL: "file:///fixture", Store: store}, s3backend.Config{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	cat := New([]string{"test"}, "test", NewMetrics(prometheus.NewRegistry()), zerolog.Nop())
	cat.Add(ds)
	cat.MarkReady()
	return ds, cat
}

// flipStore damages reads of one chunk the way a bad link would: the first
// flips reads each have one byte flipped; with moving set, a different
// byte each time, so that no two reads fail alike.
type flipStore struct {
	s3backend.Store
	key    string
	at     int64 // offset of the byte flipped
	moving bool

	mu    sync.Mutex
	flips int // reads still to damage; -1: all
	reads int
}

func (f *flipStore) ReadRange(ctx context.Context, key, etag string, off int64, p []byte) error {
	if err := f.Store.ReadRange(ctx, key, etag, off, p); err != nil || key != f.key {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.flips == 0 {
		return nil
	}
	if f.flips > 0 {
		f.flips--
	}
	at := f.at - off
	if f.moving {
		at += int64(f.reads)
	}
	if at >= 0 && at < int64(len(p)) {
		p[at] ^= 0x20
	}
	return nil
}

// TestLoaderRereads: a chunk that fails its CRC32C is read again, up to
// the re-reads given, before anything is reported; what the reads agree
// on decides the answer: the chunk as stored, a *DamagedChunkError
// (damaged at rest: the same failure every time), or ErrUnavailable
// (damaged in transit: a different failure every time); each re-read
// counted in brand_chunk_rereads_total.
func TestLoaderRereads(t *testing.T) {
	atRest, transient := errors.New("damaged at rest"), errors.New("damaged in transit")
	tests := []struct {
		name        string
		flips       int // damaged reads; -1: every one
		moving      bool
		rereads     int
		want        error // nil, atRest or transient
		wantReads   int
		wantRereads float64
	}{
		{"one damaged read is re-read", 1, false, 2, nil, 2, 1},
		{"two damaged reads, within the bound", 2, false, 2, nil, 3, 2},
		{"damaged at rest fails alike every time", -1, false, 2, atRest, 3, 2},
		{"damaged differently every time is transient", -1, true, 2, transient, 3, 2},
		{"re-reads disabled", 1, false, 0, atRest, 1, 0},
		{"a larger bound", 4, false, 5, nil, 5, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			local := packedStore(t, 2, 3)
			fs := &flipStore{Store: local, key: "chunks/000000.tar", at: 600, moving: tc.moving, flips: tc.flips}
			ds, cat := loadCatalog(t, fs)
			fs.mu.Lock()
			fs.reads = 0 // the index's read is not the chunk's
			fs.mu.Unlock()
			k := ds.ChunkKey(0)
			buf := make([]byte, ds.Index.Chunk(0).Size)
			err := NewLoader(cat, time.Minute, tc.rereads).Load(context.Background(), k, buf)
			var damaged *DamagedChunkError
			switch tc.want {
			case nil:
				want := make([]byte, len(buf))
				if rerr := local.ReadRange(context.Background(), k.Object, "", 0, want); rerr != nil {
					t.Fatal(rerr)
				}
				if err != nil || !bytes.Equal(buf, want) {
					t.Fatalf("load: %v; the chunk as stored: %t", err, bytes.Equal(buf, want))
				}
			case atRest:
				if !errors.As(err, &damaged) || !errors.Is(err, ErrCorrupt) || errors.Is(err, s3backend.ErrUnavailable) || damaged.Reads != tc.wantReads {
					t.Fatalf("load: %v; want a DamagedChunkError of %d reads wrapping ErrCorrupt", err, tc.wantReads)
				}
			case transient:
				if !errors.Is(err, s3backend.ErrUnavailable) || !errors.Is(err, ErrCorrupt) || errors.As(err, &damaged) {
					t.Fatalf("load: %v; want ErrUnavailable and ErrCorrupt, not damaged at rest", err)
				}
			}
			fs.mu.Lock()
			reads := fs.reads
			fs.mu.Unlock()
			if reads != tc.wantReads {
				t.Errorf("chunk read %d times, want %d", reads, tc.wantReads)
			}
			if got := testutil.ToFloat64(cat.metrics.rereads); got != tc.wantRereads {
				t.Errorf("brand_chunk_rereads_total = %v, want %v", got, tc.wantRereads)
			}
		})
	}
}
