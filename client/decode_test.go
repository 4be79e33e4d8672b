package client_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/brandgw/brand/client"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// member is a tar entry for building test archives; typ 0 means regular.
type member struct {
	name string
	data string
	typ  byte
}

func buildTar(t testing.TB, members []member, format tar.Format) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, m := range members {
		h := &tar.Header{Name: m.name, Mode: 0o644, Size: int64(len(m.data)), Typeflag: tar.TypeReg, Format: format}
		if m.typ != 0 {
			h.Typeflag, h.Size = m.typ, 0
			if m.typ == tar.TypeSymlink {
				h.Linkname = "elsewhere"
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, m.data); err != nil && m.typ == 0 {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// renderSamples prints samples one file per line, sorted by extension within a
// sample, for comparisons and golden files.
func renderSamples(samples []client.Sample) string {
	var b strings.Builder
	for i, s := range samples {
		for _, ext := range slices.Sorted(maps.Keys(s.Files)) {
			fmt.Fprintf(&b, "%d %s [%s] %q\n", i, s.Key, ext, s.Files[ext])
		}
	}
	return b.String()
}

func TestDecodeSamples(t *testing.T) {
	long := strings.Repeat("deep/", 30) + "x"
	tests := []struct {
		name    string
		members []member
		format  tar.Format
		want    string
	}{
		{"empty archive", nil, tar.FormatUSTAR, ""},
		{"multi-member samples", []member{
			{name: "a.jpg", data: "A"}, {name: "a.cls", data: "1"}, {name: "b.jpg", data: "B"}, {name: "b.cls", data: "2"},
		}, tar.FormatUSTAR, "0 a [cls] \"1\"\n0 a [jpg] \"A\"\n1 b [cls] \"2\"\n1 b [jpg] \"B\"\n"},
		{"keys with slashes and dotted directories", []member{
			{name: "train/n01/x.JPEG", data: "x"}, {name: "train/n01/x.seg.png", data: "s"}, {name: "v1.2/y.txt", data: "y"},
		}, tar.FormatUSTAR, "0 train/n01/x [JPEG] \"x\"\n0 train/n01/x [seg.png] \"s\"\n1 v1.2/y [txt] \"y\"\n"},
		{"member without extension", []member{{name: "dir/README", data: "r"}}, tar.FormatUSTAR, "0 dir/README [] \"r\"\n"},
		{"same key apart is two samples", []member{
			{name: "a.jpg", data: "1"}, {name: "b.jpg", data: "2"}, {name: "a.cls", data: "3"},
		}, tar.FormatUSTAR, "0 a [jpg] \"1\"\n1 b [jpg] \"2\"\n2 a [cls] \"3\"\n"},
		{"adjacent duplicates stay two samples", []member{
			{name: "a.jpg", data: "1"}, {name: "a.cls", data: "x"}, {name: "a.jpg", data: "2"}, {name: "a.cls", data: "y"},
		}, tar.FormatUSTAR, "0 a [cls] \"x\"\n0 a [jpg] \"1\"\n1 a [cls] \"y\"\n1 a [jpg] \"2\"\n"},
		{"directories and links skipped", []member{
			{name: "d/", typ: tar.TypeDir}, {name: "d/a.jpg", data: "A"}, {name: "d/a.lnk", typ: tar.TypeSymlink}, {name: "d/a.cls", data: "1"},
		}, tar.FormatUSTAR, "0 d/a [cls] \"1\"\n0 d/a [jpg] \"A\"\n"},
		{"PAX long names", []member{{name: long + ".jpg", data: "L"}, {name: long + ".cls", data: "9"}}, tar.FormatPAX,
			"0 " + long + " [cls] \"9\"\n0 " + long + " [jpg] \"L\"\n"},
		{"GNU long names", []member{{name: long + ".jpg", data: "L"}}, tar.FormatGNU, "0 " + long + " [jpg] \"L\"\n"},
		{"empty file", []member{{name: "e.txt", data: ""}}, tar.FormatUSTAR, "0 e [txt] \"\"\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := client.DecodeSamples(bytes.NewReader(buildTar(t, tt.members, tt.format)))
			if err != nil {
				t.Fatal(err)
			}
			if s := renderSamples(got); s != tt.want {
				t.Errorf("got\n%s\nwant\n%s", s, tt.want)
			}
		})
	}
}

func TestDecodeSamplesErrors(t *testing.T) {
	whole := buildTar(t, []member{{name: "a.jpg", data: strings.Repeat("x", 2000)}}, tar.FormatUSTAR)
	tests := []struct {
		name   string
		input  []byte
		target error // nil: any error
	}{
		{"cut inside a member", whole[:1024], io.ErrUnexpectedEOF},
		{"cut inside a header", whole[:300], io.ErrUnexpectedEOF},
		{"not a tar", bytes.Repeat([]byte("garbage!"), 128), tar.ErrHeader},
		{"hidden file has no key", buildTar(t, []member{{name: "d/.hidden", data: "h"}}, tar.FormatUSTAR), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := client.DecodeSamples(bytes.NewReader(tt.input))
			if err == nil || (tt.target != nil && !errors.Is(err, tt.target)) {
				t.Errorf("error %v; want %v", err, tt.target)
			}
		})
	}
}

// TestDecodeGNUTar decodes archives written by GNU tar (testdata/*.tar,
// GNU and PAX formats, with directory entries and a name over 100 bytes)
// and compares with the golden listing beside each.
func TestDecodeGNUTar(t *testing.T) {
	files, err := filepath.Glob("testdata/*.tar")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			r, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			samples, err := client.DecodeSamples(r)
			if err != nil {
				t.Fatal(err)
			}
			got := renderSamples(samples)
			golden := strings.TrimSuffix(f, ".tar") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("%s decodes to\n%s\nwant (%s)\n%s", f, got, golden, want)
			}
		})
	}
}

