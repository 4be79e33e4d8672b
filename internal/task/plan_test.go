package task

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brandgw/brand/s3backend"
)

func spec(n, step int, mods ...func(*Spec)) Spec {
	s := Spec{Step: step, Prompts: n, Tag: "t", Made: 1e12}
	for _, m := range mods {
		m(&s)
	}
	return s.WithDefaults()
}

// sim drives a plan as generators and a trainer would, recording every
// record, and checks each pass's accounting as it goes.
type sim struct {
	t       *testing.T
	p       *Plan
	recs    []Record
	clock   uint64
	counted map[[2]uint32]int // (prompt, pass) → counts
}

func newSim(t *testing.T, s Spec) *sim {
	return &sim{t: t, p: NewPlan(s), counted: map[[2]uint32]int{}}
}

func (m *sim) apply(r Record) Outcome {
	r.T = m.clock
	m.recs = append(m.recs, r)
	full := m.p.Steps().Full()
	out := m.p.Apply(r)
	for n := full; n < m.p.Steps().Full(); n++ {
		c, _ := m.p.Steps().Step(n)
		for _, x := range c {
			m.counted[[2]uint32{x.Prompt, x.Pass}]++
		}
	}
	return out
}

func (m *sim) lease(k int) *Lease {
	return m.apply(Record{Kind: recLease, Gen: "g", K: uint32(k)}).Lease
}

// answer answers every prompt of l with passes given by f.
func (m *sim) answer(l *Lease, f func(q uint32) (passes, n uint16)) Answer {
	var rows []Row
	for _, q := range l.Prompts {
		ps, n := f(q)
		rows = append(rows, Row{Prompt: q, Passes: ps, N: n})
	}
	out := m.apply(Record{Kind: recFeedback, Lease: l.ID, Rows: rows})
	if out.Err != nil {
		m.t.Fatalf("answering lease %d: %v", l.ID, out.Err)
	}
	return *out.Answer
}

func (m *sim) train() {
	m.apply(Record{Kind: recTrainer, Step: m.p.Steps().Full()})
}

// replayed is the digest of the recorded run replayed on a new plan.
func (m *sim) replayed() uint64 {
	p := NewPlan(m.p.spec)
	for _, r := range m.recs {
		p.Apply(r)
	}
	return p.Digest()
}

func TestUniformPassesCountEachPromptOnce(t *testing.T) {
	m := newSim(t, spec(103, 10, func(s *Spec) { s.Ahead = 3 }))
	for range 2000 {
		l := m.lease(7)
		if l == nil {
			m.train()
			continue
		}
		m.answer(l, func(q uint32) (uint16, uint16) { return uint16(q % 5), 4 + uint16(q%3) })
		if m.p.Window() == 0 {
			m.train()
		}
	}
	c := m.p.Count()
	if c.PassesDone < 5 {
		t.Fatalf("%d passes done, want at least 5", c.PassesDone)
	}
	for q := range uint32(103) {
		for pass := range c.PassesDone {
			if n := m.counted[[2]uint32{q, pass}]; n != 1 {
				t.Fatalf("prompt %d counted %d times in pass %d, want 1", q, n, pass)
			}
		}
	}
	if m.replayed() != m.p.Digest() {
		t.Fatal("a replay of the records decided otherwise")
	}
}

func TestWindowHoldsGeneratorsAheadOfTheTrainer(t *testing.T) {
	m := newSim(t, spec(1000, 8, func(s *Spec) { s.Ahead = 2 }))
	var got int
	for range 10 {
		if l := m.lease(5); l != nil {
			got += len(l.Prompts)
		}
	}
	if got != 16 {
		t.Fatalf("leased %d prompts with the trainer at step 0 and ahead=2 of 8, want 16", got)
	}
	out := m.apply(Record{Kind: recLease, Gen: "g", K: 1})
	if !errors.Is(out.Err, ErrWindow) {
		t.Fatalf("a lease past the window: %v, want ErrWindow", out.Err)
	}
}

