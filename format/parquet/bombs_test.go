package parquet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/hostiletest"
)

// Honest pages of every codec, forged as hostiletest forges its hostile
// ones, decode to their rows: the forgery is a Parquet file, so what the
// hostile ones are refused for is their bytes.
func TestForgedPages(t *testing.T) {
	for _, c := range append([]string{""}, hostiletest.ParquetCodecs...) {
		for _, col := range []hostiletest.Column{hostiletest.Image, hostiletest.Tokens} {
			t.Run(fmt.Sprintf("%s/%d", c, col), func(t *testing.T) {
				st := newStore()
				st.put("f.parquet", hostiletest.Parquet(hostiletest.Honest(col, c, 100)))
				opt := format.Options{}
				if col == hostiletest.Tokens {
					opt.Tokens = "input_ids"
				}
				got, _, _ := decodeAll(t, st, opt)
				if len(got) != 100 {
					t.Fatalf("%d rows", len(got))
				}
				m := got["f/042"]
				if len(m) != 1 || col == hostiletest.Image && len(m[0].data) != 200+42 || col == hostiletest.Tokens && len(m[0].data) != npyHeaderMax+4 {
					t.Fatalf("row 42: %+v", m)
				}
			})
		}
	}
}

// decodeBound is what decoding a hostile page of 1.6 MB stated may
// allocate: the decoder's Working (its reservation), which counts what the
// page's codec takes beside it.
func decodeBound(dec format.Decoder) int64 { return dec.(format.Working).Working(0, nil) }

// Every hostile file of hostiletest's corpora — a page of each codec whose
// header states 1.6 MB and whose bytes inflate to 2 GiB (ZSTD with and
// without a content size), claim 4 GiB (Snappy) or inflate to 64 MiB
// (16 MiB for Brotli), pages that inflate just past their stated size,
// a value past its page — indexes (the
// footer is honest), and decoding it is damage named by its column,
// having allocated no more than the decoder's Working, which a gateway
// reserves before the read; indexing the token column's bomb as a token
// dataset is refused, having allocated no more than its page's stated
// size and the codec's working.
func TestHostileCorpus(t *testing.T) {
	corpus := hostiletest.ParquetBombs()
	maps.Copy(corpus, hostiletest.ParquetDamaged())
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range corpus {
			if !yield(n) {
				return
			}
		}
	})
	for _, name := range names {
		file := corpus[name]
		t.Run(name, func(t *testing.T) {
			st := newStore()
			st.put("f.parquet", file)
			opt := format.Options{}
			tokens := strings.HasPrefix(name, "tokens-")
			if tokens {
				opt.Tokens = "input_ids"
			}
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			lay, err := Format{}.Index(context.Background(), st, st.listing(), opt)
			runtime.ReadMemStats(&m1)
			if tokens {
				if !errors.Is(err, format.ErrInvalid) || !strings.Contains(err.Error(), "does not decompress") {
					t.Fatalf("indexing a token bomb: %v", err)
				}
				if a := int64(m1.TotalAlloc - m0.TotalAlloc); a > 2*int64(len(file))+inflateWorking(6, 1_600_000)+1_600_000+1<<20 {
					t.Errorf("indexing %d bytes allocated %d", len(file), a)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			dec, err := Format{}.Open(lay.Meta)
			if err != nil {
				t.Fatal(err)
			}
			ranges, bound := dec.Extent(0, nil)
			src := make([]byte, format.Concat(ranges))
			at := int64(0)
			for _, r := range ranges {
				at += int64(copy(src[at:], file[r.Off:r.End()]))
			}
			dst := make([]byte, bound)
			runtime.GC()
			runtime.ReadMemStats(&m0)
			err = dec.Decode(0, nil, src, dst, format.WriterOptions{})
			runtime.ReadMemStats(&m1)
			if !errors.Is(err, format.ErrDamaged) || !strings.Contains(err.Error(), `column "image"`) {
				t.Fatalf("decoding: %v; want damage naming the column", err)
			}
			a := int64(m1.TotalAlloc - m0.TotalAlloc)
			if a > decodeBound(dec) {
				t.Errorf("decoding %d bytes allocated %d, its Working is %d", len(file), a, decodeBound(dec))
			}
			t.Logf("%d bytes: %v; allocated %.1f MB (Working %.1f MB)", len(file), err, float64(a)/1e6, float64(decodeBound(dec))/1e6)
		})
	}
}

// The figures, as a process's peak resident memory (VmHWM):
// decoding the 66 KB file whose ZSTD page states 1.6 MB and inflates to
// 2 GiB (a frame with no content size), and indexing the 65 KB token file
// of the same bomb as a token dataset, each in a process of its own (this
// test binary again), peak under 128 MB: the stated page and the codec's
// working beside the test binary's own (30 MB peak measured, 66 MB with
// the race detector). Before every codec was bounded they peaked at
// 7,583 MB and 7,588 MB (docs/format.md, "Bounds").
func TestBombPeakMemory(t *testing.T) {
	if name := os.Getenv("BRAND_BOMB"); name != "" {
		bombChild(name)
		return
	}
	if runtime.GOOS != "linux" {
		t.Skip("VmHWM is Linux's")
	}
	for _, name := range []string{hostiletest.ZSTDNoSize + "-bomb", "tokens-" + hostiletest.ZSTDNoSize + "-bomb"} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestBombPeakMemory$", "-test.count=1")
			cmd.Env = append(os.Environ(), "BRAND_BOMB="+name)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var size, hwm int64
			for line := range strings.Lines(string(out)) {
				fmt.Sscanf(line, "bomb %d bytes, VmHWM %d kB", &size, &hwm)
			}
			if hwm == 0 {
				t.Fatalf("no figure:\n%s", out)
			}
			t.Logf("%s: a file of %d bytes, peak %d MB", name, size, hwm>>10)
			if hwm>>10 > 128 {
				t.Errorf("%s: a file of %d bytes peaked at %d MB", name, size, hwm>>10)
			}
		})
	}
}

