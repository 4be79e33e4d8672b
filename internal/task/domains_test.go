package task

import (
	"errors"
	"fmt"
	"math"
	"testing"
)

// domainSpec is a spec of three domains of 50, 30 and 10 prompts at
// 0.5/0.3/0.2, steps of b: the last runs out first.
func domainSpec(b int, mods ...func(*Spec)) Spec {
	doms := []Domain{{Dataset: "math", Ratio: 0.5, Prompts: 50}, {Dataset: "code", Ratio: 0.3, Prompts: 30}, {Dataset: "chat", Ratio: 0.2, Prompts: 10}}
	return spec(90, b, append([]func(*Spec){func(s *Spec) { s.Domains = doms }}, mods...)...)
}

// run leases k prompts at a time and answers them (passes by f), moving
// the trainer along, for rounds rounds.
func (m *sim) run(rounds, k int, f func(q uint32) (uint16, uint16)) {
	for range rounds {
		l := m.lease(k)
		if l == nil {
			m.train()
			continue
		}
		m.answer(l, f)
		if m.p.Window() == 0 {
			m.train()
		}
	}
}

// shares holds every full step to its domains' shares: each domain's
// prompts of a step within one of b·ratio, and in the steps up to any
// within one of their share in all.
func (m *sim) shares(ratios []float64) {
	m.t.Helper()
	var sum float64
	for _, r := range ratios {
		sum += r
	}
	total := make([]int, len(ratios))
	full := m.p.Steps().Full()
	if full == 0 {
		m.t.Fatal("no step full")
	}
	for s := range full {
		c, ok := m.p.Steps().Step(s)
		if !ok {
			m.t.Fatalf("step %d of %d full: not held", s, full)
		}
		n := make([]int, len(ratios))
		for _, x := range c {
			d, _ := m.p.PromptOf(x.Prompt)
			n[d]++
			total[d]++
		}
		for d, r := range ratios {
			want := float64(m.p.spec.Step) * r / sum
			if math.Abs(float64(n[d])-want) >= 1 {
				m.t.Fatalf("step %d: %d prompts of domain %d, its share %.2f", s, n[d], d, want)
			}
			if all := float64(s+1) * want; math.Abs(float64(total[d])-all) >= 1 {
				m.t.Fatalf("steps 0–%d: %d prompts of domain %d, its share %.2f", s, total[d], d, all)
			}
		}
	}
}

// TestDomainSteps: a job of three domains at 0.5/0.3/0.2 in steps of 10:
// every full step holds 5, 3 and 2 of their prompts, every domain's
// prompts counted once a pass of its own (the small domain wraps and is
// reshuffled on its own while the large one is in its first pass), and
// the log replayed decides alike.
func TestDomainSteps(t *testing.T) {
	m := newSim(t, domainSpec(10, func(s *Spec) { s.Ahead = 3 }))
	m.run(1500, 7, func(q uint32) (uint16, uint16) { return uint16(q % 5), 4 + uint16(q%3) })
	m.shares([]float64{0.5, 0.3, 0.2})
	if m.p.Steps().Full() < 40 {
		t.Fatalf("%d steps full", m.p.Steps().Full())
	}
	passes := map[int]uint32{}
	for d, dm := range m.p.doms {
		passes[d] = dm.cur
		for _, q := range dm.ids {
			for pass := range dm.cur {
				if n := m.counted[[2]uint32{q, pass}]; n != 1 {
					t.Fatalf("domain %d's prompt %d counted %d times in its pass %d (%d passes started)", d, q, n, pass, dm.cur)
				}
			}
		}
	}
	if passes[2] <= passes[0] {
		t.Fatalf("the domains' passes %v: the smallest share of the most prompts wraps first", passes)
	}
	if m.replayed() != m.p.Digest() {
		t.Fatal("the replay decided otherwise")
	}
}

// TestSharedPasses: with domain_passes=shared, the job's pass ends when
// a domain runs out, every domain starting its next: the domains are
// always in one pass, the steps keep their shares, and no prompt counts
// twice in a pass.
func TestSharedPasses(t *testing.T) {
	m := newSim(t, domainSpec(10, func(s *Spec) { s.Ahead = 3; s.DomainPasses = PassesShared }))
	m.run(1500, 7, func(q uint32) (uint16, uint16) { return 1, 4 })
	m.shares([]float64{0.5, 0.3, 0.2})
	cur := m.p.doms[0].cur
	for d, dm := range m.p.doms {
		if dm.cur != cur {
			t.Fatalf("domain %d in pass %d, domain 0 in %d: shared passes", d, dm.cur, cur)
		}
	}
	if cur < 5 {
		t.Fatalf("%d passes", cur)
	}
	for k, n := range m.counted {
		if n != 1 {
			t.Fatalf("prompt %d counted %d times in pass %d", k[0], n, k[1])
		}
	}
	if m.replayed() != m.p.Digest() {
		t.Fatal("the replay decided otherwise")
	}
}