// TestDynamicSamplingByPasses: DAPO's rule (flat=passes) drops a group
// whose answers all pass or all fail by pass_score, where the default
// (flat=scores) drops only a group whose scores are all equal: scores of
// 0.1 and 0.3 under a pass score of 0.5 count by the default, not by
// DAPO's rule; 0.6 and 0.9 likewise; 0.2 and 0.7 count by both, 0.4 and
// 0.4 by neither.
func TestDynamicSamplingByPasses(t *testing.T) {
	groups := [][]float32{{0.1, 0.3}, {0.6, 0.9}, {0.2, 0.7}, {0.4, 0.4}}
	for _, c := range []struct {
		flat    string
		counted [4]bool
	}{
		{FlatScores, [4]bool{true, true, true, false}},
		{FlatPasses, [4]bool{false, false, true, false}},
	} {
		m := newSim(t, spec(4, 1, func(s *Spec) { s.Redraws = 1; s.Ahead = 100; s.Flat = c.flat }))
		for g := range groups {
			l := m.lease(1)
			q := l.Prompts[0]
			out := m.apply(Record{Kind: recFeedback, Lease: l.ID, Rows: []Row{{Prompt: q, Scores: groups[q]}}})
			if out.Err != nil {
				t.Fatal(out.Err)
			}
			if got := out.Answer.Counted == 1; got != c.counted[q] {
				t.Errorf("flat=%s, answer %d, scores %v: counted %v, want %v", c.flat, g, groups[q], got, c.counted[q])
			}
		}
	}
	if err := spec(4, 1, func(s *Spec) { s.Flat = "variance" }).Check(); !errors.Is(err, ErrBadSpec) {
		t.Fatalf("flat=variance: %v, want it refused", err)
	}
}

func TestDynamicSamplingRedrawsThenRests(t *testing.T) {
	// Prompts below 20 always pass whole (no variance): each is drawn
	// again twice a pass, then rested; the others count at once.
	m := newSim(t, spec(60, 4, func(s *Spec) { s.Redraws = 2; s.Ahead = 1000 }))
	for {
		l := m.lease(1)
		if l == nil {
			break
		}
		m.answer(l, func(q uint32) (uint16, uint16) {
			if q < 20 {
				return 8, 8
			}
			return 3, 8
		})
		if m.p.Count().PassesDone >= 1 {
			break
		}
	}
	c := m.p.Count()
	if c.Redrawn != 40 || c.Rested != 20 {
		t.Fatalf("redrawn %d, rested %d; want 40 and 20 (20 flat prompts, 2 redraws each)", c.Redrawn, c.Rested)
	}
	if got := int(m.p.Steps().Total()); got != 40 {
		t.Fatalf("%d counted in the pass, want the 40 with variance", got)
	}
	if m.p.Steps().Full() != 10 {
		t.Fatalf("%d full steps, want 10 of exactly 4", m.p.Steps().Full())
	}
}

func TestExpiredPromptsGoToTheFront(t *testing.T) {
	m := newSim(t, spec(50, 5, func(s *Spec) { s.TTL = Duration(time.Second); s.Ahead = 100 }))
	a := m.lease(4)
	b := m.lease(3)
	m.answer(b, func(uint32) (uint16, uint16) { return 1, 2 })
	m.clock += 999
	if m.p.Apply(Record{Kind: recTick, T: m.clock}); m.p.Count().Expired != 0 {
		t.Fatal("a lease expired before its TTL")
	}
	m.clock += 1
	c := m.lease(6)
	if fmt.Sprint(c.Prompts[:4]) != fmt.Sprint(a.Prompts) {
		t.Fatalf("the lease after an expiry got %v first, want the expired lease's %v", c.Prompts[:4], a.Prompts)
	}
	out := m.apply(Record{Kind: recFeedback, Lease: a.ID, Rows: []Row{{Prompt: a.Prompts[0], Passes: 1, N: 2}}})
	if !IsExpired(out.Err) {
		t.Fatalf("an answer after the deadline: %v, want an expiry", out.Err)
	}
	// A repeat of an answered lease changes nothing.
	d := m.p.Digest()
	out = m.apply(Record{Kind: recFeedback, Lease: b.ID, Rows: []Row{{Prompt: b.Prompts[0], Passes: 2, N: 2}}})
	if out.Err != nil || out.Answer.Repeats != 1 || m.p.Digest() != d {
		t.Fatalf("a repeat: %+v %v, digest moved: %v", out.Answer, out.Err, m.p.Digest() != d)
	}
}

