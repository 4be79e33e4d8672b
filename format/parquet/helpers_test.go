package parquet

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/internal/testsupport/s3test"
)

// memStore is the tests' store: objects in memory, counted (s3test),
// with the bytes each was put with at hand.
type memStore struct {
	*s3test.Store
	objs map[string][]byte
}

func newStore() *memStore {
	return &memStore{Store: s3test.Wrap(s3test.NewMemory()), objs: map[string][]byte{}}
}

// put stores b under key. A Memory fails a Put only for an invalid key,
// a test's own mistake: put panics on it rather than take a testing.TB
// at each of its many calls.
func (s *memStore) put(key string, b []byte) {
	if _, err := s.Put(context.Background(), key, bytes.NewReader(b), int64(len(b))); err != nil {
		panic(err)
	}
	s.objs[key] = b
}

// listing is the store's objects as a sorted listing.
func (s *memStore) listing() []format.Object {
	infos, err := s.List(context.Background(), "")
	if err != nil {
		panic(err)
	}
	out := make([]format.Object, len(infos))
	for i, o := range infos {
		out[i] = format.Object{Key: o.Key, Size: o.Size, ETag: o.ETag}
	}
	return out
}

// writeArrow writes recs as one Parquet file with arrow-go's writer, a
// row group per record batch.
func writeArrow(t testing.TB, sc *arrow.Schema, props *pq.WriterProperties, recs ...arrow.RecordBatch) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(sc, &buf, props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// member is one tar member of a decoded sample.
type member struct{ name, data string }

// decodeAll indexes the store, opens the dataset, decodes every chunk
// with sel, and returns each sample's members by key.
func decodeAll(t testing.TB, st *memStore, opt format.Options, names ...string) (map[string][]member, *format.Layout, format.Decoder) {
	t.Helper()
	lay, err := Format{}.Index(context.Background(), st, st.listing(), opt)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := Format{}.Open(lay.Meta)
	if err != nil {
		t.Fatal(err)
	}
	sel, err := format.Select(dec.Fields(), names)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]member{}
	k := 0
	for c, ch := range lay.Chunks {
		got, err := decodeChunk(st, dec, ch, c, sel)
		if err != nil {
			t.Fatalf("chunk %d: %v", c, err)
		}
		if len(got) != ch.Samples {
			t.Fatalf("chunk %d: %d samples, the layout says %d", c, len(got), ch.Samples)
		}
		for _, s := range got {
			if s.key != lay.Keys[k] {
				t.Fatalf("sample %d is %q, the layout says %q", k, s.key, lay.Keys[k])
			}
			out[s.key] = s.members
			k++
		}
	}
	return out, lay, dec
}

type sample struct {
	key     string
	members []member
}

// grown counts the chunks decodeChunk decoded again into the room they
// needed (format.GrowError).
var grown int

// decodeChunk reads chunk c's extent from the store and decodes it,
// checking the resident form with format.Verify and reading it back with
// archive/tar.
func decodeChunk(st *memStore, dec format.Decoder, ch format.Chunk, c int, sel format.Selection) ([]sample, error) {
	ranges, bound := dec.Extent(c, sel)
	var src []byte
	for _, r := range ranges {
		p := make([]byte, r.Len)
		if err := st.ReadRange(context.Background(), ch.Object, ch.ETag, r.Off, p); err != nil {
			return nil, err
		}
		src = append(src, p...)
	}
	dst := make([]byte, bound)
	err := dec.Decode(c, sel, src, dst, format.WriterOptions{ModTime: 1700000000})
	var ge *format.GrowError
	if errors.As(err, &ge) {
		// The footer's bound was a guess: decode into what it needs, as
		// the gateway's loader does.
		grown++
		dst = make([]byte, ge.Need)
		err = dec.Decode(c, sel, src, dst, format.WriterOptions{ModTime: 1700000000})
	}
	if err != nil {
		return nil, err
	}
	tab, err := format.Verify(dst)
	if err != nil {
		return nil, err
	}
	var out []sample
	for i := range tab.Len() {
		off, n, _ := tab.Sample(i)
		tr := tar.NewReader(bytes.NewReader(dst[off : off+n]))
		var s sample
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, err
			}
			b, _ := io.ReadAll(tr)
			dot := strings.LastIndexByte(h.Name[:len(h.Name)-len(extOf(h.Name))], '.')
			_ = dot
			s.members = append(s.members, member{h.Name, string(b)})
		}
		s.key = keyOf(s.members[0].name)
		for _, m := range s.members {
			if keyOf(m.name) != s.key {
				return nil, fmt.Errorf("sample %d mixes keys %q and %q", i, s.key, keyOf(m.name))
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// keyOf is a member name's sample key: up to the first dot of its last
// path element.
func keyOf(name string) string {
	slash := strings.LastIndexByte(name, '/')
	dot := strings.IndexByte(name[slash+1:], '.')
	return name[:slash+1+dot]
}

func extOf(name string) string { return name[len(keyOf(name))+1:] }

// got renders a sample's members as "ext=data" lines for comparison.
func render(ms []member) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "%s=%q\n", extOf(m.name), m.data)
	}
	return b.String()
}

var mem = memory.DefaultAllocator

func newRecord(sc *arrow.Schema, fill func(b *array.RecordBuilder)) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, sc)
	defer b.Release()
	fill(b)
	return b.NewRecordBatch()
}
