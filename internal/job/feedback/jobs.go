package feedback

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/job/catalog"
)

// The feedback a node holds, by job: a job that sent feedback holds one
// of Limits.Jobs slots until it has neither sent feedback nor sealed for
// Limits.Idle, with at most Limits.EpochsPerJob open epochs (4 bytes a
// sample each). No job's post can take another active job's slot: a new
// job finding every slot held is refused (ErrBusy). A job's epochs go
// only when the job has been idle that long, when the job itself moves
// past them, or once they are sealed, and a seal that then finds no
// feedback says which.

// jobKey names a job: its feedback and snapshots are per dataset.
type jobKey struct {
	dataset, job string
}

// accKey names an epoch's feedback.
type accKey struct {
	dataset, index, job string
	epoch               uint64
}

func keyOf(ds *catalog.Dataset, job string, epoch uint64) accKey {
	return accKey{ds.Name, ds.ID(), job, epoch}
}

func (k accKey) owner() jobKey { return jobKey{k.dataset, k.job} }

// open is an epoch's feedback on this node.
type open struct {
	key     accKey
	acc     *importance.Accumulator
	checked time.Time // when the store's pointer was last looked at; under table.mu
	// checkedFirst is closed once the store's pointer has been looked at
	// for the first time (State.checkStore): until then no batch is
	// applied, since the epoch may be sealed already — by this node, whose
	// seal released the epoch's feedback before this one opened it again,
	// or by a gateway outside its cluster.
	checkedFirst chan struct{}
	checkedOnce  sync.Once

	// mu is held shared by each batch applied and exclusively to close
	// the epoch, so that every batch applied before the close is in what
	// the close hands out, and none after.
	mu     sync.RWMutex
	closed error // why no more feedback is taken: ErrSealed or ErrStale, wrapped
	// collected: closed by a seal's collection, which reopens it if every
	// seal that collected it ends without sealing (table.settle).
	collected bool
}

// add applies a body's records, unless the epoch is closed, once its
// first look at the store is done.
func (o *open) add(ctx context.Context, recs *records) error {
	select {
	case <-o.checkedFirst:
	case <-ctx.Done():
		return ctx.Err()
	}
	o.mu.RLock()
	defer o.mu.RUnlock()
	if o.closed != nil {
		return o.closed
	}
	return recs.apply(o.acc)
}

// collect closes the epoch for a seal's collection and returns its
// accumulator, complete.
func (o *open) collect(why error) *importance.Accumulator {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed == nil {
		o.closed, o.collected = why, true
	}
	return o.acc
}

// reopen takes feedback again in an epoch closed by a collection alone:
// every seal that collected it ended without sealing, so what it holds
// is in no snapshot, and the next seal collects it with what follows.
func (o *open) reopen() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.collected {
		o.closed, o.collected = nil, false
	}
}

// close stops the epoch taking feedback, with why, and returns its
// accumulator, complete. Closing a closed epoch keeps the first reason.
func (o *open) close(why error) *importance.Accumulator {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed == nil {
		o.closed = why
	}
	return o.acc
}

// job is a job's open epochs.
type job struct {
	epochs []*open
	last   time.Time // its last feedback or seal
}

// table is a node's open epochs by job, under the bounds. Safe for
// concurrent use.
type table struct {
	limits Limits
	now    func() time.Time

	mu   sync.Mutex
	jobs map[jobKey]*job
	// collected holds, by epoch, the seals that collected its feedback
	// here (this node's own, or a peer's) and have not said how they
	// ended (settle), each with when it collected. While one is pending
	// and within Limits.Hold, the epoch takes no feedback, whether this
	// node held some (closed) or none (nothing to close): what a seal did
	// not collect must not be answered as accepted. Entries go when their
	// seals settle, or when found past Limits.Hold (State.unsettled), or
	// after Limits.Idle (expire).
	collected map[accKey]map[string]time.Time
	// dropped says why an epoch's feedback is gone, for the seal that
	// finds none; bounded, as only the message is lost with an entry.
	dropped *lru.Cache[accKey, string]
}

// maxDropped bounds the reasons remembered for dropped epochs.
const maxDropped = 256

func newTable(l Limits, now func() time.Time) *table {
	d, _ := lru.New[accKey, string](maxDropped)
	return &table{limits: l, now: now, jobs: map[jobKey]*job{}, collected: map[accKey]map[string]time.Time{}, dropped: d}
}

