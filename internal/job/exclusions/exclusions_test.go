package exclusions

import (
	"bytes"
	"context"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/server/reqbody"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/s3backend"
)

// key is the key of sample i of chunk c of catalogtest.Dataset "d".
func key(c, i int) string { return fmt.Sprintf("d/%d/%d", c, i) }

// TestMakeAndFind: a list made on one book is found by another over the
// same store (a restarted node), whole; a second list is refused, the
// same one again (even after the job read past its step) is the same; a list from a position served is refused
// naming the step after it; a node that found no list asks again after
// Refresh.
func TestMakeAndFind(t *testing.T) {
	ctx := context.Background()
	ds := catalogtest.Dataset(t, "d", 4, 10)
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	b := New()
	b.now = func() time.Time { return now }
	if x, l, err := b.Of(ctx, st, ds, "run"); x != nil || l != nil || err != nil {
		t.Fatalf("Of before a list: %v %v %v", x, l, err)
	}
	b.Served("d", "run", 0, 20)
	stepOf := func(epoch uint64, end int) uint64 { return epoch*4 + uint64(end/10) }
	_, _, err = b.Make(ctx, st, ds, List{Job: "run", Dataset: "d", Epoch: 0, FromPosition: 10, FromStep: 1, StepSamples: 10, Keys: []string{key(1, 1)}}, stepOf)
	var se *ServedError
	if !errors.As(err, &se) || se.Next != 2 || !errors.Is(err, ErrConflict) {
		t.Fatalf("a list from a position served: %v; want a ServedError naming step 2", err)
	}
	if _, _, err := b.Make(ctx, st, ds, List{Job: "run", Dataset: "d", FromPosition: 20, Keys: []string{key(1, 1), "nope"}}, stepOf); !errors.Is(err, ErrUnknownKeys) {
		t.Fatalf("unknown keys: %v", err)
	}
	l := List{Job: "run", Dataset: "d", Epoch: 0, FromPosition: 20, FromStep: 2, StepSamples: 10, Keys: []string{key(1, 1), key(2, 0), key(2, 0)}}
	made, x, err := b.Make(ctx, st, ds, l, stepOf)
	if err != nil || x.Len() != 2 || !x.Excluded(11) || !x.Excluded(20) || x.Excluded(12) {
		t.Fatalf("Make: %v, %+v", err, x)
	}
	// A retry, its answer lost, after the job read past the list's step:
	// the list it made.
	b.Served("d", "run", 0, 35)
	if again, _, err := b.Make(ctx, st, ds, l, stepOf); err != nil || again.Version != made.Version {
		t.Fatalf("the same list again: %v, %v", again, err)
	}
	other := l
	other.Keys = []string{key(3, 3)}
	if _, _, err := b.Make(ctx, st, ds, other, stepOf); !errors.Is(err, ErrConflict) {
		t.Fatalf("a second list: %v", err)
	}
	fresh := New()
	fx, fl, err := fresh.Of(ctx, st, ds, "run")
	if err != nil || fl.Version != made.Version || fx.Version != x.Version || fx.Len() != 2 {
		t.Fatalf("a restarted node's list: %v %+v", err, fl)
	}
	// A node that found none finds it after Refresh.
	st2, _ := s3backend.NewLocal(t.TempDir())
	late := New()
	late.now = func() time.Time { return now }
	if x, _, _ := late.Of(ctx, st2, ds, "run"); x != nil {
		t.Fatal("a list in an empty store")
	}
	if _, _, err := New().Make(ctx, st2, ds, l, stepOf); err != nil {
		t.Fatal(err)
	}
	if x, _, _ := late.Of(ctx, st2, ds, "run"); x != nil {
		t.Fatal("a list found before Refresh: the store is asked once a Refresh")
	}
	now = now.Add(Refresh)
	if x, _, _ := late.Of(ctx, st2, ds, "run"); x == nil {
		t.Fatal("a list not found after Refresh")
	}
}

