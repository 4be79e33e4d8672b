package snapshots

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/s3backend"
)

func TestSnapshotRoundTrip(t *testing.T) {
	ctx := context.Background()
	st := newLocal(t)
	ix := catalogtest.Dataset(t, "d", 10, 4).Index
	scores := make([]float32, ix.NumSamples())
	for i := range scores {
		scores[i] = float32(i % 5)
	}
	snap, err := importance.NewSnapshot(ix, "run", 3, scores)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Sealed(ctx, st, "run", 3); !errors.Is(err, s3backend.ErrNotFound) {
		t.Fatalf("before the seal: %v, want ErrNotFound", err)
	}
	if v, written, err := Write(ctx, st, snap); err != nil || !written || v != snap.Version() {
		t.Fatalf("Write = %s, %t, %v; want %s written", v, written, err, snap.Version())
	}
	if v, err := Sealed(ctx, st, "run", 3); err != nil || v != snap.Version() {
		t.Fatalf("Sealed = %q, %v; want %s", v, err, snap.Version())
	}
	got, err := Read(ctx, st, ix, "run", snap.Version())
	if err != nil || !bytes.Equal(got.MarshalBinary(), snap.MarshalBinary()) {
		t.Fatalf("Read: %v", err)
	}
	if _, err := Read(ctx, st, ix, "run", "0123456789abcdef"); !errors.Is(err, s3backend.ErrNotFound) {
		t.Errorf("an unknown version: %v, want ErrNotFound", err)
	}
	// A snapshot stored under another version's name, and a pointer
	// holding junk, are corrupt.
	b := snap.MarshalBinary()
	if _, err := st.Put(ctx, importance.ObjectKey("run", "00000000000000aa"), bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(ctx, st, ix, "run", "00000000000000aa"); !errors.Is(err, importance.ErrCorrupt) {
		t.Errorf("a misnamed snapshot: %v, want ErrCorrupt", err)
	}
	if _, err := st.Put(ctx, SealedKey("run", 4), bytes.NewReader([]byte("junk")), 4); err != nil {
		t.Fatal(err)
	}
	if _, err := Sealed(ctx, st, "run", 4); !errors.Is(err, importance.ErrCorrupt) {
		t.Errorf("a junk pointer: %v, want ErrCorrupt", err)
	}
}

// packedIndex is a small dataset's index and a fresh local store.
func packedIndex(t *testing.T) (*s3backend.Local, *chunkindex.Index) {
	t.Helper()
	st := newLocal(t)
	ix := catalogtest.Dataset(t, "d", 10, 4).Index
	return st, ix
}

// scored is a snapshot of epoch of job whose scores are all score.
func scored(t *testing.T, ix *chunkindex.Index, job string, epoch uint64, score float32) *importance.Snapshot {
	t.Helper()
	scores := make([]float32, ix.NumSamples())
	for i := range scores {
		scores[i] = score
	}
	snap, err := importance.NewSnapshot(ix, job, epoch, scores)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// TestWriteSnapshotOnce: writers racing to seal one epoch with different
// snapshots agree on the first pointer written, and the losers' snapshots
// are gone.
func TestWriteSnapshotOnce(t *testing.T) {
	ctx := context.Background()
	st, ix := packedIndex(t)
	const writers = 12
	versions := make([]string, writers)
	written := make([]bool, writers)
	snaps := make([]*importance.Snapshot, writers)
	for i := range snaps {
		snaps[i] = scored(t, ix, "race", 2, float32(i))
	}
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			var err error
			versions[i], written[i], err = Write(ctx, st, snaps[i])
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := len(slices.DeleteFunc(slices.Clone(written), func(w bool) bool { return !w })); n != 1 {
		t.Fatalf("%d writers wrote the pointer, want 1", n)
	}
	if slices.Sort(versions); versions[0] != versions[writers-1] {
		t.Fatalf("writers answered different versions: %v", slices.Compact(versions))
	}
	if v, err := Sealed(ctx, st, "race", 2); err != nil || v != versions[0] {
		t.Fatalf("the pointer names %s (%v), the writers answered %s", v, err, versions[0])
	}
	objs, err := st.List(ctx, importance.KeyPrefix+"race/")
	if err != nil || len(objs) != 2 {
		t.Fatalf("the store holds %v (%v); want the pointer and the winner's snapshot", objs, err)
	}
}

// TestCollectSnapshots: after each seal the store keeps the last keep
// epochs' pointers and snapshots; older snapshots no pointer names go
// too, while one of a newer epoch (a seal between its two writes) stays.
func TestCollectSnapshots(t *testing.T) {
	ctx := context.Background()
	st, ix := packedIndex(t)
	put := func(snap *importance.Snapshot) {
		b := snap.MarshalBinary()
		if _, err := st.Put(ctx, snap.Key(), bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	orphanOld := scored(t, ix, "job", 1, 7)   // a seal of epoch 1 that never wrote its pointer
	orphanNew := scored(t, ix, "job", 100, 7) // a seal of epoch 100 about to write its pointer
	put(orphanOld)
	put(orphanNew)
	if _, err := st.Put(ctx, importance.KeyPrefix+"job/junk"+importance.Ext, strings.NewReader("junk"), 4); err != nil {
		t.Fatal(err)
	}
	const keep = 4
	for e := range uint64(10) {
		if _, _, err := Write(ctx, st, scored(t, ix, "job", e, float32(e))); err != nil {
			t.Fatal(err)
		}
		if _, err := Collect(ctx, st, "job", keep); err != nil {
			t.Fatal(err)
		}
	}
	epochs, err := SealedEpochs(ctx, st, "job")
	if err != nil || !slices.Equal(epochs, []uint64{9, 8, 7, 6}) {
		t.Fatalf("SealedEpochs = %v, %v; want 9 8 7 6", epochs, err)
	}
	objs, err := st.List(ctx, importance.KeyPrefix+"job/")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	want := []string{orphanNew.Key(), importance.KeyPrefix + "job/junk" + importance.Ext}
	for e := range uint64(4) {
		want = append(want, SealedKey("job", 6+e), scored(t, ix, "job", 6+e, float32(6+e)).Key())
	}
	slices.Sort(keys)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Fatalf("the store holds\n%s\nwant\n%s", strings.Join(keys, "\n"), strings.Join(want, "\n"))
	}
	// Another job's objects are not this job's to collect.
	if _, _, err := Write(ctx, st, scored(t, ix, "jo", 0, 1)); err != nil {
		t.Fatal(err)
	}
	if deleted, err := Collect(ctx, st, "job", 1); err != nil || slices.ContainsFunc(deleted, func(k string) bool { return strings.Contains(k, "/jo/") }) {
		t.Fatalf("collecting job deleted %v, %v", deleted, err)
	}
	if _, err := Sealed(ctx, st, "jo", 0); err != nil {
		t.Fatal(err)
	}
}

func newLocal(t testing.TB) *s3backend.Local {
	t.Helper()
	st, err := s3backend.NewLocal(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	return st
}
