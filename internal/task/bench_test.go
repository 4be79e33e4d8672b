package task

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/seeded"
	"github.com/brandgw/brand/s3backend"
)

// The targets for a node: re-planning after 10,000 feedback rows
// in at most 100 ms, leasing at least 10,000 prompts a second, a log of
// at most 64 bytes a feedback row plus 4 a score. These benchmarks
// measure the plan and the log on their own; brand-bench tasks measures
// them through HTTP (docs/benchmarks.md, "Task streams").
//
//	go test ./internal/task -run XXX -bench .

// benchPrompts, benchLease and benchScores are the run: a
// 100,000-prompt curriculum with dynamic sampling, leases of 64, answers
// of 8 scores.
const (
	benchPrompts = 100_000
	benchLease   = 64
	benchScores  = 8
	benchGens    = 8
)

func benchSpec() Spec {
	return spec(benchPrompts, 256, func(s *Spec) { s.Policy, s.Redraws, s.Retire, s.Seed = "curriculum", 2, 3, 7 })
}

// benchToyScores are brand-bench tasks' toy model's scores (cmd/brand-bench/
// internal/bench/tasks.go): prompt q answered n times at model version v
// of a run of steps steps under lease number lease, each 1 or 0.
func benchToyScores(q, v uint32, steps int, lease uint64, n int) []float32 {
	unit := func(x uint64) float64 { return float64(x>>11) / (1 << 53) }
	d := unit(seeded.Mix64(uint64(q) ^ 0x746f796469666669))
	p := 1 / (1 + math.Exp(-4*(0.2+0.6*float64(v)/float64(steps)-d)))
	h := seeded.Mix64(seeded.Mix64(uint64(q)^0x746f7973636f7265) ^ lease)
	out := make([]float32, n)
	for j := range out {
		if unit(seeded.Mix64(h^uint64(j))) < p {
			out[j] = 1
		}
	}
	return out
}

// benchRun drives a plan of s as brand-bench tasks' generators and
// trainer do, benchGens leases in flight at once, until at least rows
// feedback rows are applied, and returns the plan and the records
// applied, each a millisecond after the one before.
func benchRun(tb testing.TB, s Spec, rows int) (p *Plan, recs []Record) {
	tb.Helper()
	p = NewPlan(s)
	clock := uint64(0)
	apply := func(r Record) Outcome {
		clock++
		r.T = clock
		recs = append(recs, r)
		return p.Apply(r)
	}
	applied := 0
	for applied < rows {
		var leases []*Lease
		for range benchGens {
			out := apply(Record{Kind: recLease, Gen: "g", K: benchLease})
			if out.Err != nil {
				break // the window: answer what is out, and train
			}
			leases = append(leases, out.Lease)
		}
		if len(leases) == 0 {
			tb.Fatalf("nothing to lease at step %d: %v", p.Steps().Full(), p.nothingToLease())
		}
		for _, l := range leases {
			var rs []Row
			for _, q := range l.Prompts {
				rs = append(rs, Row{Prompt: q, Version: uint32(p.Trainer()), Scores: benchToyScores(q, uint32(p.Trainer()), 1000, l.ID, benchScores)})
			}
			if out := apply(Record{Kind: recFeedback, Lease: l.ID, Rows: rs}); out.Err != nil {
				tb.Fatal(out.Err)
			}
			applied += len(rs)
		}
		if full := p.Steps().Full(); full > p.Trainer() {
			apply(Record{Kind: recTrainer, Step: full})
		}
	}
	return p, recs
}

// BenchmarkReplan is a node re-planning after 10,000 feedback rows: a
// fresh plan of the 100,000-prompt job (made outside the timer) applies a
// log of leases, their feedback (at least 10,000 rows) and the trainer's
// steps, then serves the next lease. ns/op is the whole; apply-ms and
// lease-µs split it.
func BenchmarkReplan(b *testing.B) {
	s := benchSpec()
	_, recs := benchRun(b, s, 10_000)
	rows := 0
	for _, r := range recs {
		rows += len(r.Rows)
	}
	last := recs[len(recs)-1].T
	var apply, lease time.Duration
	for b.Loop() {
		b.StopTimer()
		p := NewPlan(s)
		b.StartTimer()
		t0 := time.Now()
		for _, r := range recs {
			p.Apply(r)
		}
		t1 := time.Now()
		out := p.Apply(Record{Kind: recLease, T: last, Gen: "next", K: benchLease})
		t2 := time.Now()
		if out.Lease == nil || len(out.Lease.Prompts) != benchLease {
			b.Fatalf("the next lease: %+v", out)
		}
		apply += t1.Sub(t0)
		lease += t2.Sub(t1)
	}
	b.ReportMetric(float64(rows), "rows")
	b.ReportMetric(float64(len(recs)), "records")
	b.ReportMetric(apply.Seconds()*1e3/float64(b.N), "apply-ms")
	b.ReportMetric(lease.Seconds()*1e6/float64(b.N), "lease-µs")
}

