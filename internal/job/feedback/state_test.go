package feedback

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/job/catalog"
)

// addOne posts one record, (id, 2), of an epoch of a job.
func addOne(t *testing.T, s *State, ds *catalog.Dataset, job string, epoch uint64, id uint32) error {
	_, err := s.Add(t.Context(), ds, job, epoch, "application/octet-stream", bytes.NewReader(binaryBody([]uint32{id}, []float32{2})))
	return err
}

func TestJobSlots(t *testing.T) {
	clk := newClock()
	ds := storedDataset(t, 16)
	s := newTestState(Limits{Jobs: 2, Idle: time.Minute}, clk)
	steps := []struct {
		name    string
		advance time.Duration
		job     string
		epoch   uint64
		want    error
	}{
		{"a takes a slot", 0, "a", 0, nil},
		{"b takes the other", 0, "b", 0, nil},
		{"c finds none", 0, "c", 0, ErrBusy},
		{"a's next epoch is a's", 0, "a", 1, nil},
		{"a keeps its slot while active", 50 * time.Second, "a", 1, nil},
		{"c still finds none: b is within its idle window", 9 * time.Second, "c", 0, ErrBusy},
		{"b idle: c takes its slot", 2 * time.Second, "c", 0, nil},
		{"b is refused now", 0, "b", 0, ErrBusy},
	}
	for _, st := range steps {
		clk.advance(st.advance)
		if err := addOne(t, s, ds, st.job, st.epoch, 1); !errors.Is(err, st.want) && (err != nil || st.want != nil) {
			t.Fatalf("%s: %v, want %v", st.name, err, st.want)
		}
	}
	// b's epoch 0 was dropped: its seal says so rather than sealing nothing.
	_, err := s.Seal(t.Context(), ds, "b", 0, nil, alone{})
	if !errors.Is(err, ErrNoFeedback) || !strings.Contains(err.Error(), "idle for 1m0s") {
		t.Fatalf("sealing b's dropped epoch: %v; want ErrNoFeedback saying it was dropped when idle", err)
	}
}

func TestJobEpochs(t *testing.T) {
	clk := newClock()
	ds := storedDataset(t, 16)
	s := newTestState(Limits{EpochsPerJob: 2}, clk)
	add := func(epoch uint64) error { return addOne(t, s, ds, "j", epoch, 1) }
	for _, e := range []uint64{3, 4, 5} { // 5 drops 3, the oldest
		if err := add(e); err != nil {
			t.Fatalf("epoch %d: %v", e, err)
		}
	}
	if err := add(2); !errors.Is(err, ErrStale) {
		t.Fatalf("an epoch older than the job's open ones: %v, want ErrStale", err)
	}
	_, err := s.Seal(t.Context(), ds, "j", 3, nil, alone{})
	if !errors.Is(err, ErrNoFeedback) || !strings.Contains(err.Error(), "epoch 5 arrived") {
		t.Fatalf("sealing the dropped epoch 3: %v; want ErrNoFeedback saying why", err)
	}
	// Sealing an epoch frees its place; an epoch a seal elsewhere has
	// collected (Reports) goes before an open one.
	if _, err := s.Seal(t.Context(), ds, "j", 4, nil, alone{}); err != nil {
		t.Fatal(err)
	}
	if err := add(6); err != nil {
		t.Fatal(err)
	}
	if part := s.Collect(ds, "j", 6, "0123456789abcdef"); len(part) != 8 {
		t.Fatalf("epoch 6's part is %d bytes, want one record", len(part))
	}
	if err := add(6); !errors.Is(err, ErrSealed) {
		t.Fatalf("feedback for an epoch collected for a seal: %v, want ErrSealed", err)
	}
	if err := add(7); err != nil {
		t.Fatal(err)
	}
	if out, err := s.Seal(t.Context(), ds, "j", 5, nil, alone{}); err != nil || out.Reported != 1 {
		t.Fatalf("sealing epoch 5 = %+v, %v; want its feedback, kept over the collected epoch 6", out, err)
	}
}

