package feedback

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/importance/snapshots"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/s3backend"
)

// The state's bounds, each a defect of an earlier release: one job's
// feedback evicted by other jobs' posts, concurrent seals of an epoch
// sealing different versions, seals writing without limit. (The statuses
// a gateway answers them with are gateway's TestImportanceRefusals.)

// addBinary adds (id, loss) records to a job's epoch.
func addBinary(s *State, ds *catalog.Dataset, job string, epoch uint64, ids []uint32, losses []float32) error {
	_, err := s.Add(context.Background(), ds, job, epoch, "application/octet-stream", bytes.NewReader(binaryBody(ids, losses)))
	return err
}

// feedAll reports a loss for every sample of an epoch: samples of the
// first quarter are "hard" (high loss).
func feedAll(t *testing.T, s *State, ds *catalog.Dataset, job string, epoch uint64) {
	t.Helper()
	n := ds.Index.NumSamples()
	ids, losses := make([]uint32, n), make([]float32, n)
	for i := range n {
		ids[i], losses[i] = uint32(i), 0.01+float32((n-i)%97)/1000
		if i < n/4 {
			losses[i] += 2
		}
	}
	if err := addBinary(s, ds, job, epoch, ids, losses); err != nil {
		t.Fatalf("feedback: %v", err)
	}
}

// sealWith seals a job's epoch onto the snapshot of version prev ("":
// none), as a gateway's seal request does.
func sealWith(t *testing.T, s *State, ds *catalog.Dataset, job string, epoch uint64, prev string) Sealed {
	t.Helper()
	var snap *importance.Snapshot
	if prev != "" {
		var err error
		if snap, err = snapshots.Read(t.Context(), ds.Store, ds.Index, job, prev); err != nil {
			t.Fatal(err)
		}
	}
	out, err := s.Seal(t.Context(), ds, job, epoch, snap, alone{})
	if err != nil {
		t.Fatalf("seal of %s epoch %d: %v", job, epoch, err)
	}
	return out
}

// importanceObjects lists a job's epoch pointers and snapshots in st.
func importanceObjects(t *testing.T, st s3backend.Store, job string) (pointers, snaps []string) {
	t.Helper()
	objs, err := st.List(t.Context(), "_brand/importance/"+job+"/")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch {
		case strings.Contains(o.Key, "/epochs/"):
			pointers = append(pointers, o.Key)
		case strings.HasSuffix(o.Key, ".brandimp"):
			snaps = append(snaps, o.Key)
		default:
			t.Errorf("unexpected object %s", o.Key)
		}
	}
	return pointers, snaps
}

// TestJobsCannotEvictEachOther: other jobs' feedback, however much of
// it, never erases a job's: past the job slots a new job is told it is
// busy (a gateway's 503 with Retry-After), saying why, and the job keeps
// all it reported. A seal of an epoch nobody reported is refused, not
// sealed empty.
func TestJobsCannotEvictEachOther(t *testing.T) {
	ds := storedDataset(t, 64)
	s := newTestState(Limits{}, newClock())
	feedAll(t, s, ds, "victim", 0)
	var refused int
	for i := range 40 {
		switch err := addBinary(s, ds, fmt.Sprintf("other-%d", i), 0, []uint32{1}, []float32{1}); {
		case err == nil:
		case errors.Is(err, ErrBusy):
			if !strings.Contains(err.Error(), "job") {
				t.Errorf("job %d refused without saying why: %v", i, err)
			}
			refused++
		default:
			t.Fatalf("job %d: %v", i, err)
		}
	}
	if refused == 0 {
		t.Error("40 jobs' feedback all accepted: the job slots are not bounded")
	}
	if got := sealWith(t, s, ds, "victim", 0, ""); got.Reported != ds.Index.NumSamples() {
		t.Fatalf("after other jobs' feedback the victim sealed %d reported samples, want %d", got.Reported, ds.Index.NumSamples())
	}
	_, err := s.Seal(t.Context(), ds, "nobody", 0, nil, alone{})
	if !errors.Is(err, ErrNoFeedback) || !strings.Contains(err.Error(), "no feedback") {
		t.Fatalf("sealing an epoch without feedback: %v; want ErrNoFeedback and why", err)
	}
}

