package megatron

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/internal/decodetest"
)

// blend is a source of prefixes .idx files (the .bin only listed) of
// docs documents each, of 1 to 4,000 tokens (uint16).
func blend(prefixes, docs int) *decodetest.Store {
	s := decodetest.NewStore()
	r := rand.New(rand.NewPCG(1, 2))
	for p := range prefixes {
		sizes := make([]int32, docs)
		docIdx := make([]int64, docs+1)
		var total int64
		for i := range sizes {
			sizes[i] = 1 + r.Int32N(4000)
			total += 2 * int64(sizes[i])
			docIdx[i+1] = int64(i + 1)
		}
		name := fmt.Sprintf("corpus/shard_%04d_text_document", p)
		s.Objs[name+".idx"] = buildIdx(8, sizes, docIdx, nil)
		s.Objs[name+".bin"] = nil
		s.Sizes[name+".bin"] = total
	}
	return s
}

// BenchmarkIndex indexes a blend of 2,000 prefixes of 500 documents
// (a million documents, 20 MB of .idx): issue 42's time-to-first-batch
// blend, its .idx already in memory.
func BenchmarkIndex(b *testing.B) {
	s := blend(2000, 500)
	objs := s.List()
	b.ReportAllocs()
	var docs int
	for b.Loop() {
		lay, err := Format{}.Index(context.Background(), s, objs, format.Options{})
		if err != nil {
			b.Fatal(err)
		}
		docs = len(lay.Keys)
	}
	b.ReportMetric(float64(docs)*float64(b.N)/b.Elapsed().Seconds(), "docs/s")
}

// BenchmarkOpen is a gateway opening the same blend's Meta.
func BenchmarkOpen(b *testing.B) {
	s := blend(2000, 500)
	lay, err := Format{}.Index(context.Background(), s, s.List(), format.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(lay.Meta)))
	for b.Loop() {
		if _, err := (Format{}).Open(lay.Meta); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecode decodes a 64 MiB chunk of documents of 1 to 4,000
// uint16 tokens; bytes/s are the .bin's.
func BenchmarkDecode(b *testing.B) {
	s := blend(1, 40000)
	for k, n := range s.Sizes {
		s.Objs[k] = make([]byte, n)
	}
	lay, dec, err := indexSource(b, s, format.Options{})
	if err != nil {
		b.Fatal(err)
	}
	src, resident := decodetest.ReadChunk(b, s, lay, dec, 0, nil)
	dst := make([]byte, resident)
	b.SetBytes(int64(len(src)))
	b.ReportMetric(float64(lay.Chunks[0].Samples), "docs/chunk")
	for b.Loop() {
		if err := dec.Decode(0, nil, src, dst, format.WriterOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
