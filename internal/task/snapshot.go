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

// snapshot is a plan and its stream's counts, as gob encodes them.
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
}

type snapPrompt struct {
	Served          uint32
	Redraws, Solves uint16
	Where, HN, HAt  uint8
	Revisit         bool
}

type snapLease struct {
	ID, T, Step     uint64
	Gen             string
	Prompts, Passes []uint32
	Done            []bool
	Left            int
}

type snapCounted struct {
	Prompt, Pass, Version, ScoreN uint32
	Lease, ScoreAt                uint64
	Passes, N                     uint16
}

// encodeSnapshot is the plan of s (s.mu held) as stored.
func (s *Stream) encodeSnapshot() ([]byte, error) {
	p := s.plan
	sn := snapshot{Segs: s.segs, Diverged: s.diverged, Bytes: s.bytes, Damaged: s.damaged, Hist: p.hist, Cur: p.cur,
		Front: p.front[p.fhead:], Next: p.next, Retired: p.retired, Clock: p.clock, Status: p.leases.status, Made: p.leases.made,
		Leased: p.leases.leased, Trainer: p.trainer, Scores: p.steps.scores, CBase: p.steps.cbase, SBase: p.steps.sbase,
		Redrawn: p.stats.redrawn, Rested: p.stats.rested, Exp: p.stats.expired, Rows: p.stats.rows, Repeats: p.stats.repeats, Digest: p.digest,
		PassCounted: p.stats.passCounted, LastPass: p.stats.lastPass}
	sn.Prompts = make([]snapPrompt, len(p.prompts))
	for i, pr := range p.prompts {
		sn.Prompts[i] = snapPrompt{Served: pr.served, Redraws: pr.redraws, Solves: pr.solves, Where: pr.where, HN: pr.hn, HAt: pr.hat, Revisit: pr.revisit}
	}
	for _, id := range p.leases.openQ[p.leases.ohead:] {
		if l := p.leases.open[id]; l != nil {
			sn.Open = append(sn.Open, snapLease{ID: id, T: l.t, Step: l.step, Gen: l.gen, Prompts: l.prompts, Passes: l.passes, Done: l.done, Left: l.left})
		}
	}
	sn.Counted = make([]snapCounted, len(p.steps.counted))
	for i, c := range p.steps.counted {
		sn.Counted[i] = snapCounted{Prompt: c.Prompt, Pass: c.Pass, Version: c.Version, ScoreN: c.scoreN, Lease: c.Lease, ScoreAt: c.scoreAt, Passes: c.Passes, N: c.N}
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
	if len(sn.Prompts) != len(p.prompts) || len(sn.Hist) != len(p.hist) || len(sn.Made) != len(sn.Status) {
		return fmt.Errorf("%w: a snapshot of %d prompts for a job of %d", errDamaged, len(sn.Prompts), len(p.prompts))
	}
	for i, x := range sn.Prompts {
		p.prompts[i] = prompt{served: x.Served, redraws: x.Redraws, solves: x.Solves, where: x.Where, hn: x.HN, hat: x.HAt, revisit: x.Revisit}
	}
	p.hist, p.cur, p.front, p.next, p.retired = sn.Hist, sn.Cur, sn.Front, sn.Next, sn.Retired
	p.clock, p.leases.status, p.leases.made, p.leases.leased, p.trainer = sn.Clock, sn.Status, sn.Made, sn.Leased, sn.Trainer
	p.steps.scores, p.steps.cbase, p.steps.sbase, p.digest = sn.Scores, sn.CBase, sn.SBase, sn.Digest
	p.stats.redrawn, p.stats.rested, p.stats.expired, p.stats.rows, p.stats.repeats = sn.Redrawn, sn.Rested, sn.Exp, sn.Rows, sn.Repeats
	p.stats.passCounted, p.stats.lastPass = sn.PassCounted, sn.LastPass
	for _, l := range sn.Open {
		if l.ID == 0 || l.ID > p.leases.Made() || len(l.Passes) != len(l.Prompts) || len(l.Done) != len(l.Prompts) {
			return fmt.Errorf("%w: lease %d", errDamaged, l.ID)
		}
		p.leases.open[l.ID] = &openLease{gen: l.Gen, t: l.T, step: l.Step, prompts: l.Prompts, passes: l.Passes, done: l.Done, left: l.Left}
		p.leases.openQ = append(p.leases.openQ, l.ID)
	}
	p.steps.counted = make([]Counted, len(sn.Counted))
	for i, c := range sn.Counted {
		p.steps.counted[i] = Counted{Prompt: c.Prompt, Pass: c.Pass, Version: c.Version, scoreN: c.ScoreN, Lease: c.Lease, scoreAt: c.ScoreAt, Passes: c.Passes, N: c.N}
	}
	// The pass's weights are the policy's of each prompt in it now: a
	// prompt's history changes only while it is leased.
	w := make([]uint64, len(p.prompts))
	for q := range p.prompts {
		if p.prompts[q].where == inPool {
			w[q] = fixedWeight(p.weight(uint32(q)))
		}
	}
	p.tree = newFenwick(w)
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
