package feedback

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/importance/snapshots"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/server/admit"
	"github.com/brandgw/brand/s3backend"
)

// Sealing: an epoch is sealed once. On a node, seals of one epoch run
// one at a time and the later ones find the first's answer; across nodes
// sharing the store, the epoch's pointer is created only if absent
// (snapshots.Write), so the first pointer written wins and every
// other seal answers its version. A seal that writes a pointer collects
// the job's snapshots older than its last Limits.KeepEpochs sealed
// epochs.
//
// What a node accepted is in the seal: a seal names itself (a random ID)
// and collects every node's part, this one's included (State.Collect),
// and from then on each node it reached takes no feedback for the epoch
// — whether it held some or none yet — until the seal tells it how it
// ended (State.Settle): sealed, and the epoch is refused for good;
// nothing sealed (no feedback anywhere, a write that failed), and the
// epoch takes feedback again once no other seal that collected it is
// pending. A seal writes its pointer within Limits.Hold/2 of its first
// collection or not at all, and a node that was never told asks the
// store once Limits.Hold has passed, so a lost message, or a sealing node
// lost, costs refusals, never feedback answered as accepted and left out.

// Nodes are the other nodes a seal merges an epoch's feedback from: a
// cluster's (transport.Nodes and its Asks), or none (a single gateway's: Solo).
type Nodes interface {
	// Peers are the other members of the cluster now (by slot).
	Peers() []int
	URL(k int) string
	// Feedback collects node k's part of an epoch's feedback for the
	// seal named seal (State.Collect there).
	Feedback(ctx context.Context, k int, ds *catalog.Dataset, job string, epoch uint64, seal string) ([]byte, error)
	// Settle tells node k how the seal named seal ended: the version it
	// sealed, or "" for none (State.Settle there).
	Settle(ctx context.Context, k int, ds *catalog.Dataset, job string, epoch uint64, seal, version string) error
}

// Solo is a single gateway's: no other node, so its feedback is its
// own.
type Solo struct{}

// Peers is none.
func (Solo) Peers() []int { return nil }

// URL is "": a single gateway is not named.
func (Solo) URL(int) string { return "" }

// Feedback is never called: there is no other node to ask.
func (Solo) Feedback(context.Context, int, *catalog.Dataset, string, uint64, string) ([]byte, error) {
	return nil, errors.New("feedback: a single gateway has no other node")
}

// Settle is never called: there is no other node to tell.
func (Solo) Settle(context.Context, int, *catalog.Dataset, string, uint64, string, string) error {
	return errors.New("feedback: a single gateway has no other node")
}

// Sealed is the answer to a seal.
type Sealed struct {
	Version  string `json:"version"`
	Epoch    uint64 `json:"epoch"`
	Reported int    `json:"reported"` // samples with feedback this epoch, over every node reached
	Object   string `json:"object"`   // the snapshot's key under the dataset's root
	Parts    int    `json:"parts"`    // nodes whose feedback was merged
	// Existing says the epoch was sealed before this request: the answer
	// names the version sealed then, and Reported and Parts are that
	// seal's if this node made it, else 0.
	Existing bool `json:"existing"`
}

// sealKey names an epoch's seal: its pointer is the dataset's, the job's
// and the epoch's, whatever the index.
type sealKey struct {
	dataset, job string
	epoch        uint64
}

// seals serialises a node's seals of each epoch, bounds those that merge
// and write, and remembers the epochs sealed.
type seals struct {
	work *admit.Gate

	mu    sync.Mutex
	locks map[sealKey]*epochLock
	// done holds the answers of epochs sealed, as this node sealed them
	// or found them in the store; bounded, as the store has them all.
	done *lru.Cache[sealKey, Sealed]
}

// maxDone bounds the sealed epochs a node remembers.
const maxDone = 1024

// epochLock is one epoch's seal lock, shared by the seals waiting for it.
type epochLock struct {
	held chan struct{}
	refs int
}

func newSeals(l Limits) *seals {
	done, _ := lru.New[sealKey, Sealed](maxDone)
	return &seals{work: admit.New(int64(l.Sealers), l.SealWait, "epochs being sealed", ErrBusy), locks: map[sealKey]*epochLock{}, done: done}
}

// lock waits until no other seal of epoch k runs on this node.
func (s *seals) lock(ctx context.Context, k sealKey) (unlock func(), err error) {
	s.mu.Lock()
	l := s.locks[k]
	if l == nil {
		l = &epochLock{held: make(chan struct{}, 1)}
		s.locks[k] = l
	}
	l.refs++
	s.mu.Unlock()
	forget := func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if l.refs--; l.refs == 0 {
			delete(s.locks, k)
		}
	}
	select {
	case l.held <- struct{}{}:
		return func() { <-l.held; forget() }, nil
	case <-ctx.Done():
		forget()
		return nil, ctx.Err()
	}
}

