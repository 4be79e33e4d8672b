package synth

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestDeterministicAndSized(t *testing.T) {
	sp := Spec{Samples: 200, MeanBytes: 10000, Seed: 5}
	var total int64
	for i := range sp.Samples {
		a, b := sp.Sample(i), sp.Sample(i)
		if !bytes.Equal(a.Image, b.Image) || a.Key != b.Key {
			t.Fatalf("sample %d differs between calls", i)
		}
		if n := int64(len(a.Image)); n < 1250 || n > 80000 {
			t.Fatalf("sample %d has %d bytes, outside the clamp", i, n)
		}
		total += int64(len(a.Image))
	}
	if mean := total / int64(sp.Samples); mean < 8500 || mean > 11500 {
		t.Fatalf("mean size %d, want about 10000", mean)
	}
	if bytes.Equal(sp.Sample(1).Image[:64], sp.Sample(2).Image[:64]) {
		t.Fatal("different samples share bytes")
	}
	other := Spec{Samples: 200, MeanBytes: 10000, Seed: 6}
	if bytes.Equal(other.Sample(1).Image[:64], sp.Sample(1).Image[:64]) {
		t.Fatal("different seeds give the same bytes")
	}
}

func TestWriteTree(t *testing.T) {
	dir := t.TempDir()
	sp := Spec{Samples: 25, MeanBytes: 300, Classes: 3, Seed: 1}
	if err := sp.WriteTree(dir); err != nil {
		t.Fatal(err)
	}
	s := sp.Sample(7)
	got, err := os.ReadFile(filepath.Join(dir, s.Key+".jpg"))
	if err != nil || !bytes.Equal(got, s.Image) {
		t.Fatalf("sample 7 on disk differs: %v", err)
	}
	lbl, _ := os.ReadFile(filepath.Join(dir, s.Key+".cls"))
	if string(lbl) != "1" {
		t.Fatalf("label %q, want 1", lbl)
	}
	if err := (Spec{}).WriteTree(dir); err == nil {
		t.Fatal("an empty spec should be rejected")
	}
}
