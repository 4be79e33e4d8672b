package dataset

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/s3backend"
)

func putAll(t *testing.T, st s3backend.Store, objs map[string][]byte) {
	t.Helper()
	for k, b := range objs {
		if _, err := st.Put(context.Background(), k, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
}

func listing(t *testing.T, st s3backend.Store) map[string]string {
	t.Helper()
	objs, err := st.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, o := range objs {
		out[o.Key] = o.ETag
	}
	return out
}

// A source is indexed where it is, to another store: the data objects are
// neither rewritten nor copied, the index, the format's description and
// the manifest say what the format made of them, and the index read back
// decodes to the source's lines.
func TestIndexInPlaceElsewhere(t *testing.T) {
	ctx := context.Background()
	src, dst := newLocal(t), newLocal(t)
	putAll(t, src, formattest.Write(map[string][]string{
		"data/a.lines": {"alpha", "", "gamma"},
		"data/b.lines": {strings.Repeat("b", 300), "two"},
		"README.md":    nil,
	}))
	before := listing(t, src)
	fs := []format.Format{formattest.Lines{}}
	res, err := IndexInPlace(ctx, src, dst, InPlaceOptions{Formats: fs, Prefix: "data/", Data: "file:///elsewhere",
		Options: format.Options{ChunkBytes: 10}})
	if err != nil {
		t.Fatal(err)
	}
	if after := listing(t, src); len(after) != len(before) {
		t.Fatalf("the source changed: %v → %v", before, after)
	}
	ix, err := stored.ReadIndex(ctx, dst)
	if err != nil {
		t.Fatal(err)
	}
	if !ix.Deferred() || ix.InPlace().Format != "lines" || ix.ID() != res.Index.ID() || ix.NumSamples() != 5 {
		t.Fatalf("index: deferred %v %+v, %d samples", ix.Deferred(), ix.InPlace(), ix.NumSamples())
	}
	m, err := stored.ReadManifest(ctx, dst)
	if err != nil {
		t.Fatal(err)
	}
	if m.InPlace == nil || m.InPlace.Format != "lines" || m.InPlace.Data != "file:///elsewhere" || len(m.InPlace.Fields) != 2 {
		t.Fatalf("manifest: %+v", m.InPlace)
	}
	meta, err := stored.ReadFormat(ctx, dst, ix)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := formattest.Lines{}.Open(meta)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for c := range ix.NumChunks() {
		ch := ix.Chunk(c)
		rs, bound := dec.Extent(c, nil)
		if bound != ch.Size {
			t.Fatalf("chunk %d: size %d, bound %d", c, ch.Size, bound)
		}
		var data []byte
		for _, r := range rs {
			b := make([]byte, r.Len)
			if err := src.ReadRange(ctx, stored.ChunkObject(ch.Key), ch.ETag, r.Off, b); err != nil {
				t.Fatal(err)
			}
			data = append(data, b...)
		}
		dst := make([]byte, bound)
		if err := dec.Decode(c, nil, data, dst, format.WriterOptions{}); err != nil {
			t.Fatal(err)
		}
		tab, err := format.Verify(dst)
		if err != nil {
			t.Fatal(err)
		}
		first, n := ix.ChunkRange(c)
		for i := range n {
			_, l, _ := tab.Sample(i)
			got = append(got, ix.SampleKey(first+i))
			if l < 1024 {
				t.Errorf("sample %s: %d bytes", ix.SampleKey(first+i), l)
			}
		}
	}
	if strings.Join(got, " ") != "data/a/0 data/a/1 data/a/2 data/b/0 data/b/1" {
		t.Fatalf("keys %v", got)
	}
	if !strings.Contains(ix.Chunk(1).Key, "data/a.lines#1") {
		t.Errorf("chunk 1 is %q", ix.Chunk(1).Key)
	}
}

// A file added later is a new index version; the description of the old
// one stays under its ID.
func TestIndexInPlaceAgain(t *testing.T) {
	ctx := context.Background()
	st := newLocal(t)
	putAll(t, st, formattest.Write(map[string][]string{"a.lines": {"x"}}))
	fs := []format.Format{formattest.Lines{}}
	one, err := IndexInPlace(ctx, st, st, InPlaceOptions{Formats: fs})
	if err != nil {
		t.Fatal(err)
	}
	putAll(t, st, formattest.Write(map[string][]string{"b.lines": {"y", "z"}}))
	two, err := IndexInPlace(ctx, st, st, InPlaceOptions{Formats: fs})
	if err != nil {
		t.Fatal(err)
	}
	if one.Index.ID() == two.Index.ID() || two.Index.NumSamples() != 3 {
		t.Fatalf("%s then %s, %d samples", one.Index.ID(), two.Index.ID(), two.Index.NumSamples())
	}
	if _, err := stored.ReadFormat(ctx, st, one.Index); err != nil {
		t.Fatalf("the old version's description: %v", err)
	}
}

func TestIndexInPlaceRefuses(t *testing.T) {
	ctx := context.Background()
	st := newLocal(t)
	fs := []format.Format{formattest.Lines{}}
	if _, err := IndexInPlace(ctx, st, st, InPlaceOptions{Formats: fs}); !errors.Is(err, ErrEmpty) {
		t.Errorf("empty: %v", err)
	}
	putAll(t, st, map[string][]byte{"x.bin": []byte("?")})
	if _, err := IndexInPlace(ctx, st, st, InPlaceOptions{Formats: fs}); !errors.Is(err, ErrNoFormat) {
		t.Errorf("unknown: %v", err)
	}
	if _, err := IndexInPlace(ctx, st, st, InPlaceOptions{Formats: fs, Format: "parquet"}); !errors.Is(err, ErrNoFormat) || !strings.Contains(err.Error(), "lines") {
		t.Errorf("unknown name: %v", err)
	}
	putAll(t, st, map[string][]byte{"bad.lines": []byte("no newline")})
	if _, err := IndexInPlace(ctx, st, st, InPlaceOptions{Formats: fs}); !errors.Is(err, format.ErrInvalid) || !strings.Contains(err.Error(), "bad.lines") {
		t.Errorf("invalid: %v", err)
	}
	if _, err := st.Stat(ctx, chunkindex.IndexKey); !errors.Is(err, s3backend.ErrNotFound) {
		t.Errorf("an index was left behind: %v", err)
	}
	// A format that cannot leave a file out refuses to be asked to,
	// rather than index everything or refuse as if not asked.
	skip := InPlaceOptions{Formats: fs, Options: format.Options{SkipBad: true}}
	if _, err := IndexInPlace(ctx, st, st, skip); !errors.Is(err, ErrSkipUnsupported) || !strings.Contains(err.Error(), "lines dataset") {
		t.Errorf("skipping with a format that cannot: %v", err)
	}
	// A digest that does not match is refused.
	putAll(t, st, map[string][]byte{"bad.lines": []byte("fixed\n")})
	res, err := IndexInPlace(ctx, st, st, InPlaceOptions{Formats: fs})
	if err != nil {
		t.Fatal(err)
	}
	putAll(t, st, map[string][]byte{chunkindex.FormatKey(res.Index.ID()): []byte("[]")})
	if _, err := stored.ReadFormat(ctx, st, res.Index); !errors.Is(err, chunkindex.ErrCorrupt) {
		t.Errorf("another description: %v", err)
	}
}

// superLines is a format built of lines files (as LeRobot's of Parquet).
type superLines struct{ formattest.Lines }

func (superLines) Name() string         { return "superlines" }
func (superLines) Supersedes() []string { return []string{"lines"} }

// A listing two formats recognise is the composite's when it supersedes
// the other, and ambiguous otherwise.
func TestChooseSuperseding(t *testing.T) {
	objs := []format.Object{{Key: "a.lines", Size: 3}}
	f, err := chooseFormat([]format.Format{formattest.Lines{}, superLines{}}, "", objs)
	if err != nil || f.Name() != "superlines" {
		t.Fatalf("%v, %v", f, err)
	}
	if _, err := chooseFormat([]format.Format{formattest.Lines{}, otherLines{}}, "", objs); !errors.Is(err, ErrNoFormat) {
		t.Fatalf("%v", err)
	}
}

type otherLines struct{ formattest.Lines }

func (otherLines) Name() string { return "otherlines" }
