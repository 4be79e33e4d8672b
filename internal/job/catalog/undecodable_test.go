package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/s3backend"
)

// A chunk served in place whose bytes do not decode — the same way on
// every read — is damaged at rest, as a tar chunk failing its CRC32C the
// same way every time is: a *DamagedChunkError wrapping ErrCorrupt that
// names the dataset, the chunk and why it did not decode, logged at error
// level, counted in brand_chunk_decode_failures_total (one a read) and
// remembered (IsDamaged), and never a load that succeeds: the cache never
// holds the chunk, so a second request reads and fails again. Bytes that
// fail to decode on one read only are read again and served.
func TestUndecodableChunk(t *testing.T) {
	for _, tc := range []struct {
		name      string
		flips     int // damaged reads; -1: every one
		damaged   bool
		wantReads int
	}{
		{"undecodable on every read", -1, true, 2},
		{"undecodable once, then decoded", 1, false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			d, _ := inPlaceDataset(t)
			// The first newline of f.lines, in chunk 0: a line that no
			// longer ends where the index put it.
			first := make([]byte, 64)
			if err := d.InPlace.Data.ReadRange(ctx, "f.lines", "", 0, first); err != nil {
				t.Fatal(err)
			}
			fs := &flipStore{Store: d.InPlace.Data, key: "f.lines", at: int64(bytes.IndexByte(first, '\n')), flips: tc.flips}
			d.InPlace.Data = fs
			var logs bytes.Buffer
			m := NewMetrics(prometheus.NewRegistry())
			c := New([]string{"lines"}, "lines", m, zerolog.New(&logs))
			c.Add(d)
			c.MarkReady()
			req := d.ChunkRequest(0)
			cache := chunkcache.New(chunkcache.Config{Capacity: 4 * req.Size, Loader: NewLoader(c, time.Minute, 1)})
			defer cache.Close()
			for attempt := range 2 {
				lease, err := cache.Acquire(ctx, []chunkcache.Request{req})
				if !tc.damaged {
					if err != nil {
						t.Fatalf("attempt %d: %v", attempt, err)
					}
					lease.Release()
					continue
				}
				if err == nil {
					lease.Release()
					t.Fatalf("attempt %d: a chunk that does not decode was loaded (an empty resident form served as the chunk)", attempt)
				}
				var dce *DamagedChunkError
				if !errors.As(err, &dce) || !errors.Is(err, ErrCorrupt) || dce.Reads != 2 {
					t.Fatalf("attempt %d: %v; want a DamagedChunkError of 2 reads wrapping ErrCorrupt", attempt, err)
				}
				for _, says := range []string{"dataset lines", req.Key.Object, "not where the index put it"} {
					if !strings.Contains(err.Error(), says) {
						t.Errorf("attempt %d: %q does not say %q", attempt, err, says)
					}
				}
				// A file served in place is indexed again, not re-packed.
				for _, msg := range []string{err.Error(), dce.Public()} {
					if !strings.Contains(msg, "index") || strings.Contains(msg, "re-pack") {
						t.Errorf("attempt %d: %q: want it to say to index the file again, not to re-pack it", attempt, msg)
					}
				}
			}
			fs.mu.Lock()
			reads := fs.reads
			fs.mu.Unlock()
			failures := testutil.ToFloat64(m.decodeFailures)
			if !tc.damaged {
				if reads != tc.wantReads || failures != 1 || d.IsDamaged(0) {
					t.Errorf("read %d times (want %d), %v decode failures counted (want 1), damaged %v", reads, tc.wantReads, failures, d.IsDamaged(0))
				}
				return
			}
			// Not cached: each request read the chunk twice (a read and a
			// re-read) and failed.
			if reads != 2*tc.wantReads || failures != float64(2*tc.wantReads) || !d.IsDamaged(0) {
				t.Errorf("read %d times (want %d), %v decode failures counted (want %d), damaged %v", reads, 2*tc.wantReads, failures, 2*tc.wantReads, d.IsDamaged(0))
			}
			if got := testutil.ToFloat64(m.corruptChunks); got != 0 {
				t.Errorf("brand_chunk_checksum_failures_total = %v: a chunk that does not decode failed no checksum", got)
			}
			errorLines := 0
			for line := range strings.Lines(logs.String()) {
				var e struct{ Level, Dataset, Chunk, Fault string }
				if json.Unmarshal([]byte(line), &e) == nil && e.Level == "error" && e.Dataset == "lines" && e.Chunk == req.Key.Object &&
					strings.Contains(e.Fault, "not where the index put it") {
					errorLines++
				}
			}
			if errorLines != 2 {
				t.Errorf("%d error-level log lines naming the dataset, the chunk and the fault, want one a request:\n%s", errorLines, logs.String())
			}
		})
	}
}

// silentDecoder reports every chunk decoded and writes nothing: a
// decoder's slip.
type silentDecoder struct{ format.Decoder }

func (silentDecoder) Decode(int, format.Selection, []byte, []byte, format.WriterOptions) error {
	return nil
}

// A decoder that reports success without writing a whole resident form
// of the chunk's samples has not decoded it: the chunk is undecodable,
// never a chunk served without its samples.
func TestDecoderThatWritesNothing(t *testing.T) {
	ctx := context.Background()
	d, dec := inPlaceDataset(t)
	d.InPlace.Decoder = silentDecoder{dec}
	m := NewMetrics(prometheus.NewRegistry())
	c := New([]string{"lines"}, "lines", m, zerolog.Nop())
	c.Add(d)
	c.MarkReady()
	req := d.ChunkRequest(0)
	err := NewLoader(c, time.Minute, 0).Load(ctx, req.Key, make([]byte, req.Size))
	var dce *DamagedChunkError
	if !errors.As(err, &dce) || !strings.Contains(dce.Public(), "no whole resident form") {
		t.Fatalf("a decode that wrote nothing: %v", err)
	}
}

var _ s3backend.Store = (*flipStore)(nil)
