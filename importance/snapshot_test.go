package importance

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"testing"
)

func TestSeal(t *testing.T) {
	ds := dataset{"0123456789abcdef", 5}
	acc0, _ := NewAccumulator(ds, "job", 0)
	mustAdd(t, acc0, []int{0, 2}, []float32{2, 4})
	s0, err := Seal(nil, acc0)
	if err != nil {
		t.Fatal(err)
	}
	// Never-scored samples take the mean of the reported losses.
	if got, want := scoresOf(s0), []float32{2, 3, 4, 3, 3}; !equalScores(got, want) {
		t.Errorf("first seal: %v, want %v", got, want)
	}

	acc1, _ := NewAccumulator(ds, "job", 1)
	mustAdd(t, acc1, []int{1, 2}, []float32{9, 0})
	s1, err := Seal(s0, acc1)
	if err != nil {
		t.Fatal(err)
	}
	// Reported samples take their new loss, the others keep the old score.
	if got, want := scoresOf(s1), []float32{2, 9, 0, 3, 3}; !equalScores(got, want) {
		t.Errorf("second seal: %v, want %v", got, want)
	}
	if s1.Epoch() != 1 || s1.Job() != "job" || s1.IndexID() != ds.id {
		t.Errorf("identity: epoch %d job %q index %s", s1.Epoch(), s1.Job(), s1.IndexID())
	}

	// Nothing reported and no previous snapshot: every score is 1.
	empty, _ := NewAccumulator(ds, "job", 0)
	s, err := Seal(nil, empty)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := scoresOf(s), []float32{1, 1, 1, 1, 1}; !equalScores(got, want) {
		t.Errorf("empty seal: %v, want %v", got, want)
	}

	// A previous snapshot of another job or index is refused.
	for _, acc := range []*Accumulator{
		must(NewAccumulator(ds, "other", 1)),
		must(NewAccumulator(dataset{"fedcba9876543210", 5}, "job", 1)),
		must(NewAccumulator(dataset{"0123456789abcdef", 6}, "job", 1)),
	} {
		if _, err := Seal(s0, acc); !errors.Is(err, ErrMismatch) {
			t.Errorf("Seal onto %s/%s/%d: %v, want ErrMismatch", acc.IndexID(), acc.Job(), acc.NumSamples(), err)
		}
	}
}

