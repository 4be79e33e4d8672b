package task

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"golang.org/x/sync/errgroup"

	"github.com/brandgw/brand/internal/job/editproto"
	"github.com/brandgw/brand/internal/quote"
	"github.com/brandgw/brand/s3backend"
)

// Store is what a task job needs of its dataset's store (s3backend.Store).
type Store interface {
	Stat(ctx context.Context, key string) (s3backend.ObjectInfo, error)
	ReadRange(ctx context.Context, key, etag string, off int64, p []byte) error
	PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (s3backend.ObjectInfo, error)
	List(ctx context.Context, prefix string) ([]s3backend.ObjectInfo, error)
}

// Prefix is the folder of job's task log in its dataset's store.
func Prefix(job string) string { return "_brand/jobs/" + job + "/tasks/" }

func specKey(job string) string { return Prefix(job) + "spec" }

func segmentKey(job string, i uint64) string { return fmt.Sprintf("%slog/%016d", Prefix(job), i) }

// copyKey is segment i's second copy, written by the node that won
// segment i before it answers any request in it: a segment whose first
// copy fails its checksum is read from its second.
func copyKey(job string, i uint64) string { return fmt.Sprintf("%scopy/%016d", Prefix(job), i) }

// readSegment reads job's segment i: its first copy, or, when that fails
// its checksum, its second. Both damaged (or the second missing) is a
// *DamagedSegmentError: the job is refused until one reads whole, never
// replayed without the segment. repaired says the second copy was read.
func readSegment(ctx context.Context, st Store, job string, i uint64, first []byte) (seg segment, repaired bool, err error) {
	seg, err = decodeSegment(first)
	if err == nil {
		return seg, false, nil
	}
	cause := err
	b, err := editproto.ReadObject(ctx, st, copyKey(job, i), maxSegmentBytes)
	switch {
	case errors.Is(err, s3backend.ErrNotFound):
		return segment{}, false, &DamagedSegmentError{Job: job, Segment: i, Cause: fmt.Sprintf("%v; no second copy", cause)}
	case err != nil:
		return segment{}, false, fmt.Errorf("%w: reading task job %s's segment %d's second copy: %w", ErrStore, job, i, err)
	}
	seg, err = decodeSegment(b)
	if err != nil {
		return segment{}, false, &DamagedSegmentError{Job: job, Segment: i, Cause: fmt.Sprintf("%v; its second copy: %v", cause, err)}
	}
	return seg, true, nil
}

// maxSegmentBytes bounds a segment as stored and as read.
const maxSegmentBytes = 64 << 20

// maxRecords bounds the requests one segment groups, and
// maxBatchBytes about the bytes (a record's own may be more).
const (
	maxRecords    = 4096
	maxBatchBytes = 8 << 20
)

// batchOf is how many of the first requests queued one segment takes:
// at least one, at most maxRecords, and no more than about maxBatchBytes.
func batchOf(q []*pending) int {
	size := 0
	for i, pd := range q {
		if i == maxRecords || (i > 0 && size+pd.rec.size() > maxBatchBytes) {
			return i
		}
		size += pd.rec.size()
	}
	return len(q)
}

// Stream is one task job on one node: its plan, as of the log's last
// segment the node holds, and the requests it groups into its next
// segment. It is safe for concurrent use.
type Stream struct {
	job     string
	st      Store
	now     func() time.Time
	nonce   uint64
	metrics *Metrics
	// snapEvery is SnapshotEvery, or a test's.
	snapEvery uint64

	// wmu is held by whoever changes the plan — a segment written, or
	// those of other nodes applied — across its store requests; mu by
	// anyone reading or changing the plan, only while it does. So reads
	// never wait for the store.
	wmu         sync.Mutex
	lastRefresh time.Time // guarded by wmu

	mu       sync.Mutex // guards the below
	plan     *Plan
	segs     uint64 // segments applied
	bytes    int64
	damaged  int
	diverged uint64 // the first segment written after other decisions than this node's, if any

	qmu   sync.Mutex // guards queue and busy
	queue []*pending
	busy  bool

	// tail is, guarded by wmu, the last segment applied: the log goes on
	// past it only once it has its second copy (mend).
	tail tailSegment
}

