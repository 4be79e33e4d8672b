package task

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/job/editproto"
	"github.com/brandgw/brand/s3backend"
)

// TestModel draws task jobs — random policies, step sizes, windows,
// dynamic sampling, retirement and revisits — and runs each over three
// nodes of one store with random leases, answers (partial, repeated,
// late), trainer steps, time passing and nodes killed (a node's book
// dropped: it reads the job again from the store, from a snapshot
// written every few segments, some of them damaged; segments anywhere in
// the log flipped or torn, one copy or both). An independent
// account of the leases checks that no prompt is leased while another
// lease holds it and that every late answer, and only those, is refused;
// at the end every node's plan, and a replay of the log, made the same
// decisions, the replay's leases are the ones served, every step holds
// exactly its step's prompts, each prompt counts at most once a pass, and
// every prompt is in exactly one place. BRAND_TASK_MODEL_SEED runs one
// seed; BRAND_TASK_MODEL_SEEDS sets how many are drawn (default 24).
func TestModel(t *testing.T) {
	n := 12
	if v, err := strconv.Atoi(os.Getenv("BRAND_TASK_MODEL_SEEDS")); err == nil {
		n = v
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = uint64(i + 1)
	}
	if v, err := strconv.ParseUint(os.Getenv("BRAND_TASK_MODEL_SEED"), 10, 64); err == nil {
		seeds = []uint64{v}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { runModel(t, seed) })
	}
}

// modelLease is the account's lease: its prompts, deadline and answers.
type modelLease struct {
	prompts  []uint32
	deadline time.Time
	answered map[uint32]bool
}