func TestCurriculumRetiresAndRevisits(t *testing.T) {
	m := newSim(t, spec(40, 4, func(s *Spec) {
		s.Policy, s.Retire, s.Revisit, s.Ahead = "curriculum", 2, 0.1, 1000
	}))
	// Even prompts are always solved; odd ones never.
	for range 400 {
		l := m.lease(8)
		if l == nil {
			break
		}
		m.answer(l, func(q uint32) (uint16, uint16) { return 4 * uint16(1-q%2), 4 })
	}
	c := m.p.Count()
	if c.Retired < 14 || c.Retired > 20 {
		t.Fatalf("%d retired, want most of the 20 always-solved prompts (some are being revisited)", c.Retired)
	}
	for q := uint32(1); q < 40; q += 2 {
		if m.p.Retired(q) {
			t.Fatalf("prompt %d, never solved, is retired", q)
		}
	}
	// An always-failing prompt's rate 0 is below the band: weighed less.
	if m.p.InBand(1) || !m.p.InBand(0) && !m.p.Retired(0) {
		t.Fatal("band membership")
	}
}

func TestSegmentsRoundTripAndDamage(t *testing.T) {
	recs := []Record{
		{Kind: recLease, T: 5, Gen: "gen-1", K: 64},
		{Kind: recFeedback, T: 6, Lease: 3, Rows: []Row{{Prompt: 9, Version: 4, Counts: 2, Scores: []float32{0, 0.5, 1}}, {Prompt: 1 << 20, Passes: 3, N: 8}}},
		{Kind: recTrainer, T: 7, Step: 12},
		{Kind: recTick, T: 8},
		{Kind: recLeaseReq, T: 9, Gen: "gen-2", K: 8, Req: "0123456789abcdef0123456789abcdef"},
	}
	b := encodeSegment(1, 2, recs)
	s, err := decodeSegment(b)
	if err != nil || fmt.Sprint(s.recs) != fmt.Sprint(recs) || s.nonce != 1 || s.digest != 2 {
		t.Fatalf("round trip: %v %v", s, err)
	}
	for _, cut := range []int{0, 10, len(b) - 1} {
		if _, err := decodeSegment(b[:cut]); !errors.Is(err, errDamaged) {
			t.Fatalf("a segment torn at %d bytes: %v", cut, err)
		}
	}
	b[20] ^= 1
	if _, err := decodeSegment(b); !errors.Is(err, errDamaged) {
		t.Fatalf("a flipped bit: %v", err)
	}
	// Sizes: a feedback row of passes, and one of four scores.
	one := len(encodeSegment(0, 0, []Record{{Kind: recFeedback, T: 1 << 30, Lease: 1 << 20, Rows: make([]Row, 1)}}))
	two := len(encodeSegment(0, 0, []Record{{Kind: recFeedback, T: 1 << 30, Lease: 1 << 20, Rows: []Row{{Prompt: 999999, Version: 9999, N: 8}, {Prompt: 999999, Version: 9999, Scores: make([]float32, 4)}}}}))
	if row := two - one; row > 64+16 {
		t.Fatalf("a row of passes and one of 4 scores take %d bytes", row)
	}
}

func TestCheckRefusesBadAnswers(t *testing.T) {
	for _, w := range []Row{
		{Passes: 3, N: 2}, {N: 0}, {Scores: []float32{}}, {Scores: []float32{float32(math.NaN())}},
		{Scores: []float32{1.5}}, {Scores: []float32{-0.1}}, {Scores: []float32{float32(math.Inf(1))}},
	} {
		if err := checkRow(w); !errors.Is(err, ErrBadAnswer) {
			t.Errorf("%+v: %v, want ErrBadAnswer", w, err)
		}
	}
}

