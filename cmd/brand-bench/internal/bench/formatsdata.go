package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"golang.org/x/sync/errgroup"

	"github.com/brandgw/brand/s3backend"
)

// The formats benchmark's datasets: the same photos as the Hugging Face
// Hub stores an image dataset (Parquet written by arrow-go with pyarrow's
// defaults: dictionary encoding and snappy), as Mosaic Streaming stores it
// (MDS shards and index.json), and packed into Brand's tar chunks.

// hubSchema is the Hub's layout of an image dataset (what `datasets`
// writes for an Image feature and a ClassLabel: a struct of the image's
// bytes and its path, and an int64 label), with one more column a
// projected job leaves unread: an embedding, a list of float32 (what
// `datasets` writes for a Sequence(float32) feature), as datasets that
// carry precomputed features have.
var hubSchema = arrow.NewSchema([]arrow.Field{
	{Name: "image", Type: arrow.StructOf(
		arrow.Field{Name: "bytes", Type: arrow.BinaryTypes.Binary, Nullable: true},
		arrow.Field{Name: "path", Type: arrow.BinaryTypes.String, Nullable: true},
	), Nullable: true},
	{Name: "label", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "embedding", Type: arrow.ListOf(arrow.PrimitiveTypes.Float32), Nullable: true},
}, nil)

// projectedColumns are the fields the projected job asks for
// (columns=image,label): the same members as the tar samples, jpg and cls.
var projectedColumns = []string{"image", "label"}

// photoSet is the photos every dataset of the benchmark holds.
type photoSet struct {
	keys   []string // c07/photo_00007: the tar samples' keys
	jpegs  [][]byte
	labels []int64
}

func (p *photoSet) bytes() int64 {
	var n int64
	for _, b := range p.jpegs {
		n += int64(len(b))
	}
	return n
}

// embedding is row i's embedding: n/4 pseudo-random float32s in [-1, 1)
// (they do not compress, as real features do not much).
func embedding(i, n int) []float32 {
	r := rand.New(rand.NewPCG(uint64(i), 41))
	v := make([]float32, n/4)
	for j := range v {
		v[j] = 2*r.Float32() - 1
	}
	return v
}