// BenchmarkMakeAMillionKeys makes a list of 1,000,000 keys of a
// 2,000,000-sample dataset, as POST /jobs/NAME/exclude does: the body's
// JSON decoded (reqbody.DecodeLargeJSON, the gateway's), each key looked
// up in the index, the list stored (a local store), the exclusion made.
// It writes the seconds a list takes (s/list), the mean of its rounds,
// and the CPU seconds the process spent on it (cpu-s/list: the work, on
// a machine other processes share; both processors' where its walk of
// the index runs on two).
func BenchmarkMakeAMillionKeys(b *testing.B) {
	ctx := context.Background()
	ds := catalogtest.Dataset(b, "d", 2000, 1000)
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([]string, 0, 1_000_000)
	for _, id := range r.Perm(2_000_000)[:1_000_000] {
		keys = append(keys, key(id/1000, id%1000))
	}
	step := uint64(0)
	body, err := stdjson.Marshal(api.ExclusionEdit{FromStep: &step, Keys: keys})
	if err != nil {
		b.Fatal(err)
	}
	var total, cpu time.Duration
	n := 0
	for i := 0; b.Loop(); i++ {
		st, err := s3backend.NewLocal(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		t0, c0 := time.Now(), cpuTime()
		var e api.ExclusionEdit
		if err := reqbody.DecodeLargeJSON(bytes.NewReader(body), &e); err != nil {
			b.Fatal(err)
		}
		_, x, err := New().Make(ctx, st, ds, List{Job: fmt.Sprint("run", i), Dataset: "d", Keys: e.Keys}, nil)
		if err != nil || x.Len() != len(keys) {
			b.Fatal(err)
		}
		total += time.Since(t0)
		cpu += cpuTime() - c0
		n++
	}
	b.ReportMetric(total.Seconds()/float64(n), "s/list")
	if cpu > 0 {
		b.ReportMetric(cpu.Seconds()/float64(n), "cpu-s/list")
	}
	b.ReportMetric(float64(len(body))/1e6, "MB/body")
}

// TestExtend: a job's list grows by versions. A first list of a job that
// has one, or an extension of a version not the current one, is refused
// naming the current version; an extension from before its previous
// version's position is refused; a version made again is the same one; a
// restarted node finds the chain whole, and a node that knew an older
// version finds the new one after Refresh. Of two extensions of one
// version made at once on two nodes, one wins and the other is told its
// version.
func TestExtend(t *testing.T) {
	ctx := context.Background()
	ds := catalogtest.Dataset(t, "d", 6, 10)
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	b := New()
	b.now = func() time.Time { return now }
	stepOf := func(epoch uint64, end int) uint64 { return epoch*6 + uint64(end/10) }
	v1, x1, err := b.Make(ctx, st, ds, List{Job: "run", Dataset: "d", FromPosition: 20, FromStep: 2, StepSamples: 10, Keys: []string{key(1, 1), key(4, 0)}}, stepOf)
	if err != nil {
		t.Fatal(err)
	}
	// A node that knows version 1.
	other := New()
	other.now = func() time.Time { return now }
	if _, l, err := other.Of(ctx, st, ds, "run"); err != nil || l.Version != v1.Version {
		t.Fatalf("another node: %v %v", l, err)
	}
	second := List{Job: "run", Dataset: "d", FromPosition: 30, FromStep: 3, StepSamples: 10, Keys: []string{key(2, 2), key(5, 5)}}
	var ce *ConflictError
	if _, _, err := b.Make(ctx, st, ds, second, stepOf); !errors.As(err, &ce) || ce.Current != v1.Version || !errors.Is(err, ErrConflict) {
		t.Fatalf("a second list without previous: %v; want a conflict naming %s", err, v1.Version)
	}
	early := second
	early.Previous, early.FromPosition = v1.Version, 19
	if _, _, err := b.Make(ctx, st, ds, early, stepOf); !errors.Is(err, layout.ErrBeforePrevious) {
		t.Fatalf("an extension before its previous version's position: %v", err)
	}
	second.Previous = v1.Version
	v2, x2, err := b.Make(ctx, st, ds, second, stepOf)
	if err != nil {
		t.Fatal(err)
	}
	if x2.Len() != 4 || x2.Prev() != x1 || !x2.Excluded(11) || !x2.Excluded(22) || v2.Previous != v1.Version || v2.Version == v1.Version {
		t.Fatalf("version 2: %+v (%d samples, previous %v)", v2, x2.Len(), x2.Prev())
	}
	if again, _, err := b.Make(ctx, st, ds, second, stepOf); err != nil || again.Version != v2.Version {
		t.Fatalf("version 2 again: %v %v", again, err)
	}
	stale := second
	stale.Keys = []string{key(3, 3)}
	if _, _, err := b.Make(ctx, st, ds, stale, stepOf); !errors.As(err, &ce) || ce.Current != v2.Version {
		t.Fatalf("an extension of version 1 after version 2: %v; want a conflict naming %s", err, v2.Version)
	}
	// A restarted node: the chain whole.
	fx, fl, err := New().Of(ctx, st, ds, "run")
	if err != nil || fl.Version != v2.Version || fx.Version != v2.Version || fx.Prev().Version != v1.Version || fx.Len() != 4 ||
		!slices.Equal(fl.AllKeys(), append(slices.Clone(v1.Keys), second.Keys...)) {
		t.Fatalf("a restarted node's list: %v %+v", err, fl)
	}
	// The node that knew version 1 finds version 2 after Refresh.
	if _, l, _ := other.Of(ctx, st, ds, "run"); l.Version != v1.Version {
		t.Fatalf("a version found before Refresh: %s", l.Version)
	}
	now = now.Add(Refresh)
	if x, l, err := other.Of(ctx, st, ds, "run"); err != nil || l.Version != v2.Version || x.Len() != 4 {
		t.Fatalf("after Refresh: %v %v", l, err)
	}

	// Two nodes extend version 2 at once, with other keys: one wins.
	var wg sync.WaitGroup
	made := make([]*List, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			l := List{Job: "run", Dataset: "d", FromPosition: 40 + i, FromStep: 4, StepSamples: 10, Keys: []string{key(i, 9)}, Previous: v2.Version}
			made[i], _, errs[i] = New().Make(ctx, st, ds, l, stepOf)
		})
	}
	wg.Wait()
	won := 0
	for i := range 2 {
		if errs[i] == nil {
			won = i
		}
	}
	lost := 1 - won
	if errs[won] != nil || !errors.As(errs[lost], &ce) || ce.Current != made[won].Version {
		t.Fatalf("two extensions at once: %v, %v; want one made and the other told its version", errs[0], errs[1])
	}
	if _, l, _ := New().Of(ctx, st, ds, "run"); l.Version != made[won].Version {
		t.Fatalf("the current version is %s; the winner made %s", l.Version, made[won].Version)
	}
}

