package feedback

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/importance/snapshots"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/server/admit"
	"github.com/brandgw/brand/s3backend"
)

// Limits bound a gateway's importance state; a zero field takes its
// default (docs/importance.md, "Feedback in a gateway").
type Limits struct {
	// Jobs bounds the jobs holding feedback on a node (16).
	Jobs int
	// EpochsPerJob bounds a job's open epochs on a node (2): feedback for
	// a newer one drops the job's oldest.
	EpochsPerJob int
	// Idle is how long a job keeps its slot and its feedback after its
	// last feedback or seal (10 minutes).
	Idle time.Duration
	// Records bounds the records of one feedback body (1,048,576, what
	// MaxBodyBytes holds in the binary form).
	Records int
	// Decoders bounds the feedback bodies decoded at once (4); a body
	// waits DecodeWait (5 s) for its turn, then is refused with ErrBusy.
	Decoders   int
	DecodeWait time.Duration
	// Sealers bounds the seals merging and writing an epoch at once (2);
	// a seal waits SealWait (1 minute) for its turn. Seals that find the
	// epoch sealed take no turn.
	Sealers  int
	SealWait time.Duration
	// KeepEpochs is how many of a job's last sealed epochs keep their
	// pointers and snapshots in the store (4); older ones are deleted when
	// a newer epoch is sealed.
	KeepEpochs int
	// Recheck is how often feedback for an open epoch looks at the
	// store's pointer, to learn of a seal by a gateway outside this one's
	// cluster (5 s).
	Recheck time.Duration
	// Hold is how long an epoch whose feedback a seal collected takes no
	// feedback on a node the seal has not told how it ended (2 minutes):
	// a seal writes its pointer within half of it of its first collection
	// or not at all, and past it the node asks the store.
	Hold time.Duration
}

// DefaultLimits are the limits a zero Limits takes.
func DefaultLimits() Limits {
	return Limits{Jobs: 16, EpochsPerJob: 2, Idle: 10 * time.Minute, Records: MaxBodyBytes / 8,
		Decoders: 4, DecodeWait: 5 * time.Second, Sealers: 2, SealWait: time.Minute, KeepEpochs: 4, Recheck: 5 * time.Second, Hold: 2 * time.Minute}
}

// withDefaults fills the zero fields.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	fill := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	wait := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	fill(&l.Jobs, d.Jobs)
	fill(&l.EpochsPerJob, d.EpochsPerJob)
	fill(&l.Records, d.Records)
	fill(&l.Decoders, d.Decoders)
	fill(&l.Sealers, d.Sealers)
	fill(&l.KeepEpochs, d.KeepEpochs)
	wait(&l.Idle, d.Idle)
	wait(&l.DecodeWait, d.DecodeWait)
	wait(&l.SealWait, d.SealWait)
	wait(&l.Recheck, d.Recheck)
	wait(&l.Hold, d.Hold)
	return l
}

// Config configures a State.
type Config struct {
	Limits Limits
	Log    zerolog.Logger
	// Now is the clock the idle window is measured by; nil: time.Now.
	Now func() time.Time
	// Buffers are the node's pools, which blocks of records come from;
	// nil: they are allocated.
	Buffers Buffers
}

// State is a gateway's importance state. Safe for concurrent use.
type State struct {
	limits   Limits
	log      zerolog.Logger
	snaps    *snapshotMemo
	table    *table
	decoders *admit.Gate
	blocks   *blocks
	seals    *seals
}

// New returns an empty state with the default limits.
func New(log zerolog.Logger) *State { return NewWith(Config{Log: log}) }

// NewWith returns an empty state configured by cfg.
func NewWith(cfg Config) *State {
	l := cfg.Limits.withDefaults()
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &State{limits: l, log: cfg.Log, snaps: newSnapshots(), table: newTable(l, now),
		decoders: admit.New(int64(l.Decoders), l.DecodeWait, "feedback bodies being decoded", ErrBusy), blocks: &blocks{bufs: cfg.Buffers}, seals: newSeals(l)}
}

// Add reads a feedback body for an epoch of a job (docs/http-api.md: JSON,
// or binary records with contentType application/octet-stream), as it
// arrives, and applies it whole or not at all. It returns the records
// applied. Feedback for an epoch that is sealed is ErrSealed; a job that
// finds every slot held, or a body that waited too long for its turn, is
// ErrBusy; a body that cannot be read is ErrBadFeedback.
func (s *State) Add(ctx context.Context, ds *catalog.Dataset, job string, epoch uint64, contentType string, body io.Reader) (int, error) {
	if err := s.seals.sealed(ds, job, epoch); err != nil {
		return 0, err
	}
	if err := s.table.admits(ds, job, epoch); err != nil {
		return 0, err
	}
	leave, err := s.decoders.Acquire(ctx, 1)
	if err != nil {
		return 0, err
	}
	defer leave()
	recs, err := decoder{ctx: ctx, ds: ds, maxRecords: s.limits.Records, pool: s.blocks}.decode(contentType, body)
	if err != nil {
		return 0, err
	}
	defer recs.release()
	if recs.n == 0 {
		return 0, nil
	}
	o, check, err := s.table.admit(ds, job, epoch)
	if errors.Is(err, errUnsettled) {
		if err := s.unsettled(ctx, ds, job, epoch); err != nil {
			return 0, err
		}
		o, check, err = s.table.admit(ds, job, epoch)
	}
	if err != nil {
		return 0, err
	}
	if check {
		if err := s.checkStore(ctx, ds, o); err != nil {
			return 0, err
		}
	}
	n := recs.n
	if err := o.add(ctx, recs); err != nil {
		return 0, err
	}
	return n, nil
}

