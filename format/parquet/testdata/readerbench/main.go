// Command readerbench measures the two Go Parquet readers Brand could
// use, github.com/parquet-go/parquet-go and
// github.com/apache/arrow-go/v18/parquet, on what format/parquet does:
// decode one row group from memory into Brand's resident form
// (format.Writer), for a Hub-style image dataset (struct{bytes, path} of
// ~100 KiB JPEG-like bytes, int64 label; 100 rows a row group, as the
// Hugging Face datasets library writes image datasets) and a token dataset
// (list<int32> of 1–4k tokens a row; 1,000 rows a row group). With
// -matrix it instead writes small files with each library, every encoding,
// codec and page version it writes, and reads each with both.
//
// It is a module of its own under testdata (the go tool leaves it out of
// Brand's build, and Brand's go.mod carries only the reader chosen), run
// by hand; see README.md and docs/format.md §6.4.
package main

import (
	"flag"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/brandgw/brand/format"
)

func cpu() time.Duration {
	var ru syscall.Rusage
	check(syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type dataset struct {
	name   string
	file   []byte
	groups int
	rows   int
	images bool
}

func main() {
	matrix := flag.Bool("matrix", false, "print which encodings, codecs and page versions each library writes and reads")
	benchtime := flag.Duration("benchtime", 2*time.Second, "time per measurement")
	flag.Parse()
	if *matrix {
		runMatrix()
		return
	}
	testing.Init()
	check(flag.Set("test.benchtime", benchtime.String()))

	sets := []dataset{
		{"images, plain", imageFile(4, 100, false), 4, 100, true},
		{"images, dictionary (pyarrow's default)", imageFile(4, 100, true), 4, 100, true},
		{"tokens, snappy, plain", tokenFile(4, 1000, false, compress.Codecs.Snappy), 4, 1000, false},
		{"tokens, snappy, dictionary (pyarrow's default)", tokenFile(4, 1000, true, compress.Codecs.Snappy), 4, 1000, false},
		{"tokens, zstd, dictionary", tokenFile(4, 1000, true, compress.Codecs.Zstd), 4, 1000, false},
	}
	fmt.Println("| dataset | reader | row group MB (uncompressed) | CPU ms / row group | CPU ms / MB | allocs / row group | KB allocated / row group |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, s := range sets {
		keys := make([]string, s.rows)
		for i := range keys {
			keys[i] = fmt.Sprintf("data/train-00000-of-00001/%06d", i)
		}
		g, a := newPQG(s.file), newArrow(s.file)
		g.keys, a.keys = keys, keys
		if n := len(g.f.RowGroups()); n != s.groups {
			panic(fmt.Sprintf("%s: %d row groups", s.name, n))
		}
		var unc int64
		for _, c := range g.f.Metadata().RowGroups[0].Columns {
			unc += c.MetaData.TotalUncompressedSize
		}
		mb := float64(unc) / 1e6
		bound := unc*2 + int64(s.rows)*4096 + format.Overhead(s.rows)
		// Both decoders must write the same resident bytes.
		d1, d2 := make([]byte, bound), make([]byte, bound)
		var e1, e2 error
		if s.images {
			e1, e2 = g.decodeImages(0, d1), a.decodeImages(0, d2)
		} else {
			e1, e2 = g.decodeTokens(0, d1), a.decodeTokens(0, d2)
		}
		check(e1)
		check(e2)
		if string(d1) != string(d2) {
			panic(s.name + ": the two readers decode to different bytes")
		}
		if _, err := format.Verify(d1); err != nil {
			panic(err)
		}
		for _, r := range []struct {
			name string
			f    func(int, []byte) error
		}{
			{"parquet-go v0.32.0", pick(s.images, g.decodeImages, g.decodeTokens)},
			{"arrow-go v18.8.0", pick(s.images, a.decodeImages, a.decodeTokens)},
		} {
			dst := make([]byte, bound)
			var used time.Duration
			res := testing.Benchmark(func(b *testing.B) {
				b.ReportAllocs()
				c0 := cpu()
				for i := 0; b.Loop(); i++ {
					check(r.f(i%s.groups, dst))
				}
				used = cpu() - c0
			})
			per := float64(used.Microseconds()) / 1e3 / float64(res.N)
			fmt.Printf("| %s | %s | %.1f | %.2f | %.3f | %d | %d |\n", s.name, r.name, mb, per, per/mb, res.AllocsPerOp(), res.AllocedBytesPerOp()>>10)
		}
	}
	fmt.Fprintln(os.Stderr, "done")
}

func pick(images bool, a, b func(int, []byte) error) func(int, []byte) error {
	if images {
		return a
	}
	return b
}