// tailSegment is the last segment a node applied: its number, its bytes
// as stored, and whether its second copy is known to be in the store.
// A segment's writer writes the copy before it answers; one that could
// not (the store full) or died first left a segment of one copy, and
// whichever node writes the next segment writes that copy from these
// bytes first, so no segment but the last can ever lack one.
type tailSegment struct {
	i      uint64
	body   []byte
	copied bool
}

type pending struct {
	rec  Record
	out  Outcome
	err  error
	done chan struct{}
}

// openStream reads job's spec and log from st.
func openStream(ctx context.Context, st Store, job string, now func() time.Time, m *Metrics, snapEvery uint64) (*Stream, error) {
	b, err := editproto.ReadObject(ctx, st, specKey(job), 1<<16)
	if errors.Is(err, s3backend.ErrNotFound) {
		return nil, fmt.Errorf("%w: no task job %q (PUT /tasks/%s makes one)", ErrUnknownJob, job, job)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: reading task job %s's spec: %w", ErrStore, job, err)
	}
	var spec Spec
	if err := json.Unmarshal(b, &spec); err != nil {
		return nil, fmt.Errorf("task job %s's spec is damaged in the store: %v", job, err)
	}
	spec = spec.WithDefaults()
	if err := spec.Check(); err != nil {
		return nil, fmt.Errorf("task job %s's spec in the store: %w", job, err)
	}
	var nb [8]byte
	_, _ = rand.Read(nb[:])
	s := &Stream{job: job, st: st, now: now, metrics: m, snapEvery: snapEvery, nonce: binary.LittleEndian.Uint64(nb[:]), plan: NewPlan(spec)}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.load(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// load restores the newest snapshot, reads the segments the store lists
// after it, eight at once, and applies them in order, then any written
// since.
func (s *Stream) load(ctx context.Context) error {
	from := s.loadSnapshot(ctx)
	infos, err := s.st.List(ctx, fmt.Sprintf("%slog/", Prefix(s.job)))
	if err != nil {
		return fmt.Errorf("%w: listing task job %s's log: %w", ErrStore, s.job, err)
	}
	copies, err := s.st.List(ctx, fmt.Sprintf("%scopy/", Prefix(s.job)))
	if err != nil {
		return fmt.Errorf("%w: listing task job %s's log: %w", ErrStore, s.job, err)
	}
	n, last := from, from
	for _, in := range infos {
		i, err := strconv.ParseUint(strings.TrimPrefix(in.Key, Prefix(s.job)+"log/"), 10, 64)
		if err != nil || i <= from {
			continue
		}
		last = max(last, i)
		if i == n+1 {
			n = i // a gap: read on one by one from it
		}
	}
	for _, in := range copies {
		if i, err := strconv.ParseUint(strings.TrimPrefix(in.Key, Prefix(s.job)+"copy/"), 10, 64); err == nil {
			last = max(last, i)
		}
	}
	if err := readSegments(ctx, s.st, s.job, from+1, n, s.applyLocked); err != nil {
		return err
	}
	if err := s.catchUp(ctx); err != nil {
		return err
	}
	if s.segs < last {
		// Neither copy of a segment is in the store, and later ones are:
		// a gap is never the end of the log.
		return &DamagedSegmentError{Job: s.job, Segment: s.segs + 1, Cause: fmt.Sprintf("neither of its copies is in the store, and segments up to %d are", last)}
	}
	return nil
}

// readSegments reads job's segments from to to (both included) from st,
// eight at once, and hands each to f in order with its size and whether
// it was read from its second copy; it stops at a segment it cannot read
// whole, before handing it on.
func readSegments(ctx context.Context, st Store, job string, from, to uint64, f func(seg segment, body []byte, repaired bool)) error {
	for lo := from; lo <= to; lo += 256 {
		hi := min(to, lo+255)
		bodies := make([][]byte, hi-lo+1)
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(8)
		for i := lo; i <= hi; i++ {
			g.Go(func() (err error) {
				bodies[i-lo], err = editproto.ReadObject(gctx, st, segmentKey(job, i), maxSegmentBytes)
				if errors.Is(err, s3backend.ErrNotFound) {
					return nil // its first copy lost: read from its second
				}
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return fmt.Errorf("%w: reading task job %s's log: %w", ErrStore, job, err)
		}
		for k, b := range bodies {
			seg, repaired, err := readSegment(ctx, st, job, lo+uint64(k), b)
			if err != nil {
				return err
			}
			f(seg, b, repaired)
		}
	}
	return nil
}

// catchUp applies the segments written after the last this node holds;
// s.wmu is held.
func (s *Stream) catchUp(ctx context.Context) error {
	for {
		b, err := editproto.ReadObject(ctx, s.st, segmentKey(s.job, s.segs+1), maxSegmentBytes)
		if errors.Is(err, s3backend.ErrNotFound) {
			// The log's end, unless the segment's first copy alone was
			// lost (deleted): then its second is read, as a damaged
			// one's is.
			if _, err := s.st.Stat(ctx, copyKey(s.job, s.segs+1)); errors.Is(err, s3backend.ErrNotFound) {
				return nil
			} else if err != nil {
				return fmt.Errorf("%w: reading task job %s's log: %w", ErrStore, s.job, err)
			}
			// A writer writes the first copy before the second: one
			// written between the read above and the look at its copy
			// is there now, and is read as any other (it was counted
			// damaged, read from its copy: integration
			// TestTaskStreamKills, "1 damaged" in a run with none).
			b, err = editproto.ReadObject(ctx, s.st, segmentKey(s.job, s.segs+1), maxSegmentBytes)
			if errors.Is(err, s3backend.ErrNotFound) {
				b = nil
			} else if err != nil {
				return fmt.Errorf("%w: reading task job %s's log: %w", ErrStore, s.job, err)
			}
		} else if err != nil {
			return fmt.Errorf("%w: reading task job %s's log: %w", ErrStore, s.job, err)
		}
		seg, repaired, err := readSegment(ctx, s.st, s.job, s.segs+1, b)
		if err != nil {
			return err
		}
		s.applyLocked(seg, b, repaired)
	}
}

// applyLocked is applyStored under s.mu.
func (s *Stream) applyLocked(seg segment, body []byte, repaired bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applyStored(seg, body, repaired)
}

// applyStored applies a segment read whole from the store: body, its
// first copy as read, or its second copy if repaired.
func (s *Stream) applyStored(seg segment, body []byte, repaired bool) {
	s.segs++
	s.bytes += int64(len(body))
	s.tail = tailSegment{i: s.segs, body: body, copied: repaired}
	if repaired {
		s.damaged++
		s.metrics.damagedOne()
	}
	if seg.digest != s.plan.digest && s.diverged == 0 {
		s.diverged = s.segs
	}
	for _, r := range seg.recs {
		s.plan.Apply(r)
	}
}

// submit writes rec in this node's next segment, with the requests that
// arrived meanwhile, and answers its outcome once the segment is stored.
func (s *Stream) submit(ctx context.Context, rec Record) (Outcome, error) {
	pd := &pending{rec: rec, done: make(chan struct{})}
	s.qmu.Lock()
	s.queue = append(s.queue, pd)
	lead := !s.busy
	s.busy = true
	s.qmu.Unlock()
	if lead {
		// The leader writes for everyone queued, until none are: its
		// request's own cancellation does not fail theirs.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		for {
			s.qmu.Lock()
			batch := s.queue[:batchOf(s.queue)]
			s.queue = s.queue[len(batch):]
			if len(batch) == 0 {
				s.busy = false
				s.qmu.Unlock()
				break
			}
			s.qmu.Unlock()
			s.commit(wctx, batch)
		}
		cancel()
	}
	select {
	case <-pd.done:
		return pd.out, pd.err
	case <-ctx.Done():
		return Outcome{}, ctx.Err()
	}
}

// commit writes batch as the log's next segment: of nodes writing at
// once one wins; a loser applies the winner's segment and writes after it.
func (s *Stream) commit(ctx context.Context, batch []*pending) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	fail := func(err error) {
		for _, pd := range batch {
			pd.err = err
			close(pd.done)
		}
	}
	recs := make([]Record, len(batch))
	for attempt := 0; ; attempt++ {
		if err := s.tail.mend(ctx, s.st, s.job, s.segs); err != nil {
			fail(err)
			return
		}
		t := max(s.plan.Clock(), s.Now())
		for i, pd := range batch {
			recs[i] = pd.rec
			recs[i].T = t
		}
		body := encodeSegment(s.nonce, s.plan.Digest(), recs)
		key := segmentKey(s.job, s.segs+1)
		// A segment whose first copy alone was lost is there still: its
		// number is never written again.
		_, err := s.st.Stat(ctx, copyKey(s.job, s.segs+1))
		switch {
		case err == nil:
			err = s3backend.ErrExists
		case errors.Is(err, s3backend.ErrNotFound):
			_, err = s.st.PutIfAbsent(ctx, key, bytes.NewReader(body), int64(len(body)))
		}
		if errors.Is(err, s3backend.ErrExists) {
			// A retry may have found its own segment.
			if got, rerr := editproto.ReadObject(ctx, s.st, key, maxSegmentBytes); rerr == nil && bytes.Equal(got, body) {
				err = nil
			}
		}
		if err == nil {
			// The second copy, before any request in the segment is
			// answered: an answer acknowledged survives a tear of either.
			// A copy not written (the store full) fails the requests,
			// though the segment stands: every node applies it, this one
			// too (a lease asked again with its request ID is answered
			// with the lease it made), and whoever writes the next
			// segment writes the copy first (mend).
			cerr := writeCopy(ctx, s.st, s.job, s.segs+1, body)
			s.mu.Lock()
			s.segs++
			s.bytes += int64(len(body))
			s.tail = tailSegment{i: s.segs, body: body, copied: cerr == nil}
			s.metrics.wrote(len(body))
			for i, pd := range batch {
				pd.out = s.plan.Apply(recs[i])
				s.metrics.outcome(pd.out)
			}
			s.mu.Unlock()
			if cerr != nil {
				fail(cerr)
				return
			}
			for _, pd := range batch {
				close(pd.done)
			}
			s.writeSnapshot(ctx)
			return
		}
		if !errors.Is(err, s3backend.ErrExists) {
			fail(fmt.Errorf("%w: writing task job %s's log: %w", ErrStore, s.job, err))
			return
		}
		if attempt == 64 {
			fail(fmt.Errorf("%w: task job %s's log: 64 other segments were written while this node wrote one", ErrStore, s.job))
			return
		}
		s.metrics.lost()
		if err := s.catchUp(ctx); err != nil {
			fail(err)
			return
		}
	}
}

// mend writes the last segment's second copy where it may be missing,
// before a segment after it is written (segs: the segments applied; the
// stream's wmu is held).
func (t *tailSegment) mend(ctx context.Context, st Store, job string, segs uint64) error {
	if t.copied || t.i != segs || t.body == nil {
		return nil
	}
	if _, err := st.Stat(ctx, copyKey(job, t.i)); err == nil {
		t.copied = true
		return nil
	} else if !errors.Is(err, s3backend.ErrNotFound) {
		return fmt.Errorf("%w: reading task job %s's segment %d's second copy: %w", ErrStore, job, t.i, err)
	}
	if err := writeCopy(ctx, st, job, t.i, t.body); err != nil {
		return err
	}
	t.copied = true
	return nil
}

// writeCopy writes body as job's segment i's second copy, once: a copy
// there already holds the same bytes (written by segment i's writer,
// perhaps from a try whose answer was lost, or by the next segment's,
// from the first copy: mend).
func writeCopy(ctx context.Context, st Store, job string, i uint64, body []byte) error {
	_, err := st.PutIfAbsent(ctx, copyKey(job, i), bytes.NewReader(body), int64(len(body)))
	if err != nil && !errors.Is(err, s3backend.ErrExists) {
		return fmt.Errorf("%w: writing task job %s's segment %d's second copy: %w", ErrStore, job, i, err)
	}
	return nil
}

// Now is now in the plan's time (ms since the job was made): what a view
// of the plan asks of its leases' deadlines.
func (s *Stream) Now() uint64 {
	return uint64(max(0, s.now().UnixMilli()-s.plan.spec.Made))
}

// Refresh applies the segments other nodes wrote since this node's last:
// what a read that must see every node's requests asks first.
func (s *Stream) Refresh(ctx context.Context) error { return s.refresh(ctx) }

// refresh applies the segments other nodes wrote.
func (s *Stream) refresh(ctx context.Context) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.lastRefresh = s.now()
	return s.catchUp(ctx)
}

// pollEvery bounds how often a lease the window refuses asks the store
// for newer segments: at most one question each pollEvery a job and
// node, however many generators ask (each is told to lease again). A
// step's reader asks each time: it must see a step another node filled.
const pollEvery = 10 * time.Millisecond

// poll is refresh for a poll: at most once every pollEvery.
func (s *Stream) poll(ctx context.Context) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if at := s.now(); at.Sub(s.lastRefresh) < pollEvery && !s.lastRefresh.IsZero() {
		return nil
	}
	s.lastRefresh = s.now()
	return s.catchUp(ctx)
}