func TestSealIsContentAddressed(t *testing.T) {
	// Two gateways receive the same reports in different batches and orders.
	ds := dataset{"0123456789abcdef", 6}
	a, _ := NewAccumulator(ds, "job", 4)
	b, _ := NewAccumulator(ds, "job", 4)
	mustAdd(t, a, []int{0, 1, 2}, []float32{1, 2, 3})
	mustAdd(t, a, []int{5, 1}, []float32{0.5, 2.5})
	mustAdd(t, b, []int{1}, []float32{2.5})
	mustAdd(t, b, []int{5, 2, 0, 1}, []float32{0.5, 3, 1, 2})
	sa, _ := Seal(nil, a)
	sb, _ := Seal(nil, b)
	if sa.Version() != sb.Version() || !bytes.Equal(sa.MarshalBinary(), sb.MarshalBinary()) {
		t.Fatalf("versions %s and %s differ", sa.Version(), sb.Version())
	}
	if len(sa.Version()) != 16 {
		t.Errorf("version %q: want 16 hex digits", sa.Version())
	}
	// A different epoch is a different snapshot.
	c, _ := NewAccumulator(ds, "job", 5)
	_ = c.Merge(a) // different epoch: refused, c stays empty
	mustAdd(t, c, []int{0, 1, 2, 5}, []float32{1, 2.5, 3, 0.5})
	sc, _ := Seal(nil, c)
	if sc.Version() == sa.Version() {
		t.Errorf("epochs 4 and 5 share version %s", sa.Version())
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	ds := dataset{"0123456789abcdef", 4}
	s, err := NewSnapshot(ds, "resnet-50.run_2", 7, []float32{0, 1.5, float32(math.Copysign(0, -1)), math.MaxFloat32})
	if err != nil {
		t.Fatal(err)
	}
	enc := s.MarshalBinary()
	d, err := Decode(enc, ds)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(d.MarshalBinary(), enc) || d.Version() != s.Version() || d.Epoch() != 7 || d.Job() != "resnet-50.run_2" {
		t.Errorf("round trip changed the snapshot: %s %d %q", d.Version(), d.Epoch(), d.Job())
	}
	if math.Signbit(float64(d.Score(2))) {
		t.Error("-0 score kept its sign; equal scores must encode alike")
	}
	if got, want := s.Key(), "_brand/importance/resnet-50.run_2/"+s.Version()+".brandimp"; got != want {
		t.Errorf("Key = %q, want %q", got, want)
	}
}

func TestDecodeRejects(t *testing.T) {
	ds := dataset{"0123456789abcdef", 3}
	good := must(NewSnapshot(ds, "job", 1, []float32{1, 2, 3})).MarshalBinary()

	// resum recomputes the CRC so that a test reaches the check behind it.
	resum := func(b []byte) []byte {
		b = bytes.Clone(b)
		binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
		return b
	}
	edit := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		return b
	}
	scoreAt := len(good) - 4 - 12 // first score
	tests := []struct {
		name string
		data []byte
		ds   Dataset
		want error
	}{
		{"empty", nil, ds, ErrCorrupt},
		{"bad magic", edit(func(b []byte) { b[0] = 'X' }), ds, ErrCorrupt},
		{"version 2", resum(edit(func(b []byte) { b[8] = 2 })), ds, ErrCorrupt},
		{"flipped score bit", edit(func(b []byte) { b[scoreAt] ^= 1 }), ds, ErrCorrupt},
		{"flipped CRC bit", edit(func(b []byte) { b[len(b)-1] ^= 0x80 }), ds, ErrCorrupt},
		{"truncated", good[:len(good)-1], ds, ErrCorrupt},
		{"truncated and resummed", resum(append(bytes.Clone(good[:len(good)-8]), 0, 0, 0, 0)), ds, ErrCorrupt},
		{"trailing bytes", resum(append(bytes.Clone(good), 0, 0, 0, 0)), ds, ErrCorrupt},
		{"header only", resum([]byte("BRANDIMP\x01\x00\x00\x00\xff\xff\x00\x00")), ds, ErrCorrupt},
		{"NaN score", resum(edit(func(b []byte) {
			binary.LittleEndian.PutUint32(b[scoreAt:], math.Float32bits(float32(math.NaN())))
		})), ds, ErrCorrupt},
		{"negative score", resum(edit(func(b []byte) {
			binary.LittleEndian.PutUint32(b[scoreAt:], math.Float32bits(-1))
		})), ds, ErrCorrupt},
		{"bad job name", resum(edit(func(b []byte) { b[12+2+16+2] = '/' })), ds, ErrCorrupt},
		{"other index", good, dataset{"fedcba9876543210", 3}, ErrMismatch},
		{"wrong n for the index", good, dataset{"0123456789abcdef", 4}, ErrMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Decode(tt.data, tt.ds); !errors.Is(err, tt.want) {
				t.Errorf("Decode = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestNewSnapshotRejects(t *testing.T) {
	ds := dataset{"id", 2}
	for _, tt := range []struct {
		name   string
		job    string
		scores []float32
	}{
		{"short", "job", []float32{1}},
		{"NaN", "job", []float32{1, float32(math.NaN())}},
		{"negative", "job", []float32{-1, 1}},
		{"inf", "job", []float32{float32(math.Inf(1)), 1}},
		{"job", "", []float32{1, 1}},
	} {
		if _, err := NewSnapshot(ds, tt.job, 0, tt.scores); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tt.name, err)
		}
	}
}

func TestValidJobName(t *testing.T) {
	long := string(bytes.Repeat([]byte{'a'}, MaxJobNameLen))
	for _, tt := range []struct {
		job string
		ok  bool
	}{
		{"job", true}, {"ResNet-50_v2.1", true}, {long, true}, {"...", true},
		{"", false}, {".", false}, {"..", false}, {"a/b", false}, {"a b", false},
		{"é", false}, {long + "a", false}, {"a\x00", false},
	} {
		if err := ValidJobName(tt.job); (err == nil) != tt.ok || err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidJobName(%q) = %v, want ok %v", tt.job, err, tt.ok)
		}
	}
}

func scoresOf(s *Snapshot) []float32 {
	out := make([]float32, s.NumSamples())
	for i := range out {
		out[i] = s.Score(i)
	}
	return out
}

func equalScores(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
