package npy

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/testsupport/pythontest"
)

func TestHeader(t *testing.T) {
	tests := []struct {
		descr string
		shape []int64
		dict  string
	}{
		{"<i4", []int64{5}, "{'descr': '<i4', 'fortran_order': False, 'shape': (5,), }"},
		{"|u1", []int64{2, 3, 4}, "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3, 4), }"},
		{"<f8", nil, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }"},
		{"<u2", []int64{1234567890123}, "{'descr': '<u2', 'fortran_order': False, 'shape': (1234567890123,), }"},
	}
	for _, tt := range tests {
		b, err := AppendHeader([]byte("x"), tt.descr, tt.shape)
		if err != nil {
			t.Fatal(err)
		}
		h := b[1:]
		if len(h) != HeaderLen(tt.descr, tt.shape) || len(h)%Align != 0 {
			t.Errorf("%v: %d bytes, HeaderLen %d", tt.shape, len(h), HeaderLen(tt.descr, tt.shape))
		}
		if string(h[:8]) != "\x93NUMPY\x01\x00" || int(h[8])|int(h[9])<<8 != len(h)-10 {
			t.Errorf("%v: preamble %q", tt.shape, h[:10])
		}
		if got := strings.TrimRight(string(h[10:]), " \n"); got != tt.dict || h[len(h)-1] != '\n' {
			t.Errorf("dict %q, want %q", got, tt.dict)
		}
		got, off, err := ReadHeader(h)
		if err != nil || off != len(h) || got.Descr != tt.descr || got.Fortran || !slices.Equal(got.Shape, tt.shape) {
			t.Errorf("%v: read back %+v at %d: %v", tt.shape, got, off, err)
		}
	}
	long := make([]int64, 7000)
	for i := range long {
		long[i] = 1 << 40
	}
	if _, err := AppendHeader(nil, "<i4", long); err != ErrTooLong {
		t.Fatal(err)
	}
}

// TestAppendInPlace: a header appended to a slice with room is written
// there, as the pack stage lays out a member in its buffer.
func TestAppendInPlace(t *testing.T) {
	buf := make([]byte, 256)
	h, err := AppendHeader(buf[64:64], "<i4", []int64{2048})
	if err != nil || &h[0] != &buf[64] || !bytes.Equal(buf[64:64+len(h)], h) {
		t.Fatalf("not written in place: %v", err)
	}
}