// View calls f with the plan, as of the last segment this node holds,
// under the stream's lock: f must not keep it.
func (s *Stream) View(f func(p *Plan)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s.plan)
}

// Spec is the job's spec.
func (s *Stream) Spec() Spec { return s.plan.spec }

// Lease leases up to k prompts to generator gen.
func (s *Stream) Lease(ctx context.Context, gen string, k int) (Lease, error) {
	return s.LeaseOnce(ctx, gen, k, "")
}

// LeaseOnce is Lease, asked with the generator's request ID req: asked
// again with the same ID while the lease it made is open (a retry whose
// first try reached some node, its answer lost), it is that lease, on
// every node, not a second one. "" asks without an ID.
func (s *Stream) LeaseOnce(ctx context.Context, gen string, k int, req string) (Lease, error) {
	printable := func(v string) bool {
		return !strings.ContainsFunc(v, func(r rune) bool { return r < ' ' || r == 0x7f })
	}
	switch {
	case gen == "" || len(gen) > MaxGenName || !printable(gen):
		return Lease{}, fmt.Errorf("%w: generator=%s: a name of 1 to %d printable bytes", ErrBadRequest, quote.Input(gen), MaxGenName)
	case k < 1 || k > s.plan.spec.MaxLease:
		return Lease{}, fmt.Errorf("%w: prompts=%d: a lease takes 1 to %d (the job's max_lease)", ErrBadRequest, k, s.plan.spec.MaxLease)
	case len(req) > MaxRequestID || !printable(req):
		return Lease{}, fmt.Errorf("%w: request=%s: a request ID of up to %d printable bytes", ErrBadRequest, quote.Input(req), MaxRequestID)
	}
	// Nothing is written for a lease that would get nothing: asked
	// again of the store first, as another node may have moved the plan.
	// A request this node knows made an open lease is answered with it.
	for try := 0; ; try++ {
		s.mu.Lock()
		if l, ok := s.plan.leases.ByRequest(gen, req); ok && s.plan.leases.Deadline(l.ID) > s.Now() {
			s.mu.Unlock()
			// Its segment may be the last, its second copy not written
			// (the ask refused for it): answered once it has one.
			s.wmu.Lock()
			err := s.tail.mend(ctx, s.st, s.job, s.segs)
			s.wmu.Unlock()
			if err != nil {
				return Lease{}, err
			}
			return l, nil
		}
		ok := s.plan.Leasable(max(s.plan.Clock(), s.Now()))
		var err error
		if !ok && try == 1 {
			err = s.plan.nothingToLease()
		}
		s.mu.Unlock()
		if ok {
			break
		}
		if err != nil {
			return Lease{}, err
		}
		if err := s.poll(ctx); err != nil {
			return Lease{}, err
		}
	}
	r := Record{Kind: recLease, Gen: gen, K: uint32(k)}
	if req != "" {
		r.Kind, r.Req = recLeaseReq, req
	}
	out, err := s.submit(ctx, r)
	if err == nil {
		err = out.Err
	}
	if err != nil {
		return Lease{}, err
	}
	return *out.Lease, nil
}

