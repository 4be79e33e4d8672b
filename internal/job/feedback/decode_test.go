package feedback

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/server/memory"
)

// got lists records as "id:loss".
func (r *records) String() string {
	var parts []string
	for i := range r.n {
		rec := r.at(i)
		parts = append(parts, fmt.Sprintf("%d:%v", rec.id, rec.loss))
	}
	return strings.Join(parts, " ")
}

func TestDecodeJSON(t *testing.T) {
	ds := storedDataset(t, 10)
	tests := []struct {
		name, body string
		want       string // records; "" with bad set
		bad        string // a word the refusal contains
	}{
		{"ids", `{"ids":[1,2],"losses":[0.5,3]}`, "1:0.5 2:3", ""},
		{"an object cut short", `{`, "", "ends inside the JSON object"},
		{"a list cut short", `{"ids":[`, "", "ends inside the JSON object"},
		{"losses first", `{"losses":[0.5,3],"ids":[1,2]}`, "1:0.5 2:3", ""},
		{"keys", `{"keys":["d/0/9","d/0/0"],"losses":[1,0]}`, "9:1 0:0", ""},
		{"null fields are absent", `{"keys":null,"ids":[4],"losses":[2]}`, "4:2", ""},
		{"empty", `{"ids":[],"losses":[]}`, "", ""},
		{"no losses, no ids", `{"ids":[]}`, "", ""},
		{"whitespace after", "{\"ids\":[1],\"losses\":[1]}\n\t ", "1:1", ""},
		{"a loss as float32", `{"ids":[1],"losses":[0.1]}`, "1:0.1", ""},
		{"trailing garbage", `{"ids":[1],"losses":[1]} garbage`, "", "after"},
		{"two objects", `{"ids":[1],"losses":[1]}{}`, "", "after"},
		{"a field twice", `{"ids":[1],"ids":[2],"losses":[1]}`, "", "twice"},
		{"unknown field", `{"ids":[1],"losses":[1],"x":1}`, "", "unknown field"},
		{"keys and ids", `{"ids":[0],"keys":["d/0/1"],"losses":[1]}`, "", "either"},
		{"neither", `{"losses":[1]}`, "", "either"},
		{"more losses", `{"ids":[1],"losses":[1,2]}`, "", "more losses"},
		{"fewer losses", `{"ids":[1,2],"losses":[1]}`, "", "1 losses"},
		{"more ids after losses", `{"losses":[1],"ids":[1,2]}`, "", "more ids"},
		{"no losses", `{"ids":[1]}`, "", "0 losses"},
		{"fractional ID", `{"ids":[1.5],"losses":[1]}`, "", "sample ID"},
		{"negative ID", `{"ids":[-1],"losses":[1]}`, "", "sample ID"},
		{"ID as exponent", `{"ids":[1e2],"losses":[1]}`, "", "sample ID"},
		{"ID past 2^32", `{"ids":[4294967296],"losses":[1]}`, "", "2^32"},
		{"ID past the dataset", `{"ids":[10],"losses":[1]}`, "", "not in [0, 10)"},
		{"null ID", `{"ids":[null],"losses":[1]}`, "", "sample ID"},
		{"unknown key", `{"keys":["nope"],"losses":[1]}`, "", "unknown sample key"},
		{"key not a string", `{"keys":[3],"losses":[1]}`, "", "where a string was expected"},
		{"escaped key", `{"keys":["d/0/\u0031"],"losses":[1]}`, "1:1", ""},
		{"escaped field name", `{"\u0069ds":[2],"losses":[1]}`, "2:1", ""},
		{"a trailing comma", `{"ids":[1,],"losses":[1]}`, "", "number"},
		{"a trailing comma in the object", `{"ids":[1],"losses":[1],}`, "", "string"},
		{"no colon", `{"ids" [1],"losses":[1]}`, "", "':'"},
		{"a bare word", `{"ids":[1],"losses":[nan]}`, "", "not a loss"},
		{"a number JSON does not have", `{"ids":[1],"losses":[.5]}`, "", "not a loss"},
		{"a leading zero", `{"ids":[01],"losses":[1]}`, "", "sample ID"},
		{"a control character", "{\"keys\":[\"s\x01\"],\"losses\":[1]}", "", "control character"},
		{"null loss", `{"ids":[1],"losses":[null]}`, "", "not a loss"},
		{"string loss", `{"ids":[1],"losses":["1"]}`, "", "where a number was expected"},
		{"negative loss", `{"ids":[1],"losses":[-1]}`, "", "finite and >= 0"},
		{"loss past float64", `{"ids":[1],"losses":[1e400]}`, "", "not a loss"},
		{"loss past float32", `{"ids":[1],"losses":[1e39]}`, "", "finite and >= 0"},
		{"not an array", `{"ids":1,"losses":[1]}`, "", "as an array"},
		{"not an object", `[1]`, "", "object"},
		{"cut short", `{"ids":[1],"losses":[1`, "", "JSON"},
		{"empty body", ``, "", "JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := decoder{ds: ds, maxRecords: 100}.decode("application/json", iotest.HalfReader(strings.NewReader(tc.body)))
			if tc.bad != "" {
				if !errors.Is(err, ErrBadFeedback) || !strings.Contains(err.Error(), tc.bad) {
					t.Fatalf("decode = %v, %v; want ErrBadFeedback saying %q", recs, err, tc.bad)
				}
				return
			}
			if err != nil || recs.String() != tc.want {
				t.Fatalf("decode = %q, %v; want %q", recs, err, tc.want)
			}
		})
	}
}