// find returns an epoch's feedback, or nil.
func (t *table) find(k accKey) *open {
	t.mu.Lock()
	defer t.mu.Unlock()
	if j := t.jobs[k.owner()]; j != nil {
		if i := j.index(k); i >= 0 {
			return j.epochs[i]
		}
	}
	return nil
}

func (j *job) index(k accKey) int {
	return slices.IndexFunc(j.epochs, func(o *open) bool { return o.key == k })
}

// touch records the job's activity, keeping its slot.
func (t *table) touch(k jobKey) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if j := t.jobs[k]; j != nil {
		j.last = t.now()
	}
}

// admit returns an epoch's feedback, opened if need be, and whether the
// store's pointer for it is due a look (first open, or Limits.Recheck
// since the last); the caller of a first open must make it
// (State.checkStore), as no batch is applied before. Opening an epoch may
// drop the job's oldest (it has moved on) or idle jobs' epochs, never an
// active job's: see refusal. An epoch a seal has collected and not
// settled is refused (ErrSealed), or errUnsettled past Limits.Hold.
func (t *table) admit(ds *catalog.Dataset, name string, epoch uint64) (o *open, check bool, err error) {
	k := keyOf(ds, name, epoch)
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.expire(now)
	if err := t.collecting(k, now); err != nil {
		return nil, false, err
	}
	j := t.jobs[k.owner()]
	if j != nil {
		j.last = now
		if i := j.index(k); i >= 0 {
			o = j.epochs[i]
			if check = now.Sub(o.checked) >= t.limits.Recheck; check {
				o.checked = now
			}
			return o, check, nil
		}
	}
	if err := t.refusal(j, k); err != nil {
		return nil, false, err
	}
	acc, err := importance.NewAccumulator(ds.Index, name, epoch)
	if err != nil {
		return nil, false, err
	}
	if j == nil {
		j = &job{last: now}
		t.jobs[k.owner()] = j
	}
	if len(j.epochs) >= t.limits.EpochsPerJob {
		victim := j.victim()
		t.drop(j, victim, fmt.Sprintf("dropped when the job's feedback for epoch %d arrived: a job keeps at most %d open epochs", epoch, t.limits.EpochsPerJob))
	}
	o = &open{key: k, acc: acc, checked: now, checkedFirst: make(chan struct{})}
	j.epochs = append(j.epochs, o)
	return o, true, nil
}

// errUnsettled marks an epoch whose seals collected it here more than
// Limits.Hold ago and never said how they ended: the store says whether
// one sealed it (State.unsettled). Until it has, the epoch is refused as
// being sealed.
var errUnsettled = fmt.Errorf("%w: an epoch collected by a seal that did not say how it ended", ErrSealed)

// collecting refuses feedback for epoch k while a seal that collected it
// here is pending; t.mu held.
func (t *table) collecting(k accKey, now time.Time) error {
	pending := t.collected[k]
	if len(pending) == 0 {
		return nil
	}
	for _, at := range pending {
		if now.Sub(at) < t.limits.Hold {
			return collectedError(k.job, k.epoch)
		}
	}
	return errUnsettled
}

// collect records that seal collected epoch k here, closes its feedback
// for the seal and returns it (nil: this node holds none; feedback after
// is refused all the same).
func (t *table) collect(k accKey, seal string) *open {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.collected[k] == nil {
		t.collected[k] = map[string]time.Time{}
	}
	t.collected[k][seal] = t.now()
	if j := t.jobs[k.owner()]; j != nil {
		if i := j.index(k); i >= 0 {
			o := j.epochs[i]
			o.collect(collectedError(k.job, k.epoch))
			return o
		}
	}
	return nil
}

// settle records how a seal that collected epoch k here ended: with
// sealed (the refusal of feedback for the sealed epoch), the epoch's
// feedback is released; without, once no other seal that collected it
// is pending, it takes feedback again. A seal it does not know (one that
// never reached it) changes nothing unless it sealed.
func (t *table) settle(k accKey, seal string, sealed error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	pending := t.collected[k]
	if _, ok := pending[seal]; !ok && sealed == nil {
		return
	}
	delete(pending, seal)
	if sealed != nil {
		delete(t.collected, k)
		t.releaseLocked(k, sealed)
		return
	}
	if len(pending) > 0 {
		return
	}
	delete(t.collected, k)
	if j := t.jobs[k.owner()]; j != nil {
		if i := j.index(k); i >= 0 {
			j.epochs[i].reopen()
		}
	}
}