func TestFeedbackAfterTheSeal(t *testing.T) {
	ds := storedDataset(t, 16)
	s := newTestState(Limits{}, newClock())
	add := func(s *State, id uint32) error { return addOne(t, s, ds, "j", 0, id) }
	if err := add(s, 1); err != nil {
		t.Fatal(err)
	}
	first, err := s.Seal(t.Context(), ds, "j", 0, nil, alone{})
	if err != nil || first.Existing || first.Reported != 1 {
		t.Fatalf("Seal = %+v, %v", first, err)
	}
	if err := add(s, 2); !errors.Is(err, ErrSealed) || !strings.Contains(err.Error(), first.Version) {
		t.Fatalf("feedback after the seal: %v; want ErrSealed naming the version", err)
	}
	again, err := s.Seal(t.Context(), ds, "j", 0, nil, alone{})
	if err != nil || !again.Existing || again.Version != first.Version || again.Reported != 1 {
		t.Fatalf("sealing again = %+v, %v; want the first answer, existing", again, err)
	}
	// A gateway sharing the store but not the cluster learns of the seal
	// from the store: when its epoch opens, and every Recheck after.
	clk := newClock()
	other := newTestState(Limits{Recheck: time.Second}, clk)
	if err := add(other, 3); !errors.Is(err, ErrSealed) {
		t.Fatalf("another gateway's feedback for the sealed epoch: %v, want ErrSealed", err)
	}
	if err := addOne(t, other, ds, "j", 1, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Seal(t.Context(), ds, "j", 1, nil, alone{}); !errors.Is(err, ErrNoFeedback) {
		t.Fatalf("sealing epoch 1 where it has no feedback: %v, want ErrNoFeedback", err)
	}
	if err := addOne(t, s, ds, "j", 1, 5); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Seal(t.Context(), ds, "j", 1, nil, alone{}); err != nil {
		t.Fatal(err)
	}
	if err := addOne(t, other, ds, "j", 1, 1); err != nil {
		t.Fatalf("within Recheck the store is not looked at: %v", err)
	}
	clk.advance(time.Second)
	if err := addOne(t, other, ds, "j", 1, 1); !errors.Is(err, ErrSealed) {
		t.Fatalf("after Recheck: %v, want ErrSealed", err)
	}
	// Sealed elsewhere, its own seal answers the version sealed.
	if out, err := other.Seal(t.Context(), ds, "j", 1, nil, alone{}); err != nil || !out.Existing {
		t.Fatalf("the other gateway's seal = %+v, %v; want the existing version", out, err)
	}
}

// blockingBody blocks its reader until released, after its first byte.
type blockingBody struct {
	started chan struct{}
	release chan struct{}
	sent    bool
}

func (b *blockingBody) Read(p []byte) (int, error) {
	if !b.sent {
		b.sent = true
		close(b.started)
		p[0] = '{'
		return 1, nil
	}
	<-b.release
	return copy(p, `"ids":[1],"losses":[1]}`), io.EOF
}

func TestDecodersBounded(t *testing.T) {
	ds := storedDataset(t, 16)
	s := newTestState(Limits{Decoders: 1, DecodeWait: 20 * time.Millisecond}, newClock())
	slow := &blockingBody{started: make(chan struct{}), release: make(chan struct{})}
	var wg sync.WaitGroup
	wg.Go(func() {
		if n, err := s.Add(t.Context(), ds, "j", 0, "application/json", slow); n != 1 || err != nil {
			t.Errorf("the slow body: %d, %v", n, err)
		}
	})
	<-slow.started // it holds the one decoder
	_, err := s.Add(t.Context(), ds, "k", 0, "application/json", strings.NewReader(`{"ids":[1],"losses":[1]}`))
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "feedback bodies being decoded: all 1 taken") {
		t.Errorf("a body past the decoders: %v, want ErrBusy", err)
	}
	close(slow.release)
	wg.Wait()
	if _, err := s.Add(t.Context(), ds, "k", 0, "application/json", strings.NewReader(`{"ids":[1],"losses":[1]}`)); err != nil {
		t.Errorf("once the decoder is free: %v", err)
	}
}

// TestSealsConverge: concurrent seals of one epoch on one node answer
// one version; all but one answer it as existing, and only one writes.
func TestSealsConverge(t *testing.T) {
	ds := storedDataset(t, 16)
	s := newTestState(Limits{}, newClock())
	if err := addOne(t, s, ds, "j", 0, 1); err != nil {
		t.Fatal(err)
	}
	const seals = 20
	out := make([]Sealed, seals)
	var wg sync.WaitGroup
	for i := range seals {
		wg.Go(func() {
			var err error
			if out[i], err = s.Seal(t.Context(), ds, "j", 0, nil, alone{}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	fresh := 0
	for _, o := range out {
		if o.Version != out[0].Version {
			t.Fatalf("seals answered %s and %s", out[0].Version, o.Version)
		}
		if !o.Existing {
			fresh++
		}
	}
	if fresh != 1 {
		t.Errorf("%d seals answered as the one that sealed, want 1", fresh)
	}
}
