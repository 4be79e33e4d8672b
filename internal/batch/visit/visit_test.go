package visit_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/reader"
	"github.com/brandgw/brand/internal/batch/tensorize"
	"github.com/brandgw/brand/internal/batch/units"
	"github.com/brandgw/brand/internal/batch/visit"
	"github.com/brandgw/brand/internal/cache/usetable"
	"github.com/brandgw/brand/internal/cluster/route"
	"github.com/brandgw/brand/internal/cluster/transport"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/job/livestats"
	"github.com/brandgw/brand/internal/server/stopper"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
	"github.com/brandgw/brand/shuffle"
	"github.com/brandgw/brand/transform"
)

// log records the calls a visit makes, in order.
type log struct {
	mu    sync.Mutex
	calls []string
}

func (l *log) add(format string, args ...any) {
	l.mu.Lock()
	l.calls = append(l.calls, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

type fakeUseTable struct {
	*log
	busy   bool // Begin refuses
	noTurn bool // Turn fails
}

func (s *fakeUseTable) Begin(js layout.Stream, epoch uint64, start, _, global int, _ float64, _ usetable.Rank) (usetable.Inflight, error) {
	if s.busy {
		return usetable.Inflight{}, usetable.ErrStreamBusy
	}
	s.add("begin %s/%d@%d g%d", js.DS.Name, epoch, start, global)
	return usetable.Inflight{}, nil
}

func (s *fakeUseTable) Advance(js layout.Stream, epoch uint64, end int, windows int) []usetable.Use {
	s.add("advance %s/%d@%d +%d", js.DS.Name, epoch, end, windows)
	return nil
}

func (s *fakeUseTable) Turn(context.Context, usetable.Inflight) error {
	s.add("turn")
	if s.noTurn {
		return context.DeadlineExceeded
	}
	return nil
}

func (s *fakeUseTable) Finish(usetable.Inflight) { s.add("finish") }

// Coalesce logs the calls it runs between braces.
func (s *fakeUseTable) Coalesce(f func()) {
	s.add("{")
	f()
	s.add("}")
}

type fakePrefetch struct{ *log }

func (p fakePrefetch) Enqueue([]usetable.Use) { p.add("prefetch") }
func (fakePrefetch) Close()                   {}

type fakePeers struct {
	*log
	nodes int
}

func (p fakePeers) Nodes() int { return p.nodes }

func (p fakePeers) FetchNext(key string, _ func(context.Context) ([]route.Fetch, error)) {
	p.add("fetch next")
}

type fakeReader struct {
	*log
	fail bool
}

func (r fakeReader) ReadBatch(_ context.Context, b *layout.Batch) (*reader.Result, error) {
	r.add("read %d parts", len(b.Parts))
	if r.fail {
		return nil, errors.New("store gone")
	}
	res := &reader.Result{}
	for _, p := range b.Parts {
		res.PerPart = append(res.PerPart, reader.Figures{Samples: len(p.Samples.IDs)})
	}
	return res, nil
}

func (r fakeReader) Read(_ context.Context, req reader.Request) (*reader.Result, error) {
	r.add("read local=%t", req.Local)
	return &reader.Result{}, nil
}

// TestVisit: every batch makes the schedule's calls in one order — begin
// each part, move each part's stream and queue its prefetch, fetch the
// next batch on a cluster, the job's turn for a dataset's batch
// only, the read, finish — and finishes what it began on every path.
func TestVisit(t *testing.T) {
	a, b := catalogtest.Dataset(t, "a", 4, 4), catalogtest.Dataset(t, "b", 4, 4)
	job := api.Job{Params: shuffle.Params{Seed: 1, BatchSize: 4, Window: 2, World: 1}}
	mix, _ := api.ParseMix("a:1,b:1")
	tests := []struct {
		name  string
		nodes int
		mix   bool
		sched fakeUseTable
		fail  bool
		want  string
	}{
		{name: "a dataset's batch", nodes: 1,
			want: "{, begin a/0@4 g4, advance a/0@8 +1, }, prefetch, turn, read 1 parts, {, finish, }"},
		{name: "on a cluster, the next batch fetched", nodes: 2,
			want: "{, begin a/0@4 g4, advance a/0@8 +1, }, prefetch, fetch next, turn, read 1 parts, {, finish, }"},
		// The parts' begins and advances in one Coalesce, their finishes
		// in another: the schedule's table is rebuilt once for each, not
		// once for each part; prefetch is queued once it is rebuilt.
		{name: "a mixture's batch: no turn", nodes: 1, mix: true,
			want: "{, begin P0, begin P1, advance P0, advance P1, }, prefetch, prefetch, read 2 parts, {, finish, finish, }"},
		{name: "the turn fails", nodes: 1, sched: fakeUseTable{noTurn: true},
			want: "{, begin a/0@4 g4, advance a/0@8 +1, }, prefetch, turn, {, finish, }"},
		{name: "the read fails", nodes: 1, fail: true,
			want: "{, begin a/0@4 g4, advance a/0@8 +1, }, prefetch, turn, read 1 parts, {, finish, }"},
		{name: "the stream is busy", nodes: 1, sched: fakeUseTable{busy: true}, want: "{, }"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := &log{}
			sched := tc.sched
			sched.log = l
			orders := units.Orders(nil)
			src := layout.Source{DS: a}
			if tc.mix {
				j := job
				j.Mix = mix
				m, err := orders.Compose(orders.UnitOf(features.Requested(j)), []*catalog.Dataset{a, b}, j)
				if err != nil {
					t.Fatal(err)
				}
				src = layout.Source{Unit: m}
			}
			p := visit.New(visit.Config{UseTable: &sched, Prefetch: fakePrefetch{l}, Windows: 1, Orders: orders, Peers: fakePeers{l, tc.nodes},
				Reader: fakeReader{log: l, fail: tc.fail}, Stats: livestats.New(prometheus.NewRegistry(), 1<<20, nil, nil, zerolog.Nop())})
			m := uint64(1)
			if tc.mix {
				m = 0
			}
			bt, err := orders.Layout(context.Background(), src, job, 0, m)
			if err != nil {
				t.Fatal(err)
			}
			if tc.mix && len(bt.Parts) != 2 {
				t.Fatalf("the mixture's batch has %d parts; the test wants 2", len(bt.Parts))
			}
			want := tc.want
			for i, part := range bt.Parts { // a mixture's parts, in the layout's order
				want = strings.ReplaceAll(want, fmt.Sprintf("begin P%d", i), fmt.Sprintf("begin %s/%d@%d g%d", part.Stream.DS.Name, part.Epoch, part.First, part.Share))
				want = strings.ReplaceAll(want, fmt.Sprintf("advance P%d", i), fmt.Sprintf("advance %s/%d@%d +1", part.Stream.DS.Name, part.Epoch, part.End))
			}
			served, err := p.Read(context.Background(), bt)
			if (err == nil) != (!tc.sched.busy && !tc.fail && !tc.sched.noTurn) {
				t.Fatalf("err %v", err)
			}
			if err == nil && (served.Batch.Len() != bt.Len() || served.Batch.ETag != bt.ETag) {
				t.Errorf("served %d samples under %s, laid out %d under %s", served.Batch.Len(), served.Batch.ETag, bt.Len(), bt.ETag)
			}
			if got := strings.Join(l.calls, ", "); got != want {
				t.Errorf("calls:\n  %s\nwant\n  %s", got, want)
			}
			begins, finishes := 0, 0
			for _, c := range l.calls {
				if strings.HasPrefix(c, "begin") {
					begins++
				}
				if c == "finish" {
					finishes++
				}
			}
			if begins != finishes {
				t.Errorf("%d begins, %d finishes", begins, finishes)
			}
		})
	}
}

// TestReadFor: a peer's request moves its stream here and counts against
// it while read, all local; without a stream it is a plain read.
func TestReadFor(t *testing.T) {
	a := catalogtest.Dataset(t, "a", 4, 4)
	l := &log{}
	p := visit.New(visit.Config{UseTable: &fakeUseTable{log: l}, Prefetch: fakePrefetch{l}, Windows: 2, Orders: units.Orders(nil),
		Peers: fakePeers{l, 2}, Reader: fakeReader{log: l}})
	s := layout.SamplesOf(a, []int{3}, []chunkindex.Sample{a.Index.Sample(3)})
	for _, o := range []*transport.Origin{{Epoch: 2, Pos: 9}, nil} {
		var js layout.Stream // the stream followed: as this node lays the origin's out
		if o != nil {
			js = layout.Stream{DS: a}
		}
		if _, err := p.ReadFor(context.Background(), s, o, js); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"begin a/2@9 g0", "advance a/2@9 +2", "prefetch", "read local=true", "finish", "read local=true"}
	if !slices.Equal(l.calls, want) {
		t.Errorf("calls %q, want %q", l.calls, want)
	}
}

// countingOrders counts the layouts of each batch.
type countingOrders struct {
	*layout.Orders
	mu      sync.Mutex
	layouts map[uint64]int
}

func (o *countingOrders) Layout(ctx context.Context, src layout.Source, job api.Job, epoch, m uint64) (*layout.Batch, error) {
	o.mu.Lock()
	o.layouts[m]++
	o.mu.Unlock()
	return o.Orders.Layout(ctx, src, job, epoch, m)
}

// fetchingPeers is a cluster of two whose fetch of a next batch lays it out
// at once and fetches nothing.
type fetchingPeers struct{}

func (fetchingPeers) Nodes() int { return 2 }

func (fetchingPeers) FetchNext(_ string, next func(context.Context) ([]route.Fetch, error)) {
	_, _ = next(context.Background())
}

// bytesReader reads every sample as 8 bytes: its ID.
type bytesReader struct{ fakeReader }

func (r bytesReader) ReadBatch(ctx context.Context, b *layout.Batch) (*reader.Result, error) {
	res, _ := r.fakeReader.ReadBatch(ctx, b)
	for i := range b.Len() {
		_, id, _ := b.Sample(i)
		res.Parts = append(res.Parts, binary.LittleEndian.AppendUint64(nil, uint64(id))) // which sample it is
		res.Bytes += 8
	}
	return res, nil
}

// copyStage "transforms" a sample into itself.
type copyStage struct{ set *transform.Set }

func (s copyStage) Pipeline(name string) (*transform.Pipeline, error) { return s.set.Get(name) }

func (copyStage) Apply(_ context.Context, req tensorize.Request) (*tensorize.Output, error) {
	out := &tensorize.Output{}
	for _, smp := range req.Samples {
		out.Parts = append(out.Parts, smp.Data)
		out.Bytes += int64(len(smp.Data))
	}
	return out, nil
}

// TestNextBatchLaidOutOnce: on a cluster, a transformed batch's next
// batch is fetched from peers and premade, both in the
// background; it is laid out once for both. (Each laid it out itself
// before: batch 1 was laid out twice.)
func TestNextBatchLaidOutOnce(t *testing.T) {
	a := catalogtest.Dataset(t, "a", 4, 4)
	set, err := transform.NewSet(transform.Config{Pipelines: map[string]transform.Spec{"plain": {}}}, transform.Options{})
	if err != nil {
		t.Fatal(err)
	}
	orders := &countingOrders{Orders: units.Orders(nil), layouts: map[uint64]int{}}
	l := &log{}
	part := stopper.New().Group("premade")
	v := visit.New(visit.Config{UseTable: &fakeUseTable{log: l}, Prefetch: fakePrefetch{l}, Windows: 1, Orders: orders, Peers: fetchingPeers{},
		Reader: bytesReader{fakeReader{log: l}}, Stats: livestats.New(prometheus.NewRegistry(), 1<<20, nil, nil, zerolog.Nop()),
		Stage: copyStage{set}, Group: part, PremadeBytes: 1 << 20})
	job := api.Job{Params: shuffle.Params{Seed: 1, BatchSize: 4, Window: 2, World: 1}, Transform: "plain"}
	src := layout.Source{DS: a}
	b, err := orders.Orders.Layout(context.Background(), src, job, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := v.Read(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	s.Release()
	part.Stop() // the premade batch has been made
	if n := orders.layouts[1]; n != 1 {
		t.Fatalf("batch 1 was laid out %d times in the background, want once (layouts by batch: %v)", n, orders.layouts)
	}
	if st := v.PremadeStats(); st.Started != 1 {
		t.Fatalf("premade batches: %+v, want 1 started", st)
	}
}
