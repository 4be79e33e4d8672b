package chunkindex

import (
	"bytes"
	"context"
	"io"
	"runtime"
	"strings"
	"testing"
)

// encoded1M returns the encoding of a 1,000,000-sample index with keys like
// "train/n00000764/n00000764_10026" (31 bytes) in 1,000 chunks.
func encoded1M(b *testing.B) []byte {
	b.Helper()
	chunks, samples := synthDataset(1_000_000, 1000)
	enc, err := mustNew(b, chunks, samples).MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	return enc
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkDecode1M measures loading a million-sample index. Besides ns/op
// and B/op it reports retained-MB: the heap the decoded index keeps alive,
// which is what a gateway pays per loaded dataset.
func BenchmarkDecode1M(b *testing.B) {
	enc := encoded1M(b)
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(enc); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	before := heapAlloc()
	ix, err := Decode(enc)
	if err != nil {
		b.Fatal(err)
	}
	after := heapAlloc()
	runtime.KeepAlive(ix)
	runtime.KeepAlive(enc) // or its release would offset the index
	b.ReportMetric(float64(after-before)/(1<<20), "retained-MB")
	b.ReportMetric(float64(after-before)/float64(ix.NumSamples()), "retained-B/sample")
	b.ReportMetric(float64(len(enc))/float64(ix.NumSamples()), "encoded-B/sample")
}

func BenchmarkNew1M(b *testing.B) {
	chunks, samples := synthDataset(1_000_000, 1000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := New(chunks, samples); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMarshal1M(b *testing.B) {
	chunks, samples := synthDataset(1_000_000, 1000)
	ix := mustNew(b, chunks, samples)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ix.MarshalBinary(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSampleRange(b *testing.B) {
	chunks, samples := synthDataset(1_000_000, 1000)
	ix := mustNew(b, chunks, samples)
	b.ReportAllocs()
	id := 0
	for b.Loop() {
		ix.SampleRange(id)
		id = (id + 7919) % ix.NumSamples()
	}
}

func BenchmarkLookup(b *testing.B) {
	chunks, samples := synthDataset(1_000_000, 1000)
	ix := mustNew(b, chunks, samples)
	b.ReportAllocs()
	i := 0
	ctx := context.Background()
	for b.Loop() {
		if _, ok, err := ix.Lookup(ctx, samples[i].Key); err != nil || !ok {
			b.Fatal("not found", err)
		}
		i = (i + 7919) % len(samples)
	}
}

// BenchmarkScanTar measures indexing throughput on a chunk of 64 KiB samples.
func BenchmarkScanTar(b *testing.B) {
	var buf bytes.Buffer
	w := NewChunkWriter(&buf)
	body := strings.Repeat("x", 64<<10)
	for i := range 256 {
		key := "train/" + strings.Repeat("k", i%50) + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if _, _, _, err := w.WriteSample(key, []Member{mem(key+".jpg", body), mem(key+".cls", "1")}); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	chunk := buf.Bytes()
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ScanTar(bytes.NewReader(chunk), func(TarSample) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteSample measures packing throughput.
func BenchmarkWriteSample(b *testing.B) {
	body := strings.Repeat("x", 64<<10)
	w := NewChunkWriter(io.Discard)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		key := "s" + strings.Repeat("0", 8)
		key = key[:1] + itoa(i)
		if _, _, _, err := w.WriteSample(key, []Member{mem(key+".jpg", body)}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func itoa(i int) string {
	var b [20]byte
	n := len(b)
	for {
		n--
		b[n] = byte('0' + i%10)
		if i /= 10; i == 0 {
			return string(b[n:])
		}
	}
}