// known returns the answer of an epoch known sealed, as a later seal
// gets it.
func (s *seals) known(k sealKey) (Sealed, bool) {
	out, ok := s.done.Get(k)
	out.Existing = true
	return out, ok
}

// remember records an epoch sealed.
func (s *seals) remember(ds *catalog.Dataset, job string, out Sealed) {
	s.done.Add(sealKey{ds.Name, job, out.Epoch}, out)
}

// sealed refuses feedback for an epoch known sealed.
func (s *seals) sealed(ds *catalog.Dataset, job string, epoch uint64) error {
	if out, ok := s.done.Get(sealKey{ds.Name, job, epoch}); ok {
		return sealedError(job, epoch, out.Version)
	}
	return nil
}

// Seal merges an epoch's feedback over the cluster's nodes, seals it onto
// the snapshot prev (nil for the first) and writes it to the store, once:
// if the epoch is sealed already, here or by any gateway sharing the
// store, it answers that version (Existing) and writes nothing. A seal
// finding no feedback on any node is ErrNoFeedback; one of an epoch older
// than the job's last Limits.KeepEpochs sealed epochs is ErrStale.
func (s *State) Seal(ctx context.Context, ds *catalog.Dataset, job string, epoch uint64, prev *importance.Snapshot, nodes Nodes) (Sealed, error) {
	s.table.touch(jobKey{ds.Name, job})
	k := sealKey{ds.Name, job, epoch}
	if out, ok := s.seals.known(k); ok {
		return out, nil
	}
	unlock, err := s.seals.lock(ctx, k)
	if err != nil {
		return Sealed{}, err
	}
	defer unlock()
	// The seal this one waited for may have sealed the epoch.
	if out, ok := s.seals.known(k); ok {
		return out, nil
	}
	v, err := snapshots.Sealed(ctx, ds.Store, job, epoch)
	switch {
	case err == nil:
		return s.sealedBefore(ds, job, epoch, v), nil
	case errors.Is(err, importance.ErrCorrupt):
		return Sealed{}, fmt.Errorf("%w: %w", catalog.ErrCorrupt, err)
	case !errors.Is(err, s3backend.ErrNotFound):
		return Sealed{}, err
	}
	leave, err := s.seals.work.Acquire(ctx, 1)
	if err != nil {
		return Sealed{}, err
	}
	defer leave()
	if err := s.checkKept(ctx, ds, job, epoch); err != nil {
		return Sealed{}, err
	}
	// From the first collection the pointer is written within Hold/2 or
	// not at all: the nodes this seal does not reach again ask the store
	// after Hold.
	seal := newSealID()
	wctx, cancel := context.WithTimeout(ctx, s.limits.Hold/2)
	defer cancel()
	acc, merged, asked, err := s.merge(wctx, ds, job, epoch, nodes, seal)
	var snap *importance.Snapshot
	written := false
	if err == nil {
		if snap, err = importance.Seal(prev, acc); err != nil {
			err = fmt.Errorf("%w: %w", ErrBadFeedback, err)
		} else {
			v, written, err = snapshots.Write(wctx, ds.Store, snap)
		}
	}
	if err != nil {
		// Sealed all the same — by another node meanwhile, or by this
		// seal's write whose answer was lost — or not: the store says,
		// before the nodes are told nothing was. If it cannot, they are
		// told nothing and ask it themselves after Hold.
		sv, serr := snapshots.Sealed(context.WithoutCancel(ctx), ds.Store, job, epoch)
		switch {
		case serr == nil:
			v, err = sv, nil
		case errors.Is(serr, s3backend.ErrNotFound):
			s.settle(ctx, ds, job, epoch, seal, "", nodes, asked)
			return Sealed{}, err
		default:
			return Sealed{}, err
		}
	}
	s.settle(ctx, ds, job, epoch, seal, v, nodes, asked)
	if !written {
		return s.sealedBefore(ds, job, epoch, v), nil
	}
	out := Sealed{Version: v, Epoch: epoch, Reported: acc.Reported(), Object: importance.ObjectKey(job, v), Parts: merged}
	s.seals.remember(ds, job, out)
	s.snaps.memo.Add(snapKey(ds, job, v), snap)
	s.log.Info().Str("dataset", ds.Name).Str("job", job).Uint64("epoch", epoch).Str("version", v).
		Int("reported", out.Reported).Int("parts", merged).Msg("importance sealed")
	s.collect(ctx, ds, job)
	return out, nil
}

// sealedBefore is the answer of a seal that found epoch sealed as v, by
// another node or an earlier life of this one: recorded, and this node's
// feedback for the epoch released (the seal that won collected it, or
// never could).
func (s *State) sealedBefore(ds *catalog.Dataset, job string, epoch uint64, v string) Sealed {
	out := Sealed{Version: v, Epoch: epoch, Object: importance.ObjectKey(job, v)}
	s.seals.remember(ds, job, out)
	s.table.release(keyOf(ds, job, epoch), sealedError(job, epoch, v))
	out.Existing = true
	return out
}

