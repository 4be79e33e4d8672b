package chunkindex

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

const goldenManifest = "testdata/manifest-v1.golden.json"

func goldenManifestValue(t testing.TB) Manifest {
	chunks, samples := goldenDataset()
	m := NewManifest("golden", mustNew(t, chunks, samples))
	m.Created = time.Date(2025, 1, 2, 3, 4, 5, 999, time.FixedZone("CET", 3600))
	m.ChunkTargetBytes = 4096
	m.Shuffled = true
	m.ShuffleSeed = 1<<64 - 1
	m.Source = "file:///data/golden"
	m.Tool = "brand v0.1.0"
	return m
}

func TestManifestGolden(t *testing.T) {
	b, err := MarshalManifest(goldenManifestValue(t))
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(goldenManifest, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenManifest)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("manifest differs from %s:\n%s", goldenManifest, b)
	}
	m, err := ParseManifest(want)
	if err != nil {
		t.Fatal(err)
	}
	w := goldenManifestValue(t)
	w.Created = time.Date(2025, 1, 2, 2, 4, 5, 0, time.UTC)
	if m != w {
		t.Errorf("ParseManifest = %+v\nwant %+v", m, w)
	}
	if m.AvgSampleBytes != (1024+2048+2048)/3 || m.IndexID != "3a6958a385d5afc5" {
		t.Errorf("avg_sample_bytes %d, index_id %s", m.AvgSampleBytes, m.IndexID)
	}
	chunks, samples := goldenDataset()
	if err := m.Describes(mustNew(t, chunks, samples)); err != nil {
		t.Errorf("Describes the golden index: %v", err)
	}
	samples[0].CRC++
	if err := m.Describes(mustNew(t, chunks, samples)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Describes another index: %v", err)
	}
}

func TestManifestFillsFormat(t *testing.T) {
	m := goldenManifestValue(t)
	m.Format, m.FormatVersion = "", 0
	b, err := MarshalManifest(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"format": "brand-dataset"`)) || !bytes.Contains(b, []byte(`"format_version": 1`)) {
		t.Errorf("format not filled in:\n%s", b)
	}
}

func TestParseManifestRejects(t *testing.T) {
	good, err := os.ReadFile(goldenManifest)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, from, to string
		is             error
		contain        string
	}{
		{"not JSON", "{", "[", ErrCorrupt, "manifest"},
		{"other format", `"brand-dataset"`, `"webdataset"`, ErrCorrupt, `format "webdataset"`},
		{"newer version", `"format_version": 1`, `"format_version": 3`, ErrVersion, "manifest format version 3, this build reads version 1"},
		{"version 0", `"format_version": 1`, `"format_version": 0`, ErrCorrupt, "format version 0"},
		{"bad index id", `"3a6958a385d5afc5"`, `"3A6958A385D5AFC5"`, ErrCorrupt, "index_id"},
		{"negative", `"samples": 3`, `"samples": -3`, ErrCorrupt, "negative"},
		{"samples without chunks", `"chunks": 2`, `"chunks": 0`, ErrCorrupt, "3 samples in no chunks"},
		{"bad time", `"2025-01-02T02:04:05Z"`, `"yesterday"`, ErrCorrupt, "manifest"},
		{"trailing data", "}\n", "}\n{}", ErrCorrupt, "data after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := strings.Replace(string(good), tt.from, tt.to, 1)
			if b == string(good) {
				t.Fatalf("%q not in the golden manifest", tt.from)
			}
			_, err := ParseManifest([]byte(b))
			if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), tt.contain) {
				t.Errorf("ParseManifest: %v; want %v containing %q", err, tt.is, tt.contain)
			}
		})
	}
}

func TestParseManifestIgnoresUnknownFields(t *testing.T) {
	good, err := os.ReadFile(goldenManifest)
	if err != nil {
		t.Fatal(err)
	}
	b := strings.Replace(string(good), "{", `{"added_in_a_later_release": {"x": 1},`, 1)
	if _, err := ParseManifest([]byte(b)); err != nil {
		t.Errorf("ParseManifest with an unknown field: %v", err)
	}
}

func TestMarshalManifestValidates(t *testing.T) {
	m := goldenManifestValue(t)
	m.IndexID = "short"
	if _, err := MarshalManifest(m); !errors.Is(err, ErrInvalid) {
		t.Errorf("MarshalManifest with a bad index ID: %v", err)
	}
	m = goldenManifestValue(t)
	m.FormatVersion = 2
	if _, err := MarshalManifest(m); !errors.Is(err, ErrInvalid) {
		t.Errorf("MarshalManifest of a version this build cannot write: %v", err)
	}
}