// LeaseID is the number of the lease of this job named name.
func (s *Stream) LeaseID(name string) (uint64, error) {
	tag, num, ok := strings.Cut(name, "-")
	id, err := strconv.ParseUint(num, 10, 64)
	if !ok || err != nil || id == 0 {
		return 0, fmt.Errorf("%w: %s is not a lease ID (TAG-N)", ErrBadRequest, quote.Input(name))
	}
	if tag != s.plan.spec.Tag {
		return 0, fmt.Errorf("%w: lease %s is not of task job %s (its leases are %s-N)", ErrLease, quote.Input(name), s.job, s.plan.spec.Tag)
	}
	return id, nil
}

// Answer applies a lease's answers. An answer to an answered prompt is a
// repeat, and changes nothing; answers to a lease that expired are
// refused (an *ExpiredError).
func (s *Stream) Answer(ctx context.Context, id uint64, rows []Row) (Answer, error) {
	if len(rows) == 0 || len(rows) > MaxLease {
		return Answer{}, fmt.Errorf("%w: %d results: 1 to %d", ErrBadRequest, len(rows), MaxLease)
	}
	scores := 0
	for _, w := range rows {
		if scores += len(w.Scores); scores > MaxAnswerScores {
			return Answer{}, fmt.Errorf("%w: more than %d scores in one request: send a lease's answers in parts", ErrBadRequest, MaxAnswerScores)
		}
		if len(w.Scores) > MaxScores {
			return Answer{}, fmt.Errorf("%w: prompt %d: %d scores, at most %d", ErrBadAnswer, w.Prompt, len(w.Scores), MaxScores)
		}
		if err := checkRow(w); err != nil {
			return Answer{}, err
		}
	}
	for try := 0; ; try++ {
		s.mu.Lock()
		var err error
		known := id <= s.plan.Leases().Made()
		if known {
			if _, open := s.plan.Leases().Holds(id, 0); !open {
				// Closed: the plan says how, without a write.
				out := s.plan.answer(Record{Lease: id, Rows: rows})
				s.mu.Unlock()
				if out.Err != nil {
					return Answer{}, out.Err
				}
				return *out.Answer, nil
			}
			for _, w := range rows {
				if h, _ := s.plan.Leases().Holds(id, w.Prompt); !h {
					err = fmt.Errorf("%w: prompt %d is not in lease %s", ErrBadAnswer, w.Prompt, s.plan.LeaseName(id))
					break
				}
			}
		} else if try == 1 {
			err = fmt.Errorf("%w: no lease %s of task job %s", ErrLease, s.plan.LeaseName(id), s.job)
		}
		s.mu.Unlock()
		if err != nil {
			return Answer{}, err
		}
		if known {
			break
		}
		if err := s.refresh(ctx); err != nil {
			return Answer{}, err
		}
	}
	out, err := s.submit(ctx, Record{Kind: recFeedback, Lease: id, Rows: rows})
	if err == nil {
		err = out.Err
	}
	if err != nil {
		return Answer{}, err
	}
	return *out.Answer, nil
}

