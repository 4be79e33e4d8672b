package task

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"time"

	"github.com/brandgw/brand/internal/job/editproto"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// SnapshotEvery is how many segments a job's log holds between
// snapshots: a node loading a job reads its last snapshot and at most
// this many segments after it, not the whole log. The node that writes
// segment k·SnapshotEvery writes the plan after it, under
// snap/<k·SnapshotEvery>, created once; a snapshot is a cache of the
// replay, which any node can check (GET /tasks/{job}/replay reads every
// segment).
const SnapshotEvery = 1024

var snapMagic = [4]byte{'B', 'T', 'P', '1'}

func snapshotKey(job string, segs uint64) string {
	return fmt.Sprintf("%ssnap/%016d", Prefix(job), segs)
}

// snapshot is a plan and its stream's counts, as gob encodes them. A
// snapshot of a plan of one domain from before domains (Doms empty) holds
// its domain's in the fields that follow Hist; it restores as such.
type snapshot struct {
	Segs, Diverged        uint64
	Bytes                 int64
	Damaged               int
	Prompts               []snapPrompt
	Hist                  []float32
	Cur                   uint32
	Front, Next, Retired  []uint32
	Clock                 uint64
	Status                []uint8
	Made                  []uint64
	Open                  []snapLease
	Leased                int
	Trainer               uint64
	Counted               []snapCounted
	Scores                []float32
	CBase, SBase          uint64
	Redrawn, Rested, Exp  int
	PassCounted, LastPass int
	Rows, Repeats         int64
	Digest                uint64

	Doms     []snapDomain
	Phases   []shuffle.SchedulePhase
	Excluded int
}

type snapPrompt struct {
	Served          uint32
	Local           uint32
	Redraws, Solves uint16
	Dom             uint16
	Where, HN, HAt  uint8
	Revisit         bool
}

type snapDomain struct {
	Index                 string
	Cur                   uint32
	Front, Next, Retired  []uint32
	Leased                int
	PassCounted, LastPass int
	Counted               []snapCounted
	Scores                []float32
	CBase, SBase          uint64
}

type snapLease struct {
	ID, T, Step     uint64
	Gen, Req        string
	Prompts, Passes []uint32
	Done            []bool
	Left            int
}

type snapCounted struct {
	Prompt, Pass, Version, ScoreN uint32
	Lease, ScoreAt                uint64
	Passes, N                     uint16
	Dom                           uint16
}

func snapCounts(c []Counted) []snapCounted {
	out := make([]snapCounted, len(c))
	for i, x := range c {
		out[i] = snapCounted{Prompt: x.Prompt, Pass: x.Pass, Version: x.Version, ScoreN: x.scoreN, Lease: x.Lease, ScoreAt: x.scoreAt, Passes: x.Passes, N: x.N, Dom: x.dom}
	}
	return out
}

func countsOf(c []snapCounted) []Counted {
	out := make([]Counted, len(c))
	for i, x := range c {
		out[i] = Counted{Prompt: x.Prompt, Pass: x.Pass, Version: x.Version, scoreN: x.ScoreN, Lease: x.Lease, scoreAt: x.ScoreAt, Passes: x.Passes, N: x.N, dom: x.Dom}
	}
	return out
}