// binaryBody encodes (id, loss) records.
func binaryBody(ids []uint32, losses []float32) []byte {
	var b []byte
	for i, id := range ids {
		b = binary.LittleEndian.AppendUint32(b, id)
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(losses[i]))
	}
	return b
}

func TestDecodeBinary(t *testing.T) {
	ds := storedDataset(t, 1000)
	ids := make([]uint32, 3*blockLen+5) // across blocks and read buffers
	losses := make([]float32, len(ids))
	for i := range ids {
		ids[i], losses[i] = uint32(i%1000), float32(i)/8
	}
	body := binaryBody(ids, losses)
	for _, r := range []struct {
		name string
		r    io.Reader
	}{{"whole", bytes.NewReader(body)}, {"a byte at a time", iotest.OneByteReader(bytes.NewReader(body))}, {"halves", iotest.HalfReader(bytes.NewReader(body))}} {
		t.Run(r.name, func(t *testing.T) {
			recs, err := decoder{ds: ds, maxRecords: len(ids)}.decode("application/octet-stream", r.r)
			if err != nil || recs.n != len(ids) {
				t.Fatalf("decode: %v, %d records; want %d", err, recs.n, len(ids))
			}
			for i := range ids {
				if rec := recs.at(i); rec.id != ids[i] || rec.loss != losses[i] {
					t.Fatalf("record %d = %v, want %d:%v", i, *rec, ids[i], losses[i])
				}
			}
		})
	}
	refusals := []struct {
		name, bad string
		body      []byte
		max       int
	}{
		{"torn record", "8-byte records", body[:12], 10},
		{"unknown ID", "not in [0, 1000)", binaryBody([]uint32{1000}, []float32{1}), 10},
		{"NaN", "finite", binaryBody([]uint32{1}, []float32{float32(math.NaN())}), 10},
		{"+Inf", "finite", binaryBody([]uint32{1}, []float32{float32(math.Inf(1))}), 10},
		{"negative", "finite", binaryBody([]uint32{1}, []float32{-1}), 10},
		{"too many records", "more than 2 records", body[:24], 2},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decoder{ds: ds, maxRecords: tc.max}.decode("application/octet-stream", bytes.NewReader(tc.body))
			if !errors.Is(err, ErrBadFeedback) || !strings.Contains(err.Error(), tc.bad) {
				t.Fatalf("decode: %v; want ErrBadFeedback saying %q", err, tc.bad)
			}
		})
	}
}

// failingReader fails after its bytes.
type failingReader struct{ r io.Reader }

func (f failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		err = errors.New("connection reset")
	}
	return n, err
}

func TestDecodeBounds(t *testing.T) {
	ds := storedDataset(t, 10)
	d := decoder{ds: ds, maxRecords: MaxBodyBytes}
	big := bytes.Repeat([]byte(" "), MaxBodyBytes) // whitespace past the bound, before the object ends
	tests := []struct {
		name, ctype, bad string
		body             io.Reader
	}{
		{"JSON over the bound", "application/json", "over 8388608 bytes", io.MultiReader(strings.NewReader(`{"ids":[1],`), bytes.NewReader(big), strings.NewReader(`"losses":[1]}`))},
		{"binary over the bound", "application/octet-stream", "over 8388608 bytes", bytes.NewReader(make([]byte, MaxBodyBytes+8))},
		{"a body cut by the network", "application/json", "connection reset", failingReader{strings.NewReader(`{"ids":[1],`)}},
		{"many records", "application/json", "more than 3 records", strings.NewReader(`{"ids":[1,1,1,1],"losses":[1,1,1,1]}`)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := d
			if strings.Contains(tc.bad, "records") {
				d.maxRecords = 3
			}
			if _, err := d.decode(tc.ctype, tc.body); !errors.Is(err, ErrBadFeedback) || !strings.Contains(err.Error(), tc.bad) {
				t.Fatalf("decode: %v; want ErrBadFeedback saying %q", err, tc.bad)
			}
		})
	}
	// Exactly at the bound is accepted.
	exact := bytes.Repeat([]byte(" "), MaxBodyBytes-len(`{"ids":[1],"losses":[1]}`))
	if _, err := d.decode("application/json", io.MultiReader(strings.NewReader(`{"ids":[1],"losses":[1]}`), bytes.NewReader(exact))); err != nil {
		t.Fatalf("a body of exactly %d bytes: %v", MaxBodyBytes, err)
	}
}