// Train records that the trainer consumed the steps below step.
func (s *Stream) Train(ctx context.Context, step uint64) error {
	for try := 0; ; try++ {
		s.mu.Lock()
		held, full := s.plan.Trainer(), s.plan.Steps().Full()
		s.mu.Unlock()
		switch {
		case step <= held:
			return nil
		case step <= full:
		case try == 1:
			return fmt.Errorf("%w: step=%d: the trainer consumes full steps, and %d are full", ErrBadRequest, step, full)
		default:
			if err := s.refresh(ctx); err != nil {
				return err
			}
			continue
		}
		break
	}
	out, err := s.submit(ctx, Record{Kind: recTrainer, Step: step})
	if err == nil {
		err = out.Err
	}
	return err
}

// Step calls f with step n's counted answers, and the plan to name them
// by, once it is full; ErrNotFull while it is not.
func (s *Stream) Step(ctx context.Context, n uint64, f func(p *Plan, c []Counted)) error {
	for try := 0; ; try++ {
		s.mu.Lock()
		c, ok := s.plan.Steps().Step(n)
		if ok {
			f(s.plan, c)
			s.mu.Unlock()
			return nil
		}
		so, b, hint := int(s.plan.Steps().Total()), s.plan.spec.Step, s.plan.starvedHint()
		if s.plan.Steps().Forgotten(n) {
			keep, trainer := s.plan.spec.Keep, s.plan.Trainer()
			s.mu.Unlock()
			return fmt.Errorf("%w: step %d of task job %s is more than keep=%d steps behind the trainer's %d; GET /tasks/%s/replay has it", ErrForgotten, n, s.job, keep, trainer, s.job)
		}
		s.mu.Unlock()
		if try == 1 {
			have := max(0, so-int(n)*b)
			return fmt.Errorf("%w: step %d of task job %s has %d of its %d prompts counted%s", ErrNotFull, n, s.job, min(have, b), b, hint)
		}
		if err := s.refresh(ctx); err != nil {
			return err
		}
	}
}