// TestReadHeader: what numpy.lib.format reads besides what numpy writes
// today — another key order, double quotes, Python 2's longs, versions
// 2.0 and 3.0 — and what it refuses.
func TestReadHeader(t *testing.T) {
	v1 := func(dict string) []byte {
		b := []byte(v1)
		b = append(b, byte(len(dict)), byte(len(dict)>>8))
		return append(b, dict...)
	}
	v2 := func(dict string) []byte {
		b := []byte(magic + "\x02\x00")
		b = append(b, byte(len(dict)), byte(len(dict)>>8), 0, 0)
		return append(b, dict...)
	}
	good := []struct {
		b    []byte
		want Header
	}{
		{v1("{'shape': (2, 3), 'fortran_order': True, 'descr': '<f4'}   \n"), Header{"<f4", true, []int64{2, 3}}},
		{v1(`{"descr": "<i8", "fortran_order": False, "shape": (3L, 4L), }` + "\n"), Header{"<i8", false, []int64{3, 4}}},
		{v1("{'descr':'|u1','fortran_order':False,'shape':(7,)}\n"), Header{"|u1", false, []int64{7}}},
		{v1("{'descr': '<f8', 'fortran_order': False, 'shape': (), }\n"), Header{"<f8", false, []int64{}}},
		{v2("{'descr': '<i4', 'fortran_order': False, 'shape': (70000,), }\n"), Header{"<i4", false, []int64{70000}}},
	}
	for _, tt := range good {
		got, off, err := ReadHeader(tt.b)
		if err != nil || off != len(tt.b) || got.Descr != tt.want.Descr || got.Fortran != tt.want.Fortran || !slices.Equal(got.Shape, tt.want.Shape) {
			t.Errorf("%q: %+v at %d, %v; want %+v", tt.b, got, off, err, tt.want)
		}
	}
	bad := [][]byte{
		nil,
		[]byte("\x93NUMPX\x01\x00\x10\x00"),
		[]byte(magic + "\x04\x00\x00\x00"),
		v1("{'descr': '<i4', 'fortran_order': False, 'shape': (5,), }")[:30],
		v1("{'descr': '<i4', 'fortran_order': False, 'shape': (5), }"),
		v1("{'descr': '<i4', 'fortran_order': False}"),
		v1("{'descr': '<i4', 'fortran_order': False, 'shape': (5,), 'extra': 1}"),
		v1("{'descr': '<i4', 'descr': '<i4', 'fortran_order': False, 'shape': (5,)}"),
		v1("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (5,)}"),
		v1("{'descr': '<i4', 'fortran_order': 0, 'shape': (5,)}"),
		v1("{'descr': '<i4', 'fortran_order': False, 'shape': (-5,)}"),
		v1("{'descr': '<i4' 'fortran_order': False, 'shape': (5,)}"),
		v1("{'descr': '<i4', 'fortran_order': False, 'shape': (5,)} x"),
		v1("{'descr': '<i4', 'fortran_order': False, 'shape': (99999999999999999999,)}"),
	}
	for _, b := range bad {
		if h, _, err := ReadHeader(b); !errors.Is(err, ErrFormat) {
			t.Errorf("%q: %+v, %v", b, h, err)
		}
	}
}

func TestRead(t *testing.T) {
	h, _ := AppendHeader(nil, "<i4", []int64{2, 3})
	data := make([]byte, 24)
	b := append(h, data...)
	got, d, err := Read(b)
	if err != nil || got.Count() != 6 || len(d) != 24 || &d[0] != &b[len(h)] {
		t.Fatalf("%+v, %d bytes: %v", got, len(d), err)
	}
	for _, n := range []int{23, 25, 0} {
		if _, _, err := Read(append(h[:len(h):len(h)], make([]byte, n)...)); !errors.Is(err, ErrFormat) {
			t.Errorf("%d data bytes of 24: %v", n, err)
		}
	}
	obj, _ := AppendHeader(nil, "|O", []int64{1})
	if _, _, err := Read(append(obj, make([]byte, 8)...)); !errors.Is(err, ErrFormat) {
		t.Errorf("an object array read in place: %v", err)
	}
	huge, _ := AppendHeader(nil, "<i8", []int64{1 << 40, 1 << 40})
	if _, _, err := Read(huge); !errors.Is(err, ErrFormat) {
		t.Errorf("a shape past int64: %v", err)
	}
	for descr, want := range map[string]int{"|u1": 1, "<i4": 4, ">f8": 8, "<c16": 16, "<U3": 12, "|S5": 5, "<M8[ns]": 8, "<m8": 8, "|O": 0, "<x4": 0, "": 0, "<i": 0} {
		if got := ItemSize(descr); got != want {
			t.Errorf("ItemSize(%q) = %d, want %d", descr, got, want)
		}
	}
}

// golden is testdata/numpy_headers.json: headers numpy wrote.
type golden struct {
	Numpy string `json:"numpy"`
	Cases []struct {
		Descr   string  `json:"descr"`
		Shape   []int64 `json:"shape"`
		Fortran bool    `json:"fortran"`
		Version string  `json:"version"`
		Brand   bool    `json:"brand"`
		Header  string  `json:"header"`
	} `json:"cases"`
}