// TestConcurrentSealsConverge: 40 seals of one epoch racing with feedback
// answer one version, the stored pointer names it, and every feedback
// accepted is in it while every one refused (ErrSealed, after the seal)
// is not.
func TestConcurrentSealsConverge(t *testing.T) {
	ds := storedDataset(t, 64)
	n := ds.Index.NumSamples()
	s := newTestState(Limits{}, newClock())
	ids, base := make([]uint32, n), make([]float32, n)
	for i := range n {
		ids[i], base[i] = uint32(i), 0.5
	}
	if err := addBinary(s, ds, "race", 0, ids, base); err != nil {
		t.Fatal(err)
	}
	const seals = 40
	versions := make([]string, seals)
	accepted := make([]bool, seals)
	var wg sync.WaitGroup
	for i := range seals {
		wg.Go(func() {
			out, err := s.Seal(t.Context(), ds, "race", 0, nil, alone{})
			if err != nil {
				t.Errorf("seal %d: %v", i, err)
			}
			versions[i] = out.Version
		})
		wg.Go(func() {
			err := addBinary(s, ds, "race", 0, []uint32{uint32(i)}, []float32{10 + float32(i)})
			if err != nil && !errors.Is(err, ErrSealed) {
				t.Errorf("feedback %d: %v", i, err)
			}
			accepted[i] = err == nil
		})
	}
	wg.Wait()
	slices.Sort(versions)
	if d := slices.Compact(slices.Clone(versions)); len(d) != 1 {
		t.Fatalf("40 concurrent seals answered %d versions: %v", len(d), d)
	}
	v, err := snapshots.Sealed(t.Context(), ds.Store, "race", 0)
	if err != nil || v != versions[0] {
		t.Fatalf("the stored pointer names %q (%v); the seals answered %s", v, err, versions[0])
	}
	snap, err := snapshots.Read(t.Context(), ds.Store, ds.Index, "race", v)
	if err != nil {
		t.Fatal(err)
	}
	for i := range seals {
		if got := snap.Score(i); accepted[i] && got != 10+float32(i) || !accepted[i] && got != 0.5 {
			t.Errorf("sample %d: feedback accepted %v, sealed score %v", i, accepted[i], got)
		}
	}
}

// TestSealsConvergeAcrossNodes: two states (two gateways) over one store,
// each holding different feedback, sealing one epoch at once: the first
// pointer written wins and every seal on either answers its version.
func TestSealsConvergeAcrossNodes(t *testing.T) {
	ds := storedDataset(t, 64)
	n := ds.Index.NumSamples()
	var states []*State
	for g := range 2 {
		s := newTestState(Limits{}, newClock())
		ids, losses := make([]uint32, n), make([]float32, n)
		for i := range n {
			ids[i], losses[i] = uint32(i), float32(g+1)
		}
		if err := addBinary(s, ds, "two", 0, ids, losses); err != nil {
			t.Fatal(err)
		}
		states = append(states, s)
	}
	const seals = 20
	versions := make([]string, 2*seals)
	var wg sync.WaitGroup
	for i := range versions {
		wg.Go(func() {
			out, err := states[i%2].Seal(t.Context(), ds, "two", 0, nil, alone{})
			if err != nil {
				t.Errorf("seal %d: %v", i, err)
			}
			versions[i] = out.Version
		})
	}
	wg.Wait()
	slices.Sort(versions)
	if d := slices.Compact(slices.Clone(versions)); len(d) != 1 {
		t.Fatalf("seals on two nodes answered %d versions: %v", len(d), d)
	}
	if v, err := snapshots.Sealed(t.Context(), ds.Store, "two", 0); err != nil || v != versions[0] {
		t.Fatalf("the stored pointer names %q (%v); the seals answered %s", v, err, versions[0])
	}
	if _, snaps := importanceObjects(t, ds.Store, "two"); len(snaps) != 1 {
		t.Errorf("the store holds %d snapshots of the job, want the winner's alone: %v", len(snaps), snaps)
	}
}

// TestSealsKeepTheLastEpochs: sealing a job's epochs one after another,
// each onto the last, keeps the last few epochs' pointers and snapshots,
// not all of them, and the last ones are still read.
func TestSealsKeepTheLastEpochs(t *testing.T) {
	ds := storedDataset(t, 64)
	s := newTestState(Limits{}, newClock())
	prev := ""
	for e := range uint64(10) {
		feedAll(t, s, ds, "long", e)
		prev = sealWith(t, s, ds, "long", e, prev).Version
	}
	pointers, snaps := importanceObjects(t, ds.Store, "long")
	const keep = 4
	if len(pointers) > keep || len(snaps) > keep {
		t.Fatalf("after 10 epochs the store holds %d pointers and %d snapshots, want at most %d of each:\n%v\n%v", len(pointers), len(snaps), keep, pointers, snaps)
	}
	for e := 10 - keep; e < 10; e++ {
		v, err := snapshots.Sealed(t.Context(), ds.Store, "long", uint64(e))
		if err != nil {
			t.Fatalf("epoch %d, among the last %d, lost its pointer: %v", e, keep, err)
		}
		if _, err := snapshots.Read(t.Context(), ds.Store, ds.Index, "long", v); err != nil {
			t.Fatalf("epoch %d's snapshot %s: %v", e, v, err)
		}
		if e == 9 && v != prev {
			t.Fatalf("epoch 9's pointer names %s, its seal answered %s", v, prev)
		}
	}
}