// bombChild decodes (or, for a token file, indexes) the corpus's file
// name and prints its size and the process's peak resident memory.
func bombChild(name string) {
	col, opt := hostiletest.Image, format.Options{}
	if strings.HasPrefix(name, "tokens-") {
		col, opt.Tokens = hostiletest.Tokens, "input_ids"
	}
	file := hostiletest.ParquetBomb(col, hostiletest.ZSTDNoSize, 1_600_000, 2<<30)
	st := newStore()
	st.put("f.parquet", file)
	lay, err := Format{}.Index(context.Background(), st, st.listing(), opt)
	if err == nil {
		dec, _ := Format{}.Open(lay.Meta)
		ranges, bound := dec.Extent(0, nil)
		err = dec.Decode(0, nil, file[ranges[0].Off:ranges[0].End()], make([]byte, bound), format.WriterOptions{})
	}
	fmt.Printf("%v\nbomb %d bytes, VmHWM %d kB\n", err, len(file), vmHWM())
}

// vmHWM is this process's peak resident memory in kB (Linux).
func vmHWM() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

// The reproduction of a damaged chunk, at the decoder: a Hub-style
// file of 60 rows written by DuckDB with ZSTD pages (and gzip), 1,000
// bytes in its middle overwritten, indexes (its footer is intact) and its
// one chunk decodes to damage naming the column, never to members served
// as good; intact, it decodes to its 60 rows. (Snappy has no checksum: an
// overwrite inside its literals decodes to other bytes, which nothing in
// the file can tell. Served, the damage is a 502: gateway's
// TestUndecodableChunkHTTP, integration's TestDamagedInPlaceOnMinIO.)
func TestDuckDBOverwritten(t *testing.T) {
	dir := duckdbFixtures(t)
	for _, codec := range []string{"zstd", "gzip"} {
		t.Run(codec, func(t *testing.T) {
			name := "hub-" + codec + ".parquet"
			good, err := os.ReadFile(dir + "/" + name)
			if err != nil {
				t.Fatal(err)
			}
			st := newStore()
			st.put(name, good)
			got, lay, dec := decodeAll(t, st, format.Options{})
			if len(got) != 60 || len(lay.Chunks) != 1 {
				t.Fatalf("%d rows in %d chunks", len(got), len(lay.Chunks))
			}
			bad := hostiletest.Overwrite(good, 1000)
			st.put(name, bad)
			ranges, bound := dec.Extent(0, nil)
			var src []byte
			for _, r := range ranges {
				src = append(src, bad[r.Off:r.End()]...)
			}
			err = dec.Decode(0, nil, src, make([]byte, bound), format.WriterOptions{})
			if !errors.Is(err, format.ErrDamaged) || !strings.Contains(err.Error(), `column "image"`) {
				t.Fatalf("1,000 bytes overwritten in the middle: %v; want damage naming the column", err)
			}
			t.Log(err)
		})
	}
}