// hubFile writes one Parquet file of the Hub's layout holding the photos
// rows (indices into p, in order), rowGroup rows to a row group.
func (p *photoSet) hubFile(rows []int, rowGroup, embeddingBytes int) ([]byte, error) {
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(hubSchema, &buf, pq.NewWriterProperties(pq.WithCompression(compress.Codecs.Snappy)), pqarrow.DefaultWriterProps())
	if err != nil {
		return nil, err
	}
	for lo := 0; lo < len(rows); lo += rowGroup {
		b := array.NewRecordBuilder(memory.DefaultAllocator, hubSchema)
		sb := b.Field(0).(*array.StructBuilder)
		bb := sb.FieldBuilder(0).(*array.BinaryBuilder)
		pb := sb.FieldBuilder(1).(*array.StringBuilder)
		lb := b.Field(1).(*array.Int64Builder)
		eb := b.Field(2).(*array.ListBuilder)
		vb := eb.ValueBuilder().(*array.Float32Builder)
		for _, i := range rows[lo:min(lo+rowGroup, len(rows))] {
			sb.Append(true)
			bb.Append(p.jpegs[i])
			pb.Append(fmt.Sprintf("photo_%05d.jpg", i))
			lb.Append(p.labels[i])
			eb.Append(true)
			vb.AppendValues(embedding(i, embeddingBytes), nil)
		}
		rec := b.NewRecordBatch()
		b.Release()
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// columnBytes sums, over a Parquet file's row groups, the compressed
// size of the column chunks of the top-level fields named (a struct's
// leaves are its field's): what a job projected onto them must read.
func columnBytes(b []byte, fields []string) (int64, error) {
	r, err := file.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	defer r.Close()
	want := map[string]bool{}
	for _, f := range fields {
		want[f] = true
	}
	var n int64
	md := r.MetaData()
	for g := range md.NumRowGroups() {
		rg := md.RowGroup(g)
		for c := range rg.NumColumns() {
			cc, err := rg.ColumnChunk(c)
			if err != nil {
				return 0, err
			}
			if path := cc.PathInSchema(); len(path) > 0 && want[path[0]] {
				n += cc.TotalCompressedSize()
			}
		}
	}
	return n, nil
}

// mdsShards writes the photos (in the order of rows) as MDS shards of at
// most shardBytes each, with columns image (jpeg) and label (int), as
// Streaming's MDSWriter does (columns sorted by name; a shard is flushed
// when the next sample would pass its size limit), and returns the
// objects: index.json and shard.NNNNN.mds.
func (p *photoSet) mdsShards(rows []int, shardBytes int64) map[string][]byte {
	const config = `{"column_encodings":["jpeg","int"],"column_names":["image","label"],"column_sizes":[null,8],"compression":null,"format":"mds","hashes":[],"size_limit":%d,"version":2}`
	cfg := []byte(fmt.Sprintf(config, shardBytes))
	out := map[string][]byte{}
	var shards []any
	le := binary.LittleEndian
	flush := func(samples [][]byte) {
		if len(samples) == 0 {
			return
		}
		raw := le.AppendUint32(nil, uint32(len(samples)))
		off := 4 + 4*(len(samples)+1) + len(cfg)
		for i := 0; i <= len(samples); i++ {
			raw = le.AppendUint32(raw, uint32(off))
			if i < len(samples) {
				off += len(samples[i])
			}
		}
		raw = append(raw, cfg...)
		for _, s := range samples {
			raw = append(raw, s...)
		}
		name := fmt.Sprintf("shard.%05d.mds", len(shards))
		out[name] = raw
		shards = append(shards, map[string]any{
			"column_encodings": []string{"jpeg", "int"}, "column_names": []string{"image", "label"}, "column_sizes": []any{nil, 8},
			"compression": nil, "format": "mds", "hashes": []string{}, "size_limit": shardBytes, "version": 2,
			"samples": len(samples), "raw_data": map[string]any{"basename": name, "bytes": len(raw)}, "zip_data": nil,
		})
	}
	var cur [][]byte
	size := int64(4 + 4 + len(cfg))
	for _, i := range rows {
		s := le.AppendUint32(nil, uint32(len(p.jpegs[i])))
		s = append(s, p.jpegs[i]...)
		s = le.AppendUint64(s, uint64(p.labels[i]))
		if len(cur) > 0 && size+int64(len(s))+4 > shardBytes {
			flush(cur)
			cur, size = nil, int64(4+4+len(cfg))
		}
		cur = append(cur, s)
		size += int64(len(s)) + 4
	}
	flush(cur)
	out["index.json"], _ = json.Marshal(map[string]any{"version": 2, "shards": shards})
	return out
}

// putAll uploads objects (key → bytes) under st, 8 at a time, and returns
// their total size.
func putAll(ctx context.Context, st s3backend.Store, objs map[string][]byte) (int64, error) {
	type kv struct {
		k string
		v []byte
	}
	ch := make(chan kv)
	g, gctx := errgroup.WithContext(ctx)
	var total atomic.Int64
	for range 8 {
		g.Go(func() error {
			for o := range ch {
				if _, err := st.Put(gctx, o.k, bytes.NewReader(o.v), int64(len(o.v))); err != nil {
					return fmt.Errorf("bench: uploading %s: %w", o.k, err)
				}
				total.Add(int64(len(o.v)))
			}
			return nil
		})
	}
	g.Go(func() error {
		defer close(ch)
		for k, v := range objs {
			select {
			case ch <- kv{k, v}:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	err := g.Wait()
	return total.Load(), err
}

// hubFiles writes files Parquet files of the Hub's layout
// (data/train-0000K-of-0000N.parquet), file k holding the rows rowsOf(k)
// returns, and uploads them under st as they are made, parallel at a time. It returns their total size, and the
// projected columns' bytes in them.
func (p *photoSet) hubFiles(ctx context.Context, st s3backend.Store, files, parallel int, rowsOf func(k int) []int, rowGroup, embeddingBytes int) (total, projected int64, err error) {
	var next atomic.Int64
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	for range parallel {
		g.Go(func() error {
			for {
				k := int(next.Add(1) - 1)
				if k >= files {
					return nil
				}
				b, err := p.hubFile(rowsOf(k), rowGroup, embeddingBytes)
				if err != nil {
					return fmt.Errorf("bench: writing Parquet file %d: %w", k, err)
				}
				cols, err := columnBytes(b, projectedColumns)
				if err != nil {
					return fmt.Errorf("bench: reading back Parquet file %d: %w", k, err)
				}
				key := fmt.Sprintf("data/train-%05d-of-%05d.parquet", k, files)
				if _, err := st.Put(gctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
					return fmt.Errorf("bench: uploading %s: %w", key, err)
				}
				mu.Lock()
				total += int64(len(b))
				projected += cols
				mu.Unlock()
			}
		})
	}
	err = g.Wait()
	return total, projected, err
}