// putCounter counts the objects a store writes, through its Observer.
type putCounter struct{ puts atomic.Int64 }

func (c *putCounter) ObserveBackend(op string, _ int64, _ time.Duration, err error) {
	if err == nil && op == s3backend.OpPut {
		c.puts.Add(1)
	}
}

// TestResealingWritesNothing: sealing one epoch 300 times, with feedback
// between, writes what one seal writes and answers one version.
func TestResealingWritesNothing(t *testing.T) {
	var writes putCounter
	st, err := s3backend.Open(t.Context(), t.TempDir(), s3backend.Config{Observer: &writes})
	if err != nil {
		t.Fatal(err)
	}
	ix := storedDataset(t, 64).Index
	ds := catalog.NewDataset("d", "", st, ix)
	s := newTestState(Limits{}, newClock())
	feedAll(t, s, ds, "many", 0)
	before := writes.puts.Load()
	first := ""
	for i := range 300 {
		if err := addBinary(s, ds, "many", 0, []uint32{uint32(i % ix.NumSamples())}, []float32{5 + float32(i)}); err != nil && !errors.Is(err, ErrSealed) {
			t.Fatalf("feedback %d: %v", i, err)
		}
		out := sealWith(t, s, ds, "many", 0, "")
		if first == "" {
			first = out.Version
		} else if out.Version != first {
			t.Fatalf("seal %d of one epoch answered %s, the first %s", i, out.Version, first)
		}
	}
	if w := writes.puts.Load() - before; w > 2 {
		t.Errorf("300 seals of one epoch wrote %d objects; one seal writes 2 (a snapshot and the pointer)", w)
	}
	if pointers, snaps := importanceObjects(t, st, "many"); len(pointers) != 1 || len(snaps) != 1 {
		t.Errorf("300 seals of one epoch left %d pointers and %d snapshots", len(pointers), len(snaps))
	}
}

// nodes is the Nodes of node self in a cluster of states: a peer's
// feedback is what its state reports.
type nodes struct {
	states []*State
	self   int
}

func (n nodes) Peers() []int {
	var out []int
	for k := range n.states {
		if k != n.self {
			out = append(out, k)
		}
	}
	return out
}

func (n nodes) URL(k int) string { return fmt.Sprintf("node%d", k) }

func (n nodes) Feedback(_ context.Context, k int, ds *catalog.Dataset, job string, epoch uint64, seal string) ([]byte, error) {
	return n.states[k].Collect(ds, job, epoch, seal), nil
}

func (n nodes) Settle(_ context.Context, k int, ds *catalog.Dataset, job string, epoch uint64, seal, version string) error {
	n.states[k].Settle(ds, job, epoch, seal, version)
	return nil
}

// TestSealMergesNodes: feedback sent to different nodes of a cluster
// seals to the snapshot one node given all of it would seal.
func TestSealMergesNodes(t *testing.T) {
	const n = 512
	single, shared := storedDataset(t, n), storedDataset(t, n) // the single node seals into a store of its own
	ids, losses := make([]uint32, n), make([]float32, n)
	for i := range n {
		ids[i], losses[i] = uint32(i), float32(i%13)/3
	}
	one := newTestState(Limits{}, newClock())
	if err := addBinary(one, single, "merge", 2, ids, losses); err != nil {
		t.Fatal(err)
	}
	cl := nodes{self: 1}
	for k := range 3 { // a third of the feedback to each node
		s := newTestState(Limits{}, newClock())
		lo, hi := k*n/3, (k+1)*n/3
		if err := addBinary(s, shared, "merge", 2, ids[lo:hi], losses[lo:hi]); err != nil {
			t.Fatal(err)
		}
		cl.states = append(cl.states, s)
	}
	want, err := one.Seal(t.Context(), single, "merge", 2, nil, alone{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := cl.states[1].Seal(t.Context(), shared, "merge", 2, nil, cl)
	if err != nil {
		t.Fatal(err)
	}
	if got.Parts != 3 || got.Reported != n || got.Version != want.Version {
		t.Fatalf("cluster seal = %+v, want 3 parts, %d reported, version %s", got, n, want.Version)
	}
}