// TestMaxVersions: a list of MaxVersions versions is not extended; a
// restarted node reads every one.
func TestMaxVersions(t *testing.T) {
	ctx := context.Background()
	ds := catalogtest.Dataset(t, "d", 6, 10)
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b := New()
	prev := ""
	for i := range MaxVersions + 1 {
		l := List{Job: "run", Dataset: "d", FromPosition: i / 8, Keys: []string{key(i%6, (i/6)%10)}, Previous: prev}
		made, _, err := b.Make(ctx, st, ds, l, nil)
		if i == MaxVersions {
			if !errors.Is(err, ErrTooManyVersions) {
				t.Fatalf("version %d: %v; want ErrTooManyVersions", i+1, err)
			}
			break
		}
		if err != nil {
			t.Fatalf("version %d: %v", i+1, err)
		}
		prev = made.Version
	}
	x, l, err := New().Of(ctx, st, ds, "run")
	if err != nil || l.Version != prev || x.Len() != 60 || len(l.AllKeys()) != MaxVersions {
		t.Fatalf("a restarted node: %v, version %s (want %s)", err, l.Version, prev)
	}
}

// TestReadsAListEncodingJSONStored: a list's version as encoding/json
// wrote it (before go-json-experiment did) reads back whole.
func TestReadsAListEncodingJSONStored(t *testing.T) {
	ctx := context.Background()
	ds := catalogtest.Dataset(t, "d", 4, 10)
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l := List{Job: "run", Version: "00112233445566ff", Dataset: "d", IndexID: ds.ID(), FromPosition: 20, FromStep: 2, StepSamples: 10, Keys: []string{key(1, 1), key(3, 0)}}
	body, err := stdjson.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	for k, b := range map[string][]byte{prefix("run") + l.Version: body, prefix("run") + "root": []byte(l.Version)} {
		if _, err := st.Put(ctx, k, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	x, got, err := New().Of(ctx, st, ds, "run")
	if err != nil || got.Version != l.Version || got.FromPosition != 20 || !slices.Equal(got.Keys, l.Keys) || x.Len() != 2 || !x.Excluded(11) {
		t.Fatalf("read back: %+v, %v", got, err)
	}
}