// forgetStale forgets the seals that collected epoch k more than
// Limits.Hold ago (the store says none sealed it: State.unsettled), and
// reopens the epoch if no other is pending.
func (t *table) forgetStale(k accKey) {
	t.mu.Lock()
	now := t.now()
	var stale []string
	for seal, at := range t.collected[k] {
		if now.Sub(at) >= t.limits.Hold {
			stale = append(stale, seal)
		}
	}
	t.mu.Unlock()
	for _, seal := range stale {
		t.settle(k, seal, nil)
	}
}

// admits says whether admit would open an epoch's feedback, or refuse
// it, without opening it: a body is not read to be refused.
func (t *table) admits(ds *catalog.Dataset, name string, epoch uint64) error {
	k := keyOf(ds, name, epoch)
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.expire(now)
	if err := t.collecting(k, now); err != nil && !errors.Is(err, errUnsettled) {
		return err
	}
	return t.refusal(t.jobs[k.owner()], k)
}

// refusal is why epoch k's feedback cannot be opened for job j (nil: a
// job without a slot): ErrBusy when it has no slot and every slot is
// held, ErrStale when its open epochs are full and all newer than k.
func (t *table) refusal(j *job, k accKey) error {
	switch {
	case j == nil && len(t.jobs) >= t.limits.Jobs:
		return fmt.Errorf("%w: all %d importance job slots are held by jobs that sent feedback or sealed within the last %s; job %s's feedback is refused rather than evicting theirs",
			ErrBusy, t.limits.Jobs, t.limits.Idle, k.job)
	case j == nil || j.index(k) >= 0 || len(j.epochs) < t.limits.EpochsPerJob:
		return nil
	}
	if v := j.victim(); !v.isClosed() && k.epoch < v.key.epoch {
		return fmt.Errorf("%w: job %s has %d open epochs, all newer than epoch %d; feedback for it is refused",
			ErrStale, k.job, len(j.epochs), k.epoch)
	}
	return nil
}

// victim is the epoch a job gives up for a new one: one its seals have
// collected, else its oldest, which it has moved past.
func (j *job) victim() *open {
	return slices.MinFunc(j.epochs, func(a, b *open) int {
		if ca, cb := a.isClosed(), b.isClosed(); ca != cb {
			if ca {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.key.epoch, b.key.epoch)
	})
}

func (o *open) isClosed() bool {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.closed != nil
}

// expire drops the epochs of jobs idle longer than Limits.Idle, freeing
// their slots, and forgets the seals that collected an epoch that long
// ago and never settled (its feedback, if held, stays closed).
func (t *table) expire(now time.Time) {
	for k, pending := range t.collected {
		for seal, at := range pending {
			if now.Sub(at) > t.limits.Idle {
				delete(pending, seal)
			}
		}
		if len(pending) == 0 {
			delete(t.collected, k)
		}
	}
	for k, j := range t.jobs {
		if now.Sub(j.last) <= t.limits.Idle {
			continue
		}
		why := fmt.Sprintf("dropped after the job was idle for %s (no feedback or seal since %s)", t.limits.Idle, j.last.UTC().Format(time.RFC3339))
		for len(j.epochs) > 0 {
			t.drop(j, j.epochs[0], why)
		}
		delete(t.jobs, k)
	}
}

// drop removes one of j's epochs, remembering why for a later seal.
func (t *table) drop(j *job, o *open, why string) {
	if n := o.close(fmt.Errorf("%w: epoch %d of job %s: its feedback was %s", ErrStale, o.key.epoch, o.key.job, why)).Reported(); n > 0 {
		t.dropped.Add(o.key, fmt.Sprintf("its feedback for %d samples was %s", n, why))
	}
	j.epochs = slices.DeleteFunc(j.epochs, func(e *open) bool { return e == o })
}

// release removes an epoch that is sealed: its memory is free, and its
// feedback is in the snapshot or, if it arrived at a node whose seal
// lost, was never part of it. The job keeps its slot until it is idle:
// its next epoch's feedback is coming.
func (t *table) release(k accKey, why error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.releaseLocked(k, why)
}

// releaseLocked is release with t.mu held.
func (t *table) releaseLocked(k accKey, why error) {
	if j := t.jobs[k.owner()]; j != nil {
		if i := j.index(k); i >= 0 {
			j.epochs[i].close(why)
			j.epochs = slices.Delete(j.epochs, i, i+1)
		}
	}
}

// droppedWhy says why an epoch's feedback is gone, or "".
func (t *table) droppedWhy(k accKey) string {
	why, _ := t.dropped.Get(k)
	return why
}