// encodeSnapshot is the plan of s (s.mu held) as stored.
func (s *Stream) encodeSnapshot() ([]byte, error) {
	p := s.plan
	sn := snapshot{Segs: s.segs, Diverged: s.diverged, Bytes: s.bytes, Damaged: s.damaged, Hist: p.hist,
		Clock: p.clock, Status: p.leases.status, Made: p.leases.made, Leased: p.leases.leased, Trainer: p.trainer,
		Redrawn: p.stats.redrawn, Rested: p.stats.rested, Exp: p.stats.expired, Rows: p.stats.rows, Repeats: p.stats.repeats, Digest: p.digest,
		Phases: p.rule.phases, Excluded: p.stats.excluded}
	sn.Prompts = make([]snapPrompt, len(p.prompts))
	for i, pr := range p.prompts {
		sn.Prompts[i] = snapPrompt{Served: pr.served, Local: pr.local, Redraws: pr.redraws, Solves: pr.solves, Dom: pr.dom, Where: pr.where, HN: pr.hn, HAt: pr.hat, Revisit: pr.revisit}
	}
	for d, dm := range p.doms {
		x := &p.steps.doms[d]
		sn.Doms = append(sn.Doms, snapDomain{Index: dm.index, Cur: dm.cur, Front: dm.front[dm.fhead:], Next: dm.next, Retired: dm.retired, Leased: dm.leased,
			PassCounted: dm.passCounted, LastPass: dm.lastPass, Counted: snapCounts(x.counted), Scores: x.scores, CBase: x.cbase, SBase: x.sbase})
	}
	for _, id := range p.leases.openQ[p.leases.ohead:] {
		if l := p.leases.open[id]; l != nil {
			sn.Open = append(sn.Open, snapLease{ID: id, T: l.t, Step: l.step, Gen: l.gen, Req: l.req, Prompts: l.prompts, Passes: l.passes, Done: l.done, Left: l.left})
		}
	}
	var buf bytes.Buffer
	buf.Write(snapMagic[:])
	if err := gob.NewEncoder(&buf).Encode(&sn); err != nil {
		return nil, err
	}
	return binary.LittleEndian.AppendUint32(buf.Bytes(), crc32.Checksum(buf.Bytes(), castagnoli)), nil
}

// restore makes s's plan the snapshot b's, refusing a damaged one.
func (s *Stream) restore(b []byte) error {
	if len(b) < 8 || [4]byte(b[:4]) != snapMagic || crc32.Checksum(b[:len(b)-4], castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return errDamaged
	}
	var sn snapshot
	if err := gob.NewDecoder(bytes.NewReader(b[4 : len(b)-4])).Decode(&sn); err != nil {
		return fmt.Errorf("%w: %v", errDamaged, err)
	}
	p := NewPlan(s.plan.spec)
	if len(sn.Doms) == 0 {
		// Of one domain, from before domains.
		sn.Doms = []snapDomain{{Index: p.spec.Index, Cur: sn.Cur, Front: sn.Front, Next: sn.Next, Retired: sn.Retired, Leased: sn.Leased,
			PassCounted: sn.PassCounted, LastPass: sn.LastPass, Counted: sn.Counted, Scores: sn.Scores, CBase: sn.CBase, SBase: sn.SBase}}
		for i := range sn.Prompts {
			sn.Prompts[i].Local = uint32(i)
		}
	}
	if len(sn.Prompts) < len(p.prompts) || len(sn.Hist) != len(sn.Prompts)*p.spec.History || len(sn.Made) != len(sn.Status) || len(sn.Doms) != len(p.doms) {
		return fmt.Errorf("%w: a snapshot of %d prompts and %d domains for a job of %d and %d", errDamaged, len(sn.Prompts), len(sn.Doms), len(p.prompts), len(p.doms))
	}
	p.prompts = make([]prompt, len(sn.Prompts))
	for _, dm := range p.doms {
		dm.ids = dm.ids[:0]
	}
	for i, x := range sn.Prompts {
		if int(x.Dom) >= len(p.doms) {
			return fmt.Errorf("%w: prompt %d of domain %d", errDamaged, i, x.Dom)
		}
		p.prompts[i] = prompt{served: x.Served, local: x.Local, redraws: x.Redraws, solves: x.Solves, dom: x.Dom, where: x.Where, hn: x.HN, hat: x.HAt, revisit: x.Revisit}
		dm := p.doms[x.Dom]
		if int(x.Local) != len(dm.ids) {
			return fmt.Errorf("%w: prompt %d is domain %d's %d-th, not its %d-th", errDamaged, i, x.Dom, len(dm.ids), x.Local)
		}
		dm.ids = append(dm.ids, uint32(i))
	}
	p.hist = sn.Hist
	p.clock, p.leases.status, p.leases.made, p.leases.leased, p.trainer = sn.Clock, sn.Status, sn.Made, sn.Leased, sn.Trainer
	p.digest = sn.Digest
	p.stats.redrawn, p.stats.rested, p.stats.expired, p.stats.rows, p.stats.repeats, p.stats.excluded = sn.Redrawn, sn.Rested, sn.Exp, sn.Rows, sn.Repeats, sn.Excluded
	if len(sn.Phases) > 0 {
		rule, err := newStepRule(p.spec.Step, sn.Phases)
		if err != nil {
			return fmt.Errorf("%w: %v", errDamaged, err)
		}
		p.rule, p.steps.rule = rule, rule
	}
	for d, x := range sn.Doms {
		dm := p.doms[d]
		dm.index, dm.cur, dm.front, dm.next, dm.retired, dm.leased = x.Index, x.Cur, x.Front, x.Next, x.Retired, x.Leased
		dm.passCounted, dm.lastPass = x.PassCounted, x.LastPass
		p.steps.doms[d] = domainLog{counted: countsOf(x.Counted), scores: x.Scores, cbase: x.CBase, sbase: x.SBase}
	}
	for _, l := range sn.Open {
		if l.ID == 0 || l.ID > p.leases.Made() || len(l.Passes) != len(l.Prompts) || len(l.Done) != len(l.Prompts) {
			return fmt.Errorf("%w: lease %d", errDamaged, l.ID)
		}
		ol := &openLease{gen: l.Gen, req: l.Req, t: l.T, step: l.Step, prompts: l.Prompts, passes: l.Passes, done: l.Done, left: l.Left}
		p.leases.open[l.ID] = ol
		p.leases.openQ = append(p.leases.openQ, l.ID)
		if l.Req != "" {
			p.leases.byReq[leaseReq{l.Gen, l.Req}] = l.ID
		}
	}
	// The pass's weights are the policy's of each prompt in it now: a
	// prompt's history changes only while it is leased.
	for _, dm := range p.doms {
		w := make([]uint64, len(dm.ids))
		for local, q := range dm.ids {
			if p.prompts[q].where == inPool {
				w[local] = fixedWeight(p.weight(q))
			}
		}
		dm.tree = newFenwick(w)
	}
	p.tally = tallyOf(p.prompts, p.InBand)
	s.plan = p
	s.segs, s.diverged, s.bytes, s.damaged = sn.Segs, sn.Diverged, sn.Bytes, sn.Damaged
	return nil
}