// FuzzPages: a Parquet page of every codec, its bytes, its stated size
// and its rows the fuzzer's, in an image column (decoded as a gateway
// decodes a chunk) or a token column (counted as `brand index --tokens`
// counts it): no page makes either panic or fail other than as damage
// (decoding) or an invalid dataset (indexing), and none makes either
// allocate past its bound, whatever the page inflates to — decoding, the
// decoder's Working, which a gateway reserves before the read (it counts
// the codec's working beside the stated page); indexing, the page's
// stated size, its codec's working and the file twice over. Seeded with
// an honest page of each codec and each column, and hostiletest's bombs
// of each codec.
func FuzzPages(f *testing.F) {
	codecs := append([]string{""}, hostiletest.ParquetCodecs...)
	for i, c := range codecs {
		for _, tokens := range []bool{false, true} {
			col := hostiletest.Image
			if tokens {
				col = hostiletest.Tokens
			}
			p := hostiletest.Honest(col, c, 100)
			f.Add(uint8(i), tokens, uint32(p.States), uint16(p.Rows), p.Body)
		}
		if c == "" {
			continue
		}
		bomb := hostiletest.Bomb(c, hostiletest.BombSize(c))
		f.Add(uint8(i), false, uint32(1_600_000), uint16(1000), bomb)
		f.Add(uint8(i), true, uint32(1_600_000), uint16(1000), bomb)
	}
	f.Fuzz(func(t *testing.T, codec uint8, tokens bool, states uint32, rows uint16, body []byte) {
		c := codecs[int(codec)%len(codecs)]
		col, opt := hostiletest.Image, format.Options{}
		if tokens {
			col, opt.Tokens = hostiletest.Tokens, "input_ids"
		}
		// A stated page of at most 4 MiB keeps an input's run short; the
		// bound is relative to it.
		p := hostiletest.Page{Column: col, Codec: c, Rows: 1 + int(rows)%2000, States: int64(states % (4 << 20)), Body: body}
		file := hostiletest.Parquet(p)
		st := newStore()
		st.put("f.parquet", file)
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		lay, err := Format{}.Index(context.Background(), st, st.listing(), opt)
		runtime.ReadMemStats(&m1)
		if tokens {
			if a := int64(m1.TotalAlloc - m0.TotalAlloc); a > 2*int64(len(file))+p.States+inflateWorking(int8(hostiletestCodec(c)), p.States)+1<<20 {
				t.Fatalf("indexing %s allocated %d", p.Describe(), a)
			}
		}
		if err != nil {
			if !errors.Is(err, format.ErrInvalid) && !errors.Is(err, format.ErrUnsupported) {
				t.Fatalf("indexing %s: %v", p.Describe(), err)
			}
			return
		}
		dec, err := Format{}.Open(lay.Meta)
		if err != nil {
			t.Fatal(err)
		}
		ranges, bound := dec.Extent(0, nil)
		src := make([]byte, 0, format.Concat(ranges))
		for _, r := range ranges {
			src = append(src, file[r.Off:r.End()]...)
		}
		dst := make([]byte, bound)
		work := dec.(format.Working).Working(0, nil)
		runtime.ReadMemStats(&m0)
		err = dec.Decode(0, nil, src, dst, format.WriterOptions{})
		runtime.ReadMemStats(&m1)
		if a := int64(m1.TotalAlloc - m0.TotalAlloc); a > work+256<<10 {
			t.Fatalf("decoding %s allocated %d, its Working is %d", p.Describe(), a, work)
		}
		var ge *format.GrowError
		if err != nil && !errors.Is(err, format.ErrDamaged) && !errors.As(err, &ge) {
			t.Fatalf("decoding %s: %v", p.Describe(), err)
		}
	})
}

// hostiletestCodec is a hostiletest codec's number in a Parquet footer.
func hostiletestCodec(c string) int {
	switch c {
	case hostiletest.Snappy:
		return 1
	case hostiletest.Gzip:
		return 2
	case hostiletest.Brotli:
		return 4
	case hostiletest.LZ4Frame, hostiletest.LZ4Hadoop:
		return 5
	case hostiletest.ZSTD, hostiletest.ZSTDNoSize:
		return 6
	case hostiletest.LZ4Raw:
		return 7
	}
	return 0
}