// BenchmarkLeaseAnswer is the plan alone in its steady state, after
// 10,000 rows: a lease of 64 and its answer (8 scores each), the trainer
// kept a step behind. prompts/s is what one node's plan decides a second,
// without HTTP or the log.
func BenchmarkLeaseAnswer(b *testing.B) {
	p, recs := benchRun(b, benchSpec(), 10_000)
	clock := recs[len(recs)-1].T
	rows := make([]Row, 0, benchLease)
	scores := make([][]float32, 0, 1024)
	for i := range 1024 {
		scores = append(scores, benchToyScores(uint32(i), 0, 1000, 1, benchScores))
	}
	n := 0
	for b.Loop() {
		out := p.Apply(Record{Kind: recLease, T: clock, Gen: "g", K: benchLease})
		if out.Err != nil {
			p.Apply(Record{Kind: recTrainer, T: clock, Step: p.Steps().Full()})
			continue
		}
		rows = rows[:0]
		for _, q := range out.Lease.Prompts {
			rows = append(rows, Row{Prompt: q, Scores: scores[q%1024]})
		}
		if a := p.Apply(Record{Kind: recFeedback, T: clock, Lease: out.Lease.ID, Rows: rows}); a.Err != nil {
			b.Fatal(a.Err)
		}
		n += len(rows)
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "prompts/s")
}

// BenchmarkOpen is a cold node loading the job: Book.Open reads the spec
// and the log of BenchmarkReplan's run from a local store and replays
// it. The log is written as segments of 1 record (each request its own
// segment, as a node with one generator writes) and of 16 (a node
// grouping concurrent requests).
func BenchmarkOpen(b *testing.B) {
	s := benchSpec()
	_, recs := benchRun(b, s, 10_000)
	for _, per := range []int{1, 16} {
		b.Run(fmt.Sprintf("records-a-segment=%d", per), func(b *testing.B) {
			ctx := context.Background()
			st, err := s3backend.NewLocal(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			made := time.UnixMilli(2e12)
			now := func() time.Time { return made }
			if _, _, err := NewBook(0, now).Make(ctx, st, "d", "rl", "ix", benchPrompts, Spec{Step: s.Step, Policy: s.Policy, Redraws: s.Redraws, Retire: s.Retire, Seed: s.Seed}); err != nil {
				b.Fatal(err)
			}
			w := NewPlan(s)
			var segs, size int64
			for i := 0; i < len(recs); i += per {
				seg := recs[i:min(i+per, len(recs))]
				body := encodeSegment(1, w.Digest(), seg)
				segs++
				size += int64(len(body))
				if _, err := st.PutIfAbsent(ctx, segmentKey("rl", uint64(segs)), bytes.NewReader(body), int64(len(body))); err != nil {
					b.Fatal(err)
				}
				for _, r := range seg {
					w.Apply(r)
				}
			}
			for b.Loop() {
				str, err := NewBook(0, now).Open(ctx, st, "d", "rl")
				if err != nil {
					b.Fatal(err)
				}
				if n, _, damaged, diverged := str.Log(); n != uint64(segs) || damaged != 0 || diverged != 0 {
					b.Fatalf("opened %d segments (%d damaged, diverged at %d), want %d", n, damaged, diverged, segs)
				}
				str.View(func(p *Plan) {
					if p.Digest() != w.Digest() {
						b.Fatal("the load decided otherwise than the run")
					}
				})
			}
			b.ReportMetric(float64(segs), "segments")
			b.ReportMetric(float64(size), "log-bytes")
		})
	}
}

// BenchmarkStreamLeaseAnswer is one generator against one node's stream
// over a local store: a lease of 64 and its answer, each its own segment
// created (written, synced, linked) in the store before it is answered.
// It is what a request waits for the log, which brand-bench tasks' lease
// latency includes.
func BenchmarkStreamLeaseAnswer(b *testing.B) {
	ctx := context.Background()
	st, err := s3backend.NewLocal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	s := benchSpec()
	str, _, err := NewBook(0, nil).Make(ctx, st, "d", "rl", "ix", benchPrompts, Spec{Step: s.Step, Policy: s.Policy, Redraws: s.Redraws, Retire: s.Retire, Seed: s.Seed})
	if err != nil {
		b.Fatal(err)
	}
	score := []float32{1, 0, 1, 1, 0, 1, 0, 1} // counts: the steps fill
	rows := make([]Row, 0, benchLease)
	for b.Loop() {
		l, err := str.Lease(ctx, "g", benchLease)
		if err != nil {
			var full uint64
			str.View(func(p *Plan) { full = p.Steps().Full() })
			if err := str.Train(ctx, full); err != nil {
				b.Fatal(err)
			}
			continue
		}
		rows = rows[:0]
		for _, q := range l.Prompts {
			rows = append(rows, Row{Prompt: q, Scores: score})
		}
		if _, err := str.Answer(ctx, l.ID, rows); err != nil {
			b.Fatal(err)
		}
	}
}