// unsettled asks the store about an epoch collected here by seals that
// never said how they ended, more than Limits.Hold ago (each writes its
// pointer within half of it or not at all): sealed, its feedback is
// released and refused; not sealed, those seals are forgotten, and the
// epoch takes feedback again once no other is pending. A store that
// cannot answer refuses the feedback: it may be sealed.
func (s *State) unsettled(ctx context.Context, ds *catalog.Dataset, job string, epoch uint64) error {
	v, err := snapshots.Sealed(ctx, ds.Store, job, epoch)
	switch {
	case err == nil:
		s.sealedHere(ds, job, epoch, "", v)
		return sealedError(job, epoch, v)
	case !errors.Is(err, s3backend.ErrNotFound):
		return fmt.Errorf("importance: epoch %d of job %s was collected by a seal that did not say how it ended, and the store could not say whether it is sealed: %w", epoch, job, err)
	}
	s.table.forgetStale(keyOf(ds, job, epoch))
	return nil
}

// checkStore looks for the pointer of an epoch this node holds feedback
// for: a gateway that shares the store but not the cluster (or this one,
// before a restart, or this one, whose seal released the epoch's
// feedback before this one opened it again) may have sealed it. If so
// the epoch is closed here and the feedback it held, never part of the
// snapshot, is reported lost. A store that cannot answer does not stop
// feedback. The epoch's first look lets its batches be applied, whoever
// asked for them, once it is done: it is made to its end even if the
// request that makes it goes away.
func (s *State) checkStore(ctx context.Context, ds *catalog.Dataset, o *open) error {
	select {
	case <-o.checkedFirst:
	default:
		defer o.checkedOnce.Do(func() { close(o.checkedFirst) })
		ctx = context.WithoutCancel(ctx)
	}
	v, err := snapshots.Sealed(ctx, ds.Store, o.key.job, o.key.epoch)
	switch {
	case errors.Is(err, s3backend.ErrNotFound):
		return nil
	case err != nil:
		s.log.Warn().Err(err).Str("job", o.key.job).Uint64("epoch", o.key.epoch).Msg("importance: could not check whether the epoch is sealed; taking its feedback")
		return nil
	}
	s.seals.remember(ds, o.key.job, Sealed{Version: v, Epoch: o.key.epoch, Object: importance.ObjectKey(o.key.job, v), Existing: true})
	why := sealedError(o.key.job, o.key.epoch, v)
	if n := o.close(why).Reported(); n > 0 {
		s.log.Warn().Str("job", o.key.job).Uint64("epoch", o.key.epoch).Str("version", v).Int("samples", n).
			Msg("importance: the epoch was sealed by a gateway that did not collect this one's feedback; it is not counted")
	}
	s.table.release(o.key, why)
	return why
}

// sealedError is the refusal of feedback for a sealed epoch.
func sealedError(job string, epoch uint64, version string) error {
	return fmt.Errorf("%w: epoch %d of job %s is sealed (version %s); feedback for it is not counted", ErrSealed, epoch, job, version)
}

// Collect returns this node's feedback for an epoch of a job as (uint32
// ID, float32 loss) records, for the seal named seal: its part, which the
// node sealing the epoch merges. The epoch takes no feedback after
// (ErrSealed) — whether this node held some or none — until the seal
// says how it ended (Settle), so that what a node accepted is in the
// seal and what it refuses is not.
func (s *State) Collect(ds *catalog.Dataset, job string, epoch uint64, seal string) []byte {
	o := s.table.collect(keyOf(ds, job, epoch), seal)
	if o == nil {
		return nil
	}
	var out []byte
	for id, loss := range o.acc.Reports() {
		out = binary.LittleEndian.AppendUint32(out, uint32(id))
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(loss))
	}
	return out
}

// Settle is how the seal named seal, which collected an epoch's feedback
// here (Collect), ended: sealed as version ("" if it sealed nothing, and
// then the epoch takes feedback again once no other seal that collected
// it is pending).
func (s *State) Settle(ds *catalog.Dataset, job string, epoch uint64, seal, version string) {
	s.sealedHere(ds, job, epoch, seal, version)
}

// sealedHere records what a seal that collected an epoch here ended with
// (version "": nothing sealed).
func (s *State) sealedHere(ds *catalog.Dataset, job string, epoch uint64, seal, version string) {
	k := keyOf(ds, job, epoch)
	if version == "" {
		s.table.settle(k, seal, nil)
		return
	}
	s.seals.remember(ds, job, Sealed{Version: version, Epoch: epoch, Object: importance.ObjectKey(job, version), Existing: true})
	s.table.settle(k, seal, sealedError(job, epoch, version))
}

// collectedError is the refusal of feedback for an epoch a seal has
// collected.
func collectedError(job string, epoch uint64) error {
	return fmt.Errorf("%w: epoch %d of job %s is sealed or being sealed: its feedback was collected for the seal, and feedback after it is not counted", ErrSealed, epoch, job)
}

// SealedVersion returns the version sealed for an epoch of a job:
// catalog.ErrUnknown until it is sealed.
func (s *State) SealedVersion(ctx context.Context, ds *catalog.Dataset, job string, epoch uint64) (string, error) {
	v, err := snapshots.Sealed(ctx, ds.Store, job, epoch)
	switch {
	case errors.Is(err, s3backend.ErrNotFound):
		return "", fmt.Errorf("%w: epoch %d of job %s is not sealed", catalog.ErrUnknown, epoch, job)
	case errors.Is(err, importance.ErrCorrupt):
		return "", fmt.Errorf("%w: %w", catalog.ErrCorrupt, err)
	}
	return v, err
}