// TestExclusionAtOnce: prompts excluded are never leased after the
// exclusion; one held by a lease then is answered but not counted (the
// answer says so), and the plan's places account for every prompt.
func TestExclusionAtOnce(t *testing.T) {
	m := newSim(t, domainSpec(10, func(s *Spec) { s.Ahead = 4 }))
	m.run(100, 7, func(q uint32) (uint16, uint16) { return 1, 4 })
	held := m.lease(7)
	if held == nil {
		t.Fatal("no lease")
	}
	// Excluded: one prompt of the lease held, a prompt of each domain.
	gone := map[uint32]bool{held.Prompts[0]: true, 3: true, 60: true, 85: true}
	var ids []uint32
	for q := range gone {
		ids = append(ids, q)
	}
	out := m.apply(Record{Kind: recExclude, IDs: append(ids, 3)})
	if out.Err != nil || out.Edited.Excluded != len(gone) {
		t.Fatalf("the exclusion: %+v", out)
	}
	a := m.answer(held, func(q uint32) (uint16, uint16) { return 1, 4 })
	if a.Excluded != 1 || a.Applied != len(held.Prompts) || a.Counted != len(held.Prompts)-1 {
		t.Fatalf("a lease holding an excluded prompt answered: %+v", a)
	}
	full := m.p.Steps().Full()
	for range 800 {
		l := m.lease(7)
		if l == nil {
			m.train()
			continue
		}
		for _, q := range l.Prompts {
			if gone[q] {
				t.Fatalf("prompt %d leased after its exclusion", q)
			}
		}
		m.answer(l, func(q uint32) (uint16, uint16) { return 1, 4 })
		if m.p.Window() == 0 {
			m.train()
		}
	}
	for s := full; s < m.p.Steps().Full(); s++ {
		c, _ := m.p.Steps().Step(s)
		for _, x := range c {
			if gone[x.Prompt] {
				t.Fatalf("prompt %d counted in step %d after its exclusion", x.Prompt, s)
			}
		}
	}
	if c := m.p.Count(); c.Excluded != len(gone) || c.Pending+c.Leased+c.Front+c.Waiting+c.Retired+c.Excluded != m.p.Prompts() {
		t.Fatalf("places: %+v of %d prompts", c, m.p.Prompts())
	}
	m.shares([]float64{0.5, 0.3, 0.2})
	if m.replayed() != m.p.Digest() {
		t.Fatal("the replay decided otherwise")
	}
}

// TestAppendNextPass: prompts appended to a domain are leased in its
// next pass, not before, and every one of them is counted in it.
func TestAppendNextPass(t *testing.T) {
	m := newSim(t, domainSpec(10, func(s *Spec) { s.Ahead = 4 }))
	m.run(20, 7, func(q uint32) (uint16, uint16) { return 1, 4 })
	pass := m.p.doms[1].cur
	out := m.apply(Record{Kind: recAppend, Domain: 1, Index: "v2", N: 12})
	if out.Err != nil || out.Edited.Appended != 12 || m.p.Prompts() != 102 || m.p.DomainIndex(1) != "v2" {
		t.Fatalf("the append: %+v, %d prompts", out, m.p.Prompts())
	}
	for range 1500 {
		l := m.lease(7)
		if l == nil {
			m.train()
			continue
		}
		for i, q := range l.Prompts {
			if q >= 90 && l.Passes[i] <= pass {
				t.Fatalf("appended prompt %d leased for pass %d, its domain's pass when appended", q, l.Passes[i])
			}
		}
		m.answer(l, func(q uint32) (uint16, uint16) { return 1, 4 })
		if m.p.Window() == 0 {
			m.train()
		}
	}
	for q := uint32(90); q < 102; q++ {
		if d, local := m.p.PromptOf(q); d != 1 || local != 30+int(q-90) {
			t.Fatalf("appended prompt %d is domain %d's %d", q, d, local)
		}
		if n := m.counted[[2]uint32{q, pass + 1}]; n != 1 {
			t.Fatalf("appended prompt %d counted %d times in its domain's next pass", q, n)
		}
	}
	m.shares([]float64{0.5, 0.3, 0.2})
	if m.replayed() != m.p.Digest() {
		t.Fatal("the replay decided otherwise")
	}
}