// checkKept refuses to seal an epoch older than the job's last
// KeepEpochs sealed ones: the collection would delete it at once.
func (s *State) checkKept(ctx context.Context, ds *catalog.Dataset, job string, epoch uint64) error {
	epochs, err := snapshots.SealedEpochs(ctx, ds.Store, job)
	if err != nil {
		return err
	}
	if keep := s.limits.KeepEpochs; len(epochs) >= keep && epoch < epochs[keep-1] {
		return fmt.Errorf("%w: epoch %d of job %s is older than its last %d sealed epochs (%d to %d), which are all the store keeps; it cannot be sealed now",
			ErrStale, epoch, job, keep, epochs[keep-1], epochs[0])
	}
	return nil
}

// newSealID names a seal: 8 random bytes, hex.
func newSealID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// settle tells this node and every node the seal asked for its part how
// the seal ended: the version sealed, or "" for none. A node that cannot
// be told asks the store after Limits.Hold.
func (s *State) settle(ctx context.Context, ds *catalog.Dataset, job string, epoch uint64, seal, version string, nodes Nodes, asked []int) {
	s.sealedHere(ds, job, epoch, seal, version)
	ctx = context.WithoutCancel(ctx)
	var wg sync.WaitGroup
	for _, n := range asked {
		wg.Go(func() {
			if err := nodes.Settle(ctx, n, ds, job, epoch, seal, version); err != nil {
				s.log.Warn().Err(err).Str("peer", nodes.URL(n)).Str("job", job).Uint64("epoch", epoch).Str("version", version).
					Msg("importance: could not tell a peer how a seal ended; it refuses the epoch's feedback until it asks the store")
			}
		})
	}
	wg.Wait()
}

// merge gathers an epoch's feedback for the seal named seal: this
// node's, closed to more, and every other node's part, asked of all at
// once (which closes it there). A node that cannot be reached loses its
// part; a seal that finds no feedback at all is ErrNoFeedback. It
// returns the merged feedback, the nodes merged and the peers asked.
func (s *State) merge(ctx context.Context, ds *catalog.Dataset, job string, epoch uint64, nodes Nodes, seal string) (*importance.Accumulator, int, []int, error) {
	k := keyOf(ds, job, epoch)
	own := s.table.collect(k, seal)
	peers := nodes.Peers()
	bodies, errs := make([][]byte, len(peers)), make([]error, len(peers))
	var wg sync.WaitGroup
	for i, n := range peers {
		wg.Go(func() { bodies[i], errs[i] = nodes.Feedback(ctx, n, ds, job, epoch, seal) })
	}
	wg.Wait()
	acc, err := importance.NewAccumulator(ds.Index, job, epoch)
	if err != nil {
		return nil, 0, peers, err
	}
	if own != nil {
		if err := acc.Merge(own.acc); err != nil {
			return nil, 0, peers, err
		}
	}
	merged, lost := 1, 0
	for i, n := range peers {
		b, err := bodies[i], errs[i]
		if err == nil {
			recs := &records{pool: s.blocks}
			if err = (decoder{ds: ds, maxRecords: ds.Index.NumSamples()}).binary(bytes.NewReader(b), recs); err == nil {
				err = recs.apply(acc)
			}
			recs.release()
		}
		if err != nil {
			s.log.Warn().Err(err).Str("peer", nodes.URL(n)).Str("job", job).Uint64("epoch", epoch).
				Msg("sealing without a peer's feedback: its part is lost")
			lost++
			continue
		}
		merged++
	}
	if acc.Reported() == 0 {
		return nil, 0, peers, s.noFeedback(k, merged, lost)
	}
	return acc, merged, peers, nil
}

// noFeedback explains a seal that found no feedback.
func (s *State) noFeedback(k accKey, merged, lost int) error {
	var why strings.Builder
	if lost > 0 {
		fmt.Fprintf(&why, " (%d could not be reached: their feedback is lost)", lost)
	}
	if d := s.table.droppedWhy(k); d != "" {
		fmt.Fprintf(&why, "; on this node %s", d)
	}
	return fmt.Errorf("%w: no feedback for epoch %d of job %s on any of the %d nodes reached%s; nothing to seal (a job's feedback is kept while it sends feedback or seals at least every %s)",
		ErrNoFeedback, k.epoch, k.job, merged, why.String(), s.limits.Idle)
}

// collect deletes the job's snapshots older than its kept epochs. A
// failure is left for the next seal to retry.
func (s *State) collect(ctx context.Context, ds *catalog.Dataset, job string) {
	deleted, err := snapshots.Collect(ctx, ds.Store, job, s.limits.KeepEpochs)
	if err != nil {
		s.log.Warn().Err(err).Str("dataset", ds.Name).Str("job", job).Msg("importance: collecting old snapshots")
	}
	if len(deleted) > 0 {
		s.log.Info().Str("dataset", ds.Name).Str("job", job).Strs("deleted", deleted).Msg("importance: old snapshots collected")
	}
}
