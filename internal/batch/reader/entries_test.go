package reader_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/internal/batch/reader"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/cluster/route"
	"github.com/brandgw/brand/internal/server/memory"
)

// objectBytes fills an object block with its offset's low byte.
var objectBytes = chunkcache.LoaderFunc(func(_ context.Context, k chunkcache.Key, buf []byte) error {
	for i := range buf {
		buf[i] = byte(k.Offset)
	}
	return nil
})

func newReader(t *testing.T, c *chunkcache.Cache, maxBytes, copyBytes int64) *reader.Reader {
	t.Helper()
	return reader.New(reader.Config{Cache: c, Loader: objectBytes, Remote: route.Solo{},
		MaxBytes: maxBytes, Copies: copies(copyBytes), Assemblers: 1, MaxWait: time.Second,
		Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
}

func block(off, size int64) chunkcache.Request {
	return chunkcache.Request{Key: chunkcache.Key{Space: chunkcache.Object, Dataset: "b", Object: "o", ETag: "v", Offset: off}, Size: size}
}

// TestReadEntries: entries read whole, in order, pinned until Release;
// Relieve copies what is left out of them and gives the pins back; a read
// over the bound is refused before anything is loaded.
func TestReadEntries(t *testing.T) {
	c := chunkcache.New(chunkcache.Config{Capacity: 1 << 20, Loader: objectBytes})
	defer c.Close()
	r := newReader(t, c, 64<<10, 64<<10)
	ctx := context.Background()
	res, err := r.ReadEntries(ctx, []chunkcache.Request{block(1, 100), block(2, 50)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Bytes != 150 || len(res.Parts) != 2 || !bytes.Equal(res.Parts[0], bytes.Repeat([]byte{1}, 100)) ||
		!bytes.Equal(res.Parts[1], bytes.Repeat([]byte{2}, 50)) || res.Loads != 2 {
		t.Fatalf("result: %d bytes, %d parts, %d loads", res.Bytes, len(res.Parts), res.Loads)
	}
	if st := c.Stats(); st.Pinned != 2 {
		t.Fatalf("%d entries pinned while the result is held, want 2", st.Pinned)
	}
	rest, ok := res.Relieve(net.Buffers{res.Parts[1][10:]})
	if !ok || len(rest) != 1 || !bytes.Equal(rest[0], bytes.Repeat([]byte{2}, 40)) {
		t.Fatalf("Relieve: %v, %d parts", ok, len(rest))
	}
	if st := c.Stats(); st.Pinned != 0 {
		t.Fatalf("%d entries pinned after Relieve, want 0", st.Pinned)
	}
	res.Release()

	_, err = r.ReadEntries(ctx, []chunkcache.Request{block(3, 40<<10), block(4, 40<<10)})
	if !errors.Is(err, reader.ErrTooLarge) {
		t.Fatalf("entries over the read bound: %v", err)
	}
	if c.Contains(block(3, 40<<10).Key) {
		t.Fatal("an entry of a refused read was loaded")
	}
}

// copies is a copy budget of n bytes.
func copies(n int64) reader.Copies {
	return memory.New(memory.Config{Budget: memory.Budget{Copies: n}, MaxWait: time.Second, Busy: chunkcache.ErrBusy}).Copies()
}