// checkGolden holds the codec to the headers numpy wrote: the reader
// reads each as numpy meant it; the writer writes, for every array of
// version 1.0 and C order, numpy's dict, at numpy's length or the 64
// bytes shorter that numpy's room for growing leaves out — and byte for
// byte numpy's header for each shape Brand writes.
func checkGolden(t *testing.T, g golden) {
	t.Helper()
	for _, c := range g.Cases {
		name := fmt.Sprintf("%s%v v%s", c.Descr, c.Shape, c.Version)
		if c.Fortran {
			name += " F"
		}
		want, err := hex.DecodeString(c.Header)
		if err != nil {
			t.Fatal(err)
		}
		h, off, err := ReadHeader(want)
		if err != nil || off != len(want) || off%Align != 0 || h.Descr != c.Descr || h.Fortran != c.Fortran || !slices.Equal(h.Shape, c.Shape) {
			t.Errorf("%s: read %+v at %d: %v", name, h, off, err)
		}
		if c.Version != "1.0" || c.Fortran {
			continue
		}
		got, err := AppendHeader(nil, c.Descr, c.Shape)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		dict := func(b []byte) string { return strings.TrimRight(string(b[10:]), " \n") }
		switch {
		case bytes.Equal(got, want):
		case c.Brand:
			t.Errorf("%s: header\n%q, numpy writes\n%q", name, got, want)
		case dict(got) != dict(want) || len(got) != len(want)-Align:
			t.Errorf("%s: header\n%q, numpy writes\n%q", name, got, want)
		}
	}
}

func TestGolden(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "numpy_headers.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) < 30 {
		t.Fatalf("%d golden cases", len(g.Cases))
	}
	checkGolden(t, g)
}

// TestNumPy holds the codec to the numpy at hand (scripts/ensure-numpy.sh
// installs it): the headers it writes today pass checkGolden, and
// numpy.load reads every array the writer writes as the Go side meant it.
func TestNumPy(t *testing.T) {
	py := pythontest.Need(t, "scripts/ensure-numpy.sh", "numpy")
	run := func(args ...string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, py, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
		}
		return out
	}
	var g golden
	if err := json.Unmarshal(run(filepath.Join("testdata", "numpy_headers.py")), &g); err != nil {
		t.Fatal(err)
	}
	t.Logf("numpy %s", g.Numpy)
	checkGolden(t, g)

	type array struct {
		Descr   string  `json:"descr"`
		Shape   []int64 `json:"shape"`
		Fortran bool    `json:"fortran"`
		Data    string  `json:"data"`
	}
	dir := t.TempDir()
	wrote := map[string]array{}
	shapes := [][]int64{{}, {0}, {5}, {2, 3, 4}, {3, 7, 10}, {1, 1, 3}, {2, 0, 3}}
	for _, descr := range []string{"|u1", "|i1", "<i2", "<u2", "<i4", "<u4", "<i8", "<f4", "<f8"} {
		for i, shape := range shapes {
			h, err := AppendHeader(nil, descr, shape)
			if err != nil {
				t.Fatal(err)
			}
			count := Header{Shape: shape}.Count()
			data := make([]byte, count*int64(ItemSize(descr)))
			for j := range data {
				data[j] = byte(j*7 + i)
			}
			name := fmt.Sprintf("%s-%d.npy", strings.NewReplacer("<", "le-", "|", "na-").Replace(descr), i)
			if err := os.WriteFile(filepath.Join(dir, name), append(h, data...), 0o644); err != nil {
				t.Fatal(err)
			}
			wrote[name] = array{descr, shape, false, hex.EncodeToString(data)}
		}
	}
	var read map[string]array
	if err := json.Unmarshal(run(filepath.Join("testdata", "numpy_load.py"), dir), &read); err != nil {
		t.Fatal(err)
	}
	if len(read) != len(wrote) {
		t.Fatalf("numpy read %d arrays of %d", len(read), len(wrote))
	}
	for name, w := range wrote {
		r := read[name]
		if r.Descr != w.Descr || !slices.Equal(r.Shape, w.Shape) || r.Fortran || r.Data != w.Data {
			t.Errorf("%s: numpy read %+v, the writer wrote %+v", name, r, w)
		}
	}
}