// TestNodesShareOnePlan runs two nodes' streams of one job over one store,
// leasing and answering at once: no prompt is leased to two at once, every
// step is full, and both nodes and a replay hold the same decisions.
func TestNodesShareOnePlan(t *testing.T) {
	ctx := context.Background()
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clock := time.UnixMilli(2e12)
	var cmu sync.Mutex
	now := func() time.Time { cmu.Lock(); defer cmu.Unlock(); clock = clock.Add(time.Millisecond); return clock }
	books := []*Book{NewBook(0, now), NewBook(0, now)}
	if _, made, err := books[0].Make(ctx, st, "d", "rl", "ix", 500, Spec{Step: 16, Ahead: 4, Redraws: 1, Seed: 3}); err != nil || !made {
		t.Fatal(made, err)
	}
	if _, made, err := books[1].Make(ctx, st, "d", "rl", "ix", 500, Spec{Step: 16, Ahead: 4, Redraws: 1, Seed: 3}); err != nil || made {
		t.Fatalf("the same spec again: made %v, %v", made, err)
	}
	if _, _, err := books[1].Make(ctx, st, "d", "rl", "ix", 500, Spec{Step: 8}); !errors.Is(err, ErrExists) {
		t.Fatalf("another spec: %v", err)
	}
	var hmu sync.Mutex
	holder := map[uint32]string{}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			s, err := books[g%2].Open(ctx, st, "d", "rl")
			if err != nil {
				t.Error(err)
				return
			}
			name := fmt.Sprint("g", g)
			for range 40 {
				l, err := s.Lease(ctx, name, 8)
				if errors.Is(err, ErrWindow) {
					s.Train(ctx, 1<<62)
					full := uint64(0)
					s.View(func(p *Plan) { full = p.Steps().Full() })
					if err := s.Train(ctx, full); err != nil {
						t.Error(err)
					}
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				hmu.Lock()
				for _, q := range l.Prompts {
					if h, ok := holder[q]; ok {
						t.Errorf("prompt %d leased to %s while %s holds it", q, name, h)
					}
					holder[q] = name
				}
				hmu.Unlock()
				rows := make([]Row, len(l.Prompts))
				for i, q := range l.Prompts {
					rows[i] = Row{Prompt: q, Passes: uint16(q % 3), N: 2}
				}
				hmu.Lock()
				for _, q := range l.Prompts {
					delete(holder, q)
				}
				hmu.Unlock()
				if _, err := s.Answer(ctx, l.ID, rows); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	var digests []uint64
	for _, b := range books {
		s, _ := b.Open(ctx, st, "d", "rl")
		if err := s.refresh(ctx); err != nil {
			t.Fatal(err)
		}
		d, equal, segs, err := s.Replay(ctx, nil, nil)
		if err != nil || !equal {
			t.Fatalf("replay: equal %v, %v", equal, err)
		}
		_, _, _, diverged := s.Log()
		if diverged != 0 {
			t.Fatalf("segment %d was written after other decisions", diverged)
		}
		digests = append(digests, d)
		t.Logf("%d segments", segs)
	}
	if digests[0] != digests[1] {
		t.Fatal("the nodes' plans differ")
	}
}

// TestForgetKeepsTheDecisions: a plan that keeps two steps behind its
// trainer forgets the older ones, in pieces, and decides as one that
// keeps them all: the same digest, the same steps where both hold them.
func TestForgetKeepsTheDecisions(t *testing.T) {
	run := func(keep int) *sim {
		m := newSim(t, spec(50, 4, func(s *Spec) { s.Keep = keep; s.Ahead = 2 }))
		for range 600 {
			l := m.lease(3)
			if l == nil {
				m.train()
				continue
			}
			var rows []Row
			for i, q := range l.Prompts {
				rows = append(rows, Row{Prompt: q, Scores: []float32{float32(i % 2), 0.5}})
			}
			m.apply(Record{Kind: recFeedback, Lease: l.ID, Rows: rows})
		}
		return m
	}
	few, all := run(2), run(MaxKeep)
	if few.p.Digest() != all.p.Digest() {
		t.Fatal("forgetting steps changed a decision")
	}
	if x := few.p.steps.doms[0]; x.cbase == 0 || len(x.counted) > 4*2*2+8 {
		t.Fatalf("kept %d counted answers from %d", len(x.counted), x.cbase)
	}
	full := few.p.Steps().Full()
	for s := range full {
		c, ok := few.p.Steps().Step(s)
		if ok != !few.p.Steps().Forgotten(s) {
			t.Fatalf("step %d: held %v, forgotten %v", s, ok, few.p.Steps().Forgotten(s))
		}
		if !ok {
			continue
		}
		d, _ := all.p.Steps().Step(s)
		for i := range c {
			if c[i] != d[i] || fmt.Sprint(few.p.Steps().Scores(c[i])) != fmt.Sprint(all.p.Steps().Scores(d[i])) {
				t.Fatalf("step %d differs where both hold it", s)
			}
		}
	}
	if few.p.Steps().Forgotten(full - 1) {
		t.Fatal("the last step is forgotten")
	}
}

// TestStarvedSaysSo: a job whose every answer is flat under dynamic
// sampling serves passes and fills no step; once a pass ends having
// counted nothing, the plan says so, and a step's refusal tells why.
func TestStarvedSaysSo(t *testing.T) {
	m := newSim(t, spec(10, 4, func(s *Spec) { s.Redraws = 1; s.Ahead = 100 }))
	if c := m.p.Count(); c.LastPassCounted != -1 || m.p.starvedHint() != "" {
		t.Fatalf("before a pass ends: %+v", c)
	}
	for range 40 {
		if l := m.lease(5); l != nil {
			m.answer(l, func(uint32) (uint16, uint16) { return 4, 4 })
		}
	}
	if c := m.p.Count(); c.LastPassCounted != 0 || m.p.Steps().Full() != 0 {
		t.Fatalf("after flat passes: %+v", c)
	}
	if h := m.p.starvedHint(); !strings.Contains(h, "counted no prompt") || !strings.Contains(h, "redraws=1") {
		t.Fatalf("the hint: %q", h)
	}
	// One pass that counts ends the starvation's report.
	for range 20 {
		if l := m.lease(5); l != nil {
			m.answer(l, func(uint32) (uint16, uint16) { return 2, 4 })
		}
	}
	if m.p.Count().LastPassCounted == 0 {
		t.Fatalf("after passes that count: %+v", m.p.Count())
	}
}

// TestLeaseAskedAgainIsTheSameLease: a lease asked again with its request
// ID, of the node that made it or of another that has not read its
// segment yet, is the lease that ID made, and the plan holds one; after
// its deadline, or without an ID, a lease is a new one. The reproduction
// (docs/tasks.md's generator loop): a lease sent on a connection that the
// gateway's restart had closed was sent once and raised, and a client
// that sent it again could make a second lease whose prompts no one
// answered until it expired.
func TestLeaseAskedAgainIsTheSameLease(t *testing.T) {
	ctx := context.Background()
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	clock := time.UnixMilli(2e12)
	var cmu sync.Mutex
	now := func() time.Time { cmu.Lock(); defer cmu.Unlock(); return clock }
	advance := func(d time.Duration) { cmu.Lock(); defer cmu.Unlock(); clock = clock.Add(d) }
	books := []*Book{NewBook(0, now), NewBook(0, now)}
	spec := Spec{Step: 4, Ahead: 4, TTL: Duration(time.Second), Seed: 3}
	if _, _, err := books[0].Make(ctx, st, "d", "rl", "ix", 100, spec); err != nil {
		t.Fatal(err)
	}
	a, err := books[0].Open(ctx, st, "d", "rl")
	if err != nil {
		t.Fatal(err)
	}
	b, err := books[1].Open(ctx, st, "d", "rl") // before the lease: b has not read it
	if err != nil {
		t.Fatal(err)
	}
	first, err := a.LeaseOnce(ctx, "g", 3, "req-1")
	if err != nil {
		t.Fatal(err)
	}
	advance(10 * time.Millisecond)
	for name, s := range map[string]*Stream{"the node that made it": a, "another node": b} {
		again, err := s.LeaseOnce(ctx, "g", 3, "req-1")
		if err != nil || again.ID != first.ID || fmt.Sprint(again.Prompts) != fmt.Sprint(first.Prompts) {
			t.Fatalf("asked again of %s: lease %d %v (%v), want lease %d %v", name, again.ID, again.Prompts, err, first.ID, first.Prompts)
		}
	}
	other, err := b.LeaseOnce(ctx, "g2", 3, "req-1") // another generator's ID
	if err != nil || other.ID == first.ID {
		t.Fatalf("another generator with the same ID: lease %d (%v), want a new lease", other.ID, err)
	}
	plain, err := a.Lease(ctx, "g", 1)
	if err != nil || plain.ID == first.ID {
		t.Fatalf("a lease without an ID: lease %d (%v), want a new one", plain.ID, err)
	}
	for _, s := range []*Stream{a, b} {
		if err := s.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		var made uint64
		var leased int
		s.View(func(p *Plan) { made, leased = p.Leases().Made(), p.Leases().Leased() })
		if made != 3 || leased != 7 {
			t.Fatalf("the plan holds %d leases of %d prompts, want 3 of 7", made, leased)
		}
	}
	advance(2 * time.Second) // past its deadline: a new lease
	late, err := b.LeaseOnce(ctx, "g", 3, "req-1")
	if err != nil || late.ID == first.ID {
		t.Fatalf("asked again past the deadline: lease %d (%v), want a new one", late.ID, err)
	}
	if _, err := a.LeaseOnce(ctx, "g", 1, strings.Repeat("x", MaxRequestID+1)); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("a request ID over %d bytes: %v", MaxRequestID, err)
	}
}

// TestDamagedSegmentNeverForksThePlan: a byte flipped in a segment in the
// middle of a 60-segment log, or its last segment torn, read by a fresh
// node: the segment's second copy is read, and the plan is the one that
// served (the same counted prompts, the same digest, the replay equal).
// Both copies damaged: the job is refused naming the segment, never read
// as if the segment were empty (which halved the counts and leased counted
// prompts again).
func TestDamagedSegmentNeverForksThePlan(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := s3backend.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.UnixMilli(2e12)
	now := func() time.Time { clock = clock.Add(time.Millisecond); return clock }
	spec := Spec{Step: 2, Ahead: 100, Seed: 3}
	if _, _, err := NewBook(0, now).Make(ctx, st, "d", "rl", "ix", 200, spec); err != nil {
		t.Fatal(err)
	}
	s, err := NewBook(0, now).Open(ctx, st, "d", "rl")
	if err != nil {
		t.Fatal(err)
	}
	for segs, _, _, _ := s.Log(); segs < 60; segs, _, _, _ = s.Log() {
		l, err := s.Lease(ctx, "g", 2)
		if err != nil {
			t.Fatal(err)
		}
		rows := make([]Row, len(l.Prompts))
		for i, q := range l.Prompts {
			rows[i] = Row{Prompt: q, Passes: 1, N: 2}
		}
		if _, err := s.Answer(ctx, l.ID, rows); err != nil {
			t.Fatal(err)
		}
	}
	state := func(s *Stream) (counted, digest uint64) {
		s.View(func(p *Plan) { counted, digest = p.Steps().Total(), p.Digest() })
		return
	}
	counted, digest := state(s)
	if counted != 60 {
		t.Fatalf("%d prompts counted after 30 leases of 2 answered, want 60", counted)
	}
	file := func(key string) string { return filepath.Join(dir, filepath.FromSlash(key)) }
	flip := func(key string) func() {
		b, err := os.ReadFile(file(key))
		if err != nil {
			t.Fatal(err)
		}
		d := bytes.Clone(b)
		d[len(d)/2] ^= 0x10
		if err := os.WriteFile(file(key), d, 0o644); err != nil {
			t.Fatal(err)
		}
		return func() { os.WriteFile(file(key), b, 0o644) }
	}
	tear := func(key string) func() {
		b, err := os.ReadFile(file(key))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file(key), b[:len(b)-3], 0o644); err != nil {
			t.Fatal(err)
		}
		return func() { os.WriteFile(file(key), b, 0o644) }
	}
	for _, c := range []struct {
		name string
		seg  uint64
		hurt func(string) func()
	}{
		{"a byte flipped in segment 31 of 60", 31, flip},
		{"the last segment torn", 60, tear},
	} {
		undo := c.hurt(segmentKey("rl", c.seg))
		fresh, err := NewBook(0, now).Open(ctx, st, "d", "rl")
		if err != nil {
			t.Fatalf("%s, its second copy whole: %v", c.name, err)
		}
		if n, d := state(fresh); n != counted || d != digest {
			t.Fatalf("%s, read by a fresh node: %d counted (digest %x), want %d (%x)", c.name, n, d, counted, digest)
		}
		if segs, _, damaged, diverged := fresh.Log(); segs != 60 || damaged != 1 || diverged != 0 {
			t.Fatalf("%s: %d segments, %d read from their second copy, diverged at %d; want 60, 1, 0", c.name, segs, damaged, diverged)
		}
		if _, equal, _, err := fresh.Replay(ctx, nil, nil); err != nil || !equal {
			t.Fatalf("%s: the replay: equal %v, %v", c.name, equal, err)
		}

		undoCopy := c.hurt(copyKey("rl", c.seg))
		_, err = NewBook(0, now).Open(ctx, st, "d", "rl")
		var de *DamagedSegmentError
		if !errors.As(err, &de) || de.Segment != c.seg || !errors.Is(err, ErrDamaged) {
			t.Fatalf("%s in both copies, read by a fresh node: %v, want the job refused naming segment %d", c.name, err, c.seg)
		}
		if _, _, _, err := s.Replay(ctx, nil, nil); !errors.As(err, &de) || de.Segment != c.seg {
			t.Fatalf("%s in both copies: the replay: %v, want it refused naming segment %d", c.name, err, c.seg)
		}
		undoCopy()
		undo()
	}
}