// loadSnapshot restores the newest snapshot that reads back whole, and
// reports the segments it holds (0: none).
func (s *Stream) loadSnapshot(ctx context.Context) uint64 {
	infos, err := s.st.List(ctx, Prefix(s.job)+"snap/")
	if err != nil {
		return 0
	}
	for i := len(infos) - 1; i >= 0; i-- {
		segs, err := strconv.ParseUint(strings.TrimPrefix(infos[i].Key, Prefix(s.job)+"snap/"), 10, 64)
		if err != nil {
			continue
		}
		b, err := editproto.ReadObject(ctx, s.st, infos[i].Key, 1<<34)
		if err != nil {
			continue
		}
		s.mu.Lock()
		err = s.restore(b)
		ok := err == nil && s.segs == segs
		if !ok {
			s.plan, s.segs, s.diverged, s.bytes, s.damaged = NewPlan(s.plan.spec), 0, 0, 0, 0
		}
		s.mu.Unlock()
		if ok {
			return segs
		}
	}
	return 0
}

// writeSnapshot stores the plan after segment s.segs, if it is a
// snapshot's; s.wmu is held. A snapshot made by another node first is
// as good.
func (s *Stream) writeSnapshot(ctx context.Context) {
	every := s.snapEvery
	if every == 0 {
		every = SnapshotEvery
	}
	s.mu.Lock()
	segs := s.segs
	if segs%every != 0 {
		s.mu.Unlock()
		return
	}
	b, err := s.encodeSnapshot()
	s.mu.Unlock()
	if err != nil {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := s.st.PutIfAbsent(wctx, snapshotKey(s.job, segs), bytes.NewReader(b), int64(len(b))); err != nil && !errors.Is(err, s3backend.ErrExists) {
		s.metrics.snapshotFailed()
		return
	}
	s.metrics.snapshotWritten()
}