// TestDecodeAllocations: decoding allocates the records' blocks and a few
// buffers, never a value an element. Garbage an element (there was 16
// bytes of it) is collected, but between collections it grows a body's
// heap to the GC's goal, twice what the records hold: TestFeedbackMemory
// measures that, this says where it comes from.
func TestDecodeAllocations(t *testing.T) {
	const n = 8 * blockLen
	ids := make([]uint32, n)
	losses := make([]float32, n)
	for i := range ids {
		ids[i], losses[i] = uint32(i%100), float32(i%10)+0.5
	}
	d := decoder{ds: storedDataset(t, 100), maxRecords: n}
	for _, tc := range []struct {
		ctype string
		body  []byte
	}{
		{"application/json", jsonBody(n, 100)},
		{"application/octet-stream", binaryBody(ids, losses)},
	} {
		allocs := testing.AllocsPerRun(3, func() {
			if _, err := d.decode(tc.ctype, bytes.NewReader(tc.body)); err != nil {
				t.Fatal(err)
			}
		})
		if limit := float64(n/blockLen + 64); allocs > limit {
			t.Errorf("%s: %d records take %.0f allocations, want at most %.0f (%d blocks and a few buffers)", tc.ctype, n, allocs, limit, n/blockLen)
		}
	}
}

// jsonBody is a JSON body of n records, IDs cycling through samples.
func jsonBody(n, samples int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"ids":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(i % samples))
	}
	b.WriteString(`],"losses":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatFloat(float64(i%10)+0.5, 'g', -1, 64))
	}
	b.WriteString("]}")
	return b.Bytes()
}

// benchDecode decodes body as contentType, over and over.
func benchDecode(b *testing.B, ds *catalog.Dataset, contentType string, body []byte) {
	d := decoder{ds: ds, maxRecords: 1 << 20}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.decode(contentType, bytes.NewReader(body)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeJSON decodes a JSON body of a million records (7 MB):
// the allocation per op is what the body costs beside the 8 MB its
// records hold.
func BenchmarkDecodeJSON(b *testing.B) {
	benchDecode(b, storedDataset(b, 100), "application/json", jsonBody(1<<20, 100))
}

// BenchmarkDecodeBinary decodes a binary body of a million records (8 MB).
func BenchmarkDecodeBinary(b *testing.B) {
	ids := make([]uint32, 1<<20)
	losses := make([]float32, len(ids))
	for i := range ids {
		ids[i], losses[i] = uint32(i%100000), float32(i%97)/8
	}
	benchDecode(b, storedDataset(b, 100000), "application/octet-stream", binaryBody(ids, losses))
}

// TestDecodePooledBlocks: blocks of records come from the node's pools
// (bytes seen as records) and go back when the records are applied; a
// body decoded into blocks another body used holds its own records.
func TestDecodePooledBlocks(t *testing.T) {
	ds := storedDataset(t, 1000)
	mem := memory.New(memory.Config{Budget: memory.Budget{Copies: 1 << 20, Decodes: 1 << 20}, MaxWait: time.Second, Busy: ErrBusy})
	d := decoder{ds: ds, maxRecords: 1 << 20, pool: &blocks{bufs: mem}}
	for round := range 3 {
		ids := make([]uint32, 2*blockLen+round)
		losses := make([]float32, len(ids))
		for i := range ids {
			ids[i], losses[i] = uint32((i+round)%1000), float32(i*(round+1))/8
		}
		recs, err := d.decode("application/octet-stream", bytes.NewReader(binaryBody(ids, losses)))
		if err != nil || recs.n != len(ids) {
			t.Fatalf("round %d: %v, %d records", round, err, recs.n)
		}
		for i := range ids {
			if rec := recs.at(i); rec.id != ids[i] || rec.loss != losses[i] {
				t.Fatalf("round %d: record %d = %v, want %d:%v", round, i, *rec, ids[i], losses[i])
			}
		}
		recs.release()
	}
}