// TestRatioEdit: ratios edited from a step not yet full: the steps before
// keep their prompts, those from it on hold the new shares; an edit from
// a full step is refused, naming the first editable one.
func TestRatioEdit(t *testing.T) {
	m := newSim(t, domainSpec(10, func(s *Spec) { s.Ahead = 2 }))
	m.run(60, 5, func(q uint32) (uint16, uint16) { return 1, 4 })
	full := m.p.Steps().Full()
	if full < 3 {
		t.Fatalf("%d steps full", full)
	}
	before := make([][]Counted, full)
	for s := range full {
		c, _ := m.p.Steps().Step(s)
		before[s] = append([]Counted(nil), c...)
	}
	out := m.apply(Record{Kind: recRatios, Step: full - 1, Weights: []uint64{1, 1, 2}})
	var sf *StepFullError
	if !errors.As(out.Err, &sf) || sf.First != full {
		t.Fatalf("an edit from full step %d: %v; want the first editable step %d", full-1, out.Err, full)
	}
	from := full + 1
	if out := m.apply(Record{Kind: recRatios, Step: from, Weights: []uint64{1, 1, 2}}); out.Err != nil {
		t.Fatal(out.Err)
	}
	m.run(600, 5, func(q uint32) (uint16, uint16) { return 1, 4 })
	for s := range full {
		c, _ := m.p.Steps().Step(s)
		for i := range c {
			if c[i] != before[s][i] {
				t.Fatalf("step %d changed by the edit", s)
			}
		}
	}
	if m.p.Steps().Full() < from+10 {
		t.Fatalf("%d steps full", m.p.Steps().Full())
	}
	for s := from; s < m.p.Steps().Full(); s++ {
		c, _ := m.p.Steps().Step(s)
		n := make([]int, 3)
		for _, x := range c {
			d, _ := m.p.PromptOf(x.Prompt)
			n[d]++
		}
		for d, want := range []float64{2.5, 2.5, 5} {
			if math.Abs(float64(n[d])-want) >= 1 {
				t.Fatalf("step %d after the edit: %v prompts of the domains", s, n)
			}
		}
	}
	if m.replayed() != m.p.Digest() {
		t.Fatal("the replay decided otherwise")
	}
}

// TestLeaseByRequestAmongMany: a lease asked again with its request ID is
// found among 20,000 open leases by its generator and ID (a map, not a
// walk over the open leases), not after it is answered or expired, and
// after a snapshot restores the plan (a snapshot kept no request IDs, so
// an ask again after a node loaded one made a second lease).
func TestLeaseByRequestAmongMany(t *testing.T) {
	m := newSim(t, spec(40000, 32, func(s *Spec) { s.Ahead = 1 << 10; s.MaxLease = 2 }))
	var last *Lease
	for i := range 20000 {
		out := m.apply(Record{Kind: recLeaseReq, Gen: fmt.Sprint("g", i%8), K: 1, Req: fmt.Sprint("r", i)})
		if out.Lease == nil {
			t.Fatalf("lease %d: %v", i, out.Err)
		}
		last = out.Lease
	}
	again := m.apply(Record{Kind: recLeaseReq, Gen: "g7", K: 1, Req: "r19999"})
	if again.Lease == nil || again.Lease.ID != last.ID || m.p.Leases().Made() != 20000 {
		t.Fatalf("asked again: %+v; want lease %d, no other made", again.Lease, last.ID)
	}
	if _, ok := m.p.Leases().ByRequest("g6", "r19999"); ok {
		t.Fatal("another generator's request found the lease")
	}
	st := &Stream{plan: m.p}
	b, err := st.encodeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	r := &Stream{plan: NewPlan(m.p.spec)}
	if err := r.restore(b); err != nil {
		t.Fatal(err)
	}
	if l, ok := r.plan.Leases().ByRequest("g7", "r19999"); !ok || l.ID != last.ID {
		t.Fatalf("after a snapshot's restore: %+v, %v", l, ok)
	}
	m.answer(last, func(uint32) (uint16, uint16) { return 1, 2 })
	if _, ok := m.p.Leases().ByRequest("g7", "r19999"); ok {
		t.Fatal("an answered lease found by its request")
	}
}

// BenchmarkLeaseByRequest: an ask again with its request ID among 20,000
// open leases.
func BenchmarkLeaseByRequest(b *testing.B) {
	p := NewPlan(spec(40000, 32, func(s *Spec) { s.Ahead = 1 << 10; s.MaxLease = 2 }))
	for i := range 20000 {
		p.Apply(Record{Kind: recLeaseReq, Gen: fmt.Sprint("g", i%8), K: 1, Req: fmt.Sprint("r", i)})
	}
	b.ResetTimer()
	for range b.N {
		if _, ok := p.Leases().ByRequest("g7", "r19999"); !ok {
			b.Fatal("not found")
		}
	}
}