func runModel(t *testing.T, seed uint64) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 0x7461736b))
	policy := []string{"uniform", "curriculum", "importance"}[rng.IntN(3)]
	spec := Spec{Seed: rng.Uint64(), Step: 1 + rng.IntN(8), Ahead: 1 + rng.IntN(4), Policy: policy,
		Redraws: rng.IntN(3), TTL: Duration(time.Duration(1+rng.IntN(3)) * time.Second)}
	if policy == "curriculum" {
		spec.Retire = rng.IntN(4)
		spec.Revisit = []float64{0, 0.3}[rng.IntN(2)]
	}
	prompts := 5 + rng.IntN(80)
	if rng.IntN(2) == 0 {
		// Domains: two or three prompt sets at random ratios, their
		// passes their own or the job's.
		prompts = 0
		for range 2 + rng.IntN(2) {
			n := 3 + rng.IntN(40)
			spec.Domains = append(spec.Domains, Domain{Dataset: fmt.Sprint("d", len(spec.Domains)), Ratio: float64(1+rng.IntN(9)) / 10, Prompts: n, Index: "ix"})
			prompts += n
		}
		spec.DomainPasses = []string{PassesOwn, PassesShared}[rng.IntN(2)]
	}
	t.Logf("%d prompts, spec %+v", prompts, spec)
	// phases are the domains' weights by step, as the edits made them.
	type phase struct {
		from    uint64
		weights []uint64
	}
	phases := []phase{{0, domainWeights(spec.Domains)}}
	excluded := map[uint32]bool{}
	local, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// The store fills now and then (a second copy not written): the
	// request is refused (ErrStore), and made again once there is room —
	// a lease with the request ID it was asked with.
	st := &fullStore{Local: local}
	again := func(f func() error) error {
		err := f()
		if errors.Is(err, ErrStore) {
			st.mu.Lock()
			full := st.full
			st.mu.Unlock()
			if full {
				st.setFull(false)
				err = f()
			}
		}
		return err
	}
	clock := time.UnixMilli(1.8e12)
	now := func() time.Time { return clock }
	// Snapshots every few segments, so that a node killed reads one back.
	every := uint64(2 + rng.IntN(6))
	newBook := func() *Book {
		b := NewBook(0, now)
		b.snapEvery = every
		return b
	}
	books := make([]*Book, 3)
	for i := range books {
		books[i] = newBook()
	}
	if _, _, err := books[0].Make(ctx, st, "d", "job", "ix", prompts, spec); err != nil {
		t.Fatal(err)
	}
	node := func() *Stream {
		s, err := books[rng.IntN(len(books))].Open(ctx, st, "d", "job")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ttl := time.Duration(spec.TTL)
	leases := map[uint64]*modelLease{}
	// answers is what each prompt's answers say: a model whose passes
	// depend on the prompt and how often it was answered.
	asked := map[uint32]int{}
	answer := func(q uint32) Row {
		asked[q]++
		switch (int(q) + asked[q]) % 4 {
		case 0:
			return Row{Prompt: q, Passes: 4, N: 4, Version: uint32(asked[q])}
		case 1:
			return Row{Prompt: q, Scores: []float32{0, 0, 0}}
		}
		return Row{Prompt: q, Passes: uint16(1 + int(q)%3), N: 4}
	}
	for op := 0; op < 400; op++ {
		// The kept counts are a recount's, after every operation.
		node().View(func(p *Plan) {
			if got, want := p.Count(), recount(p); got != want {
				t.Fatalf("op %d: the plan's counts %+v, a recount %+v", op, got, want)
			}
		})
		if rng.IntN(40) == 0 {
			st.setFull(true) // until a request finds it so
		}
		if rng.IntN(25) == 0 {
			// An edit: an exclusion, an append, or (of domains) a ratio
			// edit from a step not yet full.
			s := node()
			var n int
			s.View(func(p *Plan) { n = p.Prompts() })
			switch e := rng.IntN(3); {
			case e == 0:
				var ids []uint32
				for range 1 + rng.IntN(3) {
					ids = append(ids, uint32(rng.IntN(n)))
				}
				if err := again(func() error { _, err := s.Exclude(ctx, ids); return err }); err != nil {
					t.Fatalf("op %d: excluding %v: %v", op, ids, err)
				}
				for _, q := range ids {
					excluded[q] = true
				}
			case e == 1:
				d := rng.IntN(max(len(spec.Domains), 1))
				n := 1 + rng.IntN(8)
				if err := again(func() error { _, err := s.Append(ctx, d, fmt.Sprint("ix", op), n); return err }); err != nil {
					t.Fatalf("op %d: appending to domain %d: %v", op, d, err)
				}
			case len(spec.Domains) > 0:
				var full uint64
				s.View(func(p *Plan) { full = p.Steps().Full() })
				from := max(full+uint64(rng.IntN(3)), phases[len(phases)-1].from)
				w := make([]uint64, len(spec.Domains))
				for i := range w {
					w[i] = uint64(1 + rng.IntN(5))
				}
				err := again(func() error { _, err := s.EditRatios(ctx, from, w); return err })
				var sf *StepFullError
				switch {
				case errors.As(err, &sf):
					// Another node's steps filled past it meanwhile: the
					// refusal names the first editable step.
					if sf.First <= from {
						t.Fatalf("op %d: a ratio edit from step %d refused naming step %d", op, from, sf.First)
					}
				case err != nil:
					t.Fatalf("op %d: a ratio edit from step %d: %v", op, from, err)
				case phases[len(phases)-1].from == from:
					phases[len(phases)-1].weights = w
				default:
					phases = append(phases, phase{from, w})
				}
			}
			continue
		}
		switch r := rng.IntN(100); {
		case r < 40:
			s := node()
			gen, k, req := fmt.Sprint("g", rng.IntN(4)), 1+rng.IntN(6), fmt.Sprint("ask-", op)
			var l Lease
			err := again(func() (err error) { l, err = s.LeaseOnce(ctx, gen, k, req); return err })
			if errors.Is(err, ErrWindow) || errors.Is(err, ErrDone) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range l.Prompts {
				if excluded[q] {
					t.Fatalf("op %d: lease %d holds prompt %d, excluded", op, l.ID, q)
				}
			}
			at := s.plan.Time(l.T)
			for id, ml := range leases {
				if !at.Before(ml.deadline) {
					continue // expired by this lease's time
				}
				for _, q := range l.Prompts {
					if slices.Contains(ml.prompts, q) && !ml.answered[q] {
						t.Fatalf("op %d: lease %d got prompt %d, which lease %d holds until %v", op, l.ID, q, id, ml.deadline)
					}
				}
			}
			if leases[l.ID] != nil {
				t.Fatalf("op %d: lease %d made twice", op, l.ID)
			}
			leases[l.ID] = &modelLease{prompts: l.Prompts, deadline: at.Add(ttl), answered: map[uint32]bool{}}
		case r < 75:
			if len(leases) == 0 {
				continue
			}
			ids := make([]uint64, 0, len(leases))
			for id := range leases {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			id := ids[rng.IntN(len(ids))]
			ml := leases[id]
			var rows []Row
			for _, q := range ml.prompts {
				if rng.IntN(3) > 0 {
					rows = append(rows, answer(q))
				}
			}
			if len(rows) == 0 {
				continue
			}
			n := node()
			a, err := n.Answer(ctx, id, rows)
			retried := false
			if errors.Is(err, ErrStore) {
				// The store full: the answers may have been applied; sent
				// again, they are repeats.
				st.setFull(false)
				a, err = n.Answer(ctx, id, rows)
				retried = true
			}
			late := !clock.Before(ml.deadline)
			unanswered, gone := false, 0
			for _, w := range rows {
				unanswered = unanswered || !ml.answered[w.Prompt]
				if !ml.answered[w.Prompt] && excluded[w.Prompt] {
					gone++
				}
			}
			if err == nil && !late && !retried && a.Excluded != gone {
				t.Fatalf("op %d: an answer to lease %d of %d prompts excluded since it was made: %+v", op, id, gone, a)
			}
			switch {
			case late && unanswered && !IsExpired(err):
				t.Fatalf("op %d: an answer to lease %d at %v, after its deadline %v: %v, want an expiry", op, id, clock, ml.deadline, err)
			case !late && err != nil:
				t.Fatalf("op %d: an answer to lease %d before its deadline: %v", op, id, err)
			case !late:
				for _, w := range rows {
					ml.answered[w.Prompt] = true
				}
			}
		case r < 85:
			s := node()
			var full uint64
			s.View(func(p *Plan) { full = p.Steps().Full() })
			if err := again(func() error { return s.Train(ctx, full) }); err != nil {
				t.Fatal(err)
			}
		case r < 95:
			// In quarters of a second, so that answers and leases fall
			// on deadlines exactly.
			clock = clock.Add(time.Duration(rng.IntN(int(ttl/(250*time.Millisecond))+1)) * 250 * time.Millisecond)
		case r < 98:
			books[rng.IntN(len(books))] = newBook()
		case r < 99:
			damageSegment(t, ctx, local, rng)
			books[rng.IntN(len(books))] = newBook()
		default:
			// A snapshot torn or damaged in the store: the next load
			// falls back to an older one, or to the log.
			infos, _ := st.List(ctx, Prefix("job")+"snap/")
			if len(infos) > 0 {
				k := infos[rng.IntN(len(infos))].Key
				if err := st.Delete(ctx, k); err != nil {
					t.Fatal(err)
				}
				if _, err := st.Put(ctx, k, strings.NewReader("BTP1 torn"), 9); err != nil {
					t.Fatal(err)
				}
			}
			books[rng.IntN(len(books))] = newBook()
		}
	}

	// Every node, and a replay, made the same decisions; the replay's
	// leases are those served.
	var digest uint64
	for i, b := range books {
		s, err := b.Open(ctx, st, "d", "job")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		counted := map[[2]uint32]int{}
		d, equal, _, err := s.Replay(ctx,
			func(p *Plan, l Lease) {
				ml := leases[l.ID]
				if ml == nil || !slices.Equal(ml.prompts, l.Prompts) {
					t.Errorf("the replay's lease %d holds %v; served %v", l.ID, l.Prompts, ml)
				}
			},
			func(p *Plan, n uint64, c []Counted) {
				if len(c) != spec.Step {
					t.Errorf("step %d holds %d prompts, want %d", n, len(c), spec.Step)
				}
				if len(spec.Domains) > 0 {
					// Each domain's share of the step within one, by the
					// ratios in force at it.
					w := phases[0].weights
					for _, ph := range phases {
						if ph.from <= n {
							w = ph.weights
						}
					}
					var sum uint64
					for _, x := range w {
						sum += x
					}
					got := make([]int, len(w))
					for _, x := range c {
						d, _ := p.PromptOf(x.Prompt)
						got[d]++
					}
					for d := range w {
						if share := float64(spec.Step) * float64(w[d]) / float64(sum); math.Abs(float64(got[d])-share) >= 1 {
							t.Errorf("step %d holds %d prompts of domain %d, its share %.2f (weights %v)", n, got[d], d, share, w)
						}
					}
				}
				for _, x := range c {
					if counted[[2]uint32{x.Prompt, x.Pass}]++; counted[[2]uint32{x.Prompt, x.Pass}] > 1 {
						t.Errorf("prompt %d counted twice in pass %d", x.Prompt, x.Pass)
					}
				}
			})
		if err != nil || !equal {
			t.Fatalf("node %d: replay equal %v, %v", i, equal, err)
		}
		if _, _, _, diverged := s.Log(); diverged != 0 {
			t.Fatalf("node %d: segment %d was written after other decisions", i, diverged)
		}
		if i > 0 && d != digest {
			t.Fatalf("node %d's plan differs from node 0's", i)
		}
		digest = d
		s.View(func(p *Plan) {
			c := p.Count()
			if sum := c.Pending + c.Leased + c.Front + c.Waiting + c.Retired + c.Excluded; sum != p.Prompts() {
				t.Fatalf("node %d: %+v places %d prompts of %d", i, c, sum, prompts)
			}
			// Prompts excluded while a lease held them stay in it,
			// unanswered, until it is answered or expires.
			held := 0
			for _, l := range p.leases.open {
				for k, q := range l.prompts {
					if !l.done[k] && p.prompts[q].where == inExcluded {
						held++
					}
				}
			}
			if c.Leased+held != p.leases.leased {
				t.Fatalf("node %d: %d prompts leased and %d excluded in leases, the plan counts %d", i, c.Leased, held, p.leases.leased)
			}
			// The domains' queues, less the entries an exclusion left
			// there (passed over when reached).
			front, next := 0, 0
			for _, dm := range p.doms {
				for _, q := range dm.front[dm.fhead:] {
					if p.prompts[q].where == inFront {
						front++
					}
				}
				for _, q := range dm.next {
					if p.prompts[q].where == inNext {
						next++
					}
				}
				for local, w := range dm.tree.w {
					if q := dm.ids[local]; (w > 0) != (p.prompts[q].where == inPool) {
						t.Fatalf("node %d: prompt %d weighs %d in the pass, and is in place %d", i, q, w, p.prompts[q].where)
					}
				}
			}
			if c.Front != front {
				t.Fatalf("node %d: %d prompts at the front, its queues hold %d", i, c.Front, front)
			}
			if c.Waiting != next {
				t.Fatalf("node %d: %d prompts wait for the next pass, its lists hold %d", i, c.Waiting, next)
			}
		})
	}
}

// recount counts p's prompts one by one, as the kept counts must.
func recount(p *Plan) Counts {
	c := p.Count()
	c.Pending, c.Leased, c.Front, c.Waiting, c.Retired, c.Excluded, c.InBand, c.PassesDone = 0, 0, 0, 0, 0, 0, 0, math.MaxUint32
	for q := range p.prompts {
		switch p.prompts[q].where {
		case inPool:
			c.Pending++
		case inLease:
			c.Leased++
		case inFront:
			c.Front++
		case inNext:
			c.Waiting++
		case inRetired:
			c.Retired++
		case inExcluded:
			c.Excluded++
		}
		if p.InBand(uint32(q)) {
			c.InBand++
		}
		if w := p.prompts[q].where; w != inRetired && w != inExcluded {
			c.PassesDone = min(c.PassesDone, p.prompts[q].served)
		}
	}
	if c.PassesDone == math.MaxUint32 {
		c.PassesDone = p.Count().Pass
	}
	return c
}

// damageSegment flips a byte of, or tears, the first copy of a segment
// drawn from anywhere in the log; one time in four its second copy too,
// and then a node that loads the job must refuse it naming the segment
// (unless a snapshot after it spares it the read), before the second copy
// is put back. A node holding its plan goes on either way; one that loads
// it reads the second copy, and the run's checks (every node's plan and
// the replay the same, no prompt counted twice, every acknowledged answer
// in the plan) hold over it.
func damageSegment(t *testing.T, ctx context.Context, st *s3backend.Local, rng *rand.Rand) {
	t.Helper()
	infos, err := st.List(ctx, Prefix("job")+"log/")
	if err != nil || len(infos) == 0 {
		return
	}
	k := infos[rng.IntN(len(infos))].Key
	seg, err := strconv.ParseUint(strings.TrimPrefix(k, Prefix("job")+"log/"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	hurt := func(key string) (restore func()) {
		b, err := editproto.ReadObject(ctx, st, key, maxSegmentBytes)
		if err != nil {
			t.Fatal(err)
		}
		d := bytes.Clone(b)
		switch {
		case len(d) == 0:
			// Torn to nothing by an earlier damage of this copy: as
			// damaged as it gets.
		case rng.IntN(2) == 0:
			d[rng.IntN(len(d))] ^= byte(1 + rng.IntN(255))
		default:
			d = d[:rng.IntN(len(d))]
		}
		put := func(body []byte) {
			if _, err := st.Put(ctx, key, bytes.NewReader(body), int64(len(body))); err != nil {
				t.Fatal(err)
			}
		}
		put(d)
		return func() { put(b) }
	}
	if _, err := st.Stat(ctx, copyKey("job", seg)); err != nil {
		// Its second copy is missing, its writer having found the store
		// full (the next writer mends it): the first lost or damaged
		// now is both copies lost, which no log survives.
		return
	}
	if rng.IntN(3) == 0 {
		// Its first copy lost whole (deleted): read from its second.
		if err := st.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
		t.Logf("segment %d of %d: its first copy deleted", seg, len(infos))
		return
	}
	hurt(k)
	if rng.IntN(4) > 0 {
		t.Logf("segment %d of %d: its first copy damaged", seg, len(infos))
		return
	}
	restore := hurt(copyKey("job", seg))
	defer restore()
	_, err = NewBook(0, time.Now).Open(ctx, st, "d", "job")
	if de, ok := errors.AsType[*DamagedSegmentError](err); ok && de.Segment == seg {
		t.Logf("segment %d of %d: both copies damaged, the job refused: %v", seg, len(infos), err)
		return
	}
	if err != nil {
		t.Fatalf("segment %d damaged in both copies: a fresh node's load: %v, want it refused naming the segment", seg, err)
	}
	snaps, _ := st.List(ctx, Prefix("job")+"snap/")
	for _, in := range snaps {
		if n, err := strconv.ParseUint(strings.TrimPrefix(in.Key, Prefix("job")+"snap/"), 10, 64); err == nil && n >= seg {
			return
		}
	}
	t.Fatalf("segment %d damaged in both copies, and no snapshot after it: a fresh node loaded the job", seg)
}