// TestDecodeTarMatchesDecodeSamples: the in-memory decoder groups and
// returns exactly what the streaming one does, on every fixture and table
// case, and its files are capped slices of the input.
func TestDecodeTarMatchesDecodeSamples(t *testing.T) {
	long := strings.Repeat("deep/", 30) + "x"
	inputs := map[string][]byte{
		"ustar": buildTar(t, []member{{name: "a.jpg", data: "A"}, {name: "a.cls", data: "1"}, {name: "b.jpg", data: strings.Repeat("b", 1500)}}, tar.FormatUSTAR),
		"pax":   buildTar(t, []member{{name: long + ".jpg", data: "L"}, {name: long + ".cls", data: "9"}}, tar.FormatPAX),
		"gnu":   buildTar(t, []member{{name: long + ".jpg", data: "L"}, {name: "d/", typ: tar.TypeDir}}, tar.FormatGNU),
		"empty": buildTar(t, nil, tar.FormatUSTAR),
	}
	files, _ := filepath.Glob("testdata/*.tar")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inputs[filepath.Base(f)] = b
	}
	for name, b := range inputs {
		t.Run(name, func(t *testing.T) {
			want, err := client.DecodeSamples(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			got, err := client.DecodeTar(b)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := renderSamples(got), renderSamples(want); g != w {
				t.Fatalf("DecodeTar:\n%s\nDecodeSamples:\n%s", g, w)
			}
			for _, s := range got {
				for ext, data := range s.Files {
					if cap(data) != len(data) {
						t.Errorf("%s.%s: capacity %d beyond its %d bytes", s.Key, ext, cap(data), len(data))
					}
				}
			}
		})
	}
}

func TestDecodeTarErrors(t *testing.T) {
	whole := buildTar(t, []member{{name: "a.jpg", data: strings.Repeat("x", 2000)}}, tar.FormatUSTAR)
	for name, input := range map[string][]byte{
		"cut inside a member": whole[:1024],
		"cut inside a header": whole[:300],
		"not a tar":           bytes.Repeat([]byte("garbage!"), 128),
		"hidden file":         buildTar(t, []member{{name: "d/.hidden", data: "h"}}, tar.FormatUSTAR),
	} {
		if _, err := client.DecodeTar(input); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// FuzzDecodeTar: on any input the two decoders agree, on success and on
// failure.
func FuzzDecodeTar(f *testing.F) {
	f.Add(buildTar(f, []member{{name: "a.jpg", data: "A"}, {name: "a.cls", data: "1"}}, tar.FormatPAX))
	f.Add(buildTar(f, []member{{name: strings.Repeat("x/", 60) + "y.z", data: "q"}}, tar.FormatGNU))
	// Plain headers (read in place) before and after ones archive/tar
	// reads: a ustar prefix, a directory, a PAX long name, GNU plain.
	f.Add(buildTar(f, []member{
		{name: "a.jpg", data: "A"},
		{name: strings.Repeat("p/", 60) + "b.jpg", data: strings.Repeat("b", 600)},
		{name: "d/", typ: tar.TypeDir},
		{name: strings.Repeat("q", 120) + ".jpg", data: "long"},
		{name: "c.jpg", data: "C"},
	}, tar.FormatPAX))
	f.Add(buildTar(f, []member{{name: "a.jpg", data: "A"}, {name: "a.cls", data: "1"}, {name: "b.cls", data: "2"}}, tar.FormatGNU))
	files, _ := filepath.Glob("testdata/*.tar")
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want, werr := client.DecodeSamples(bytes.NewReader(b))
		got, gerr := client.DecodeTar(b)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("DecodeSamples error %v, DecodeTar error %v", werr, gerr)
		}
		if werr == nil && renderSamples(got) != renderSamples(want) {
			t.Fatalf("DecodeTar:\n%s\nDecodeSamples:\n%s", renderSamples(got), renderSamples(want))
		}
	})
}