// Log is where the job's log stands on this node: segments, bytes, those
// read from their second copy, and the first segment whose writer had decided
// otherwise than this node (0: none).
func (s *Stream) Log() (segments uint64, bytes int64, damaged int, diverged uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.segs, s.bytes, s.damaged, s.diverged
}

// Replay replays the log from the store on a plan of its own, from
// nothing, up to the last segment this node holds, calling lease for
// each lease made and step for each step as it fills; it answers the
// replay's digest, and whether this node's plan made the same decisions.
func (s *Stream) Replay(ctx context.Context, lease func(p *Plan, l Lease), step func(p *Plan, n uint64, c []Counted)) (digest uint64, equal bool, segs uint64, err error) {
	s.wmu.Lock()
	if err := s.catchUp(ctx); err != nil {
		s.wmu.Unlock()
		return 0, false, 0, err
	}
	s.mu.Lock()
	segs, live := s.segs, s.plan.Digest()
	s.mu.Unlock()
	s.wmu.Unlock()
	p := NewPlan(s.plan.spec)
	err = readSegments(ctx, s.st, s.job, 1, segs, func(seg segment, _ []byte, _ bool) {
		for _, r := range seg.recs {
			full := p.Steps().Full()
			out := p.Apply(r)
			if out.Lease != nil && lease != nil {
				lease(p, *out.Lease)
			}
			for n := full; n < p.Steps().Full() && step != nil; n++ {
				c, _ := p.Steps().Step(n)
				step(p, n, c)
			}
		}
	})
	if err != nil {
		return 0, false, 0, err
	}
	return p.Digest(), p.Digest() == live, segs, nil
}
