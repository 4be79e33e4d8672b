package dataset

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/synth"
	"github.com/brandgw/brand/s3backend"
)

func TestSnapshotRoundTrip(t *testing.T) {
	ctx := context.Background()
	st := newLocal(t)
	res, err := Pack(ctx, writeTree(t, synth.Spec{Samples: 40, MeanBytes: 512, Seed: 1}), st, PackOptions{ChunkSize: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	ix := res.Index
	scores := make([]float32, ix.NumSamples())
	for i := range scores {
		scores[i] = float32(i % 5)
	}
	snap, err := importance.NewSnapshot(ix, "run", 3, scores)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSealed(ctx, st, "run", 3); !errors.Is(err, s3backend.ErrNotFound) {
		t.Fatalf("before the seal: %v, want ErrNotFound", err)
	}
	if err := WriteSnapshot(ctx, st, snap); err != nil {
		t.Fatal(err)
	}
	if v, err := ReadSealed(ctx, st, "run", 3); err != nil || v != snap.Version() {
		t.Fatalf("ReadSealed = %q, %v; want %s", v, err, snap.Version())
	}
	got, err := ReadSnapshot(ctx, st, ix, "run", snap.Version())
	if err != nil || !bytes.Equal(got.MarshalBinary(), snap.MarshalBinary()) {
		t.Fatalf("ReadSnapshot: %v", err)
	}
	if _, err := ReadSnapshot(ctx, st, ix, "run", "0123456789abcdef"); !errors.Is(err, s3backend.ErrNotFound) {
		t.Errorf("an unknown version: %v, want ErrNotFound", err)
	}
	// A snapshot stored under another version's name, and a pointer
	// holding junk, are corrupt.
	b := snap.MarshalBinary()
	if _, err := st.Put(ctx, importance.ObjectKey("run", "00000000000000aa"), bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSnapshot(ctx, st, ix, "run", "00000000000000aa"); !errors.Is(err, importance.ErrCorrupt) {
		t.Errorf("a misnamed snapshot: %v, want ErrCorrupt", err)
	}
	if _, err := st.Put(ctx, SealedKey("run", 4), bytes.NewReader([]byte("junk")), 4); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSealed(ctx, st, "run", 4); !errors.Is(err, importance.ErrCorrupt) {
		t.Errorf("a junk pointer: %v, want ErrCorrupt", err)
	}
}
