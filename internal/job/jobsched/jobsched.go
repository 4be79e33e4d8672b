// Package jobsched keeps the mixture schedules of named jobs
// (PUT/POST /jobs/NAME/schedule, docs/http-api.md "Schedules"): their
// versions, each a content hash chained to its predecessor, in the store
// where every node of a cluster finds them, and the edits that re-plan a
// job's future without touching its past.
//
// Why in the store: every rank and replica of a job must read the same
// schedule, and a job outlives any node. The objects, under the job's key
// prefix _brand/jobs/NAME/schedule/ in the store of the job's home
// dataset (Home: chosen by the job's name among the datasets the
// gateway serves, whatever datasets its schedule names and in whatever
// order, so that every node of a cluster, and a node restarted, creates
// and finds a job's schedule in one place):
//
//	VERSION       the version: its schedule, predecessor and first step (JSON)
//	root          the first version's name, created once (PutIfAbsent)
//	VERSION.next  its successor's name, created once (PutIfAbsent): of two
//	              edits racing on one version, on one node or two, one wins
//	current       the newest version's name, written last: a hint the
//	              chain of .next objects corrects
//	served/NODE   the steps node NODE may have served of the job: a
//	              reservation, written before it serves past it (below)
//
// An edit from step S keeps every step before S as it was: the new
// version holds its predecessor's phases before S and the edit's after
// (api.Schedule.Edit), and S must be after every step the job has read:
// every step this node has served, and every step each other member of
// its cluster has (Edit's others, which a member that does not answer
// fails with ErrUnasked). A request laid out under an older version is served
// where the versions agree, before the first S that follows it, and
// refused (ErrConflict, naming the current version) from there.
//
// A client cannot know S safely while its loaders read ahead: the step
// after the latest served, asked for, may be read before the edit
// arrives. EditNext takes S itself — the step after every step served —
// under the lock that orders edits and requests, so it is never refused
// for a step read; the version it makes names S.
//
// # Steps served, across restarts
//
// What a node has served lives in its memory, exactly, and in the store
// as a reservation: before it serves a step at or past its reservation
// it writes a new one, the step rounded up to the next multiple of
// ReserveSteps (a write per ReserveSteps steps of the job, not per
// request), and a request whose reservation cannot be written fails. A
// restarted node reads its reservation back before it answers for the
// job, and takes every step below it as served: an edit it is asked about
// after a restart is refused from a step it served, and from at most
// ReserveSteps-1 steps after the last one it served (the bound a restart
// costs an edit). An edit also counts the reservations of the nodes it
// did not ask (every node that served the job keeps one): a node that
// has left the cluster, or is known by another URL since, still bounds
// it by the steps it may have served.
//
// # Edits on a cluster
//
// The node taking an edit asks every other member (Others) for the
// latest step each has served, and each answering member (Answer) lays
// out none of the job's steps from the edit's first on for Hold, then
// the first of them under the chain read again; the edit is made within
// Hold/2 of asking or not at all. So no step from the edit's on is laid
// out, anywhere, under the version the edit replaces.
package jobsched

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/job/editproto"
	"github.com/brandgw/brand/internal/quote"
	"github.com/brandgw/brand/s3backend"
)

// Errors, mapped to HTTP statuses by internal/server/httperr.
var (
	// ErrConflict: an edit based on a version that is not the current
	// one, from a step the job has read, or a request laid out under a
	// version an edit has since changed where it reads (409).
	ErrConflict = errkind.New(errkind.Conflict, "schedule conflict")
	// ErrUnknown: no stored schedule of that job, or no such version (404).
	ErrUnknown = errkind.New(errkind.NotFound, "no such schedule")
	// ErrUnasked: a member of the cluster did not say which steps it has
	// served of the job, so an edit cannot be checked against them and is
	// not made (503).
	ErrUnasked = errkind.Named(errkind.Busy, "member_unasked", "a member's steps served are unknown")
)

// ReserveSteps is how many steps of a job a node's reservation in the
// store runs ahead at most (the package doc): a write per ReserveSteps
// steps served, and, after a restart, edits refused up to ReserveSteps-1
// steps past the last one served.
const ReserveSteps = 64

// Hold is how long at most a node that told an edit's node the latest
// step it has served of a job (Answer) lays out no step of the job from
// the edit's on, if the edit's node does not release it sooner (the
// steps before are the same under either version): the
// edit is made within half of it or not at all (ErrUnasked), and the
// node then reads the version chain again before that step, so a step
// is never laid out under the version an edit being made replaces.
const Hold = 5 * time.Second

// Others returns the latest step the other members of a cluster have
// served of job (served false: none has) and the nodes that answered,
// each of which holds the steps from the edit's from on (Answer), or an
// error wrapping ErrUnasked if one did not answer. nil: no other node.
type Others func(ctx context.Context, job string, from uint64) (latest uint64, served bool, answered []string, err error)

// A Conflict is an ErrConflict that names the job's current version: of a
// request laid out under a version an edit has since changed (Current is
// the version to read instead), or of an edit based on a version that is
// not the current one (Current is the one to base it on).
type Conflict = editproto.ConflictError

// A ServedError is the ErrConflict of an edit from a step the job has
// read: Next is the first step an edit could start at when it was
// refused. A job whose loaders read ahead moves it on by the time a
// client sends the edit again; EditNext takes it as it makes the edit.
type ServedError = editproto.ServedError

// Store is what the book needs of a dataset's store (s3backend.Store).
type Store interface {
	Stat(ctx context.Context, key string) (s3backend.ObjectInfo, error)
	ReadRange(ctx context.Context, key, etag string, off int64, p []byte) error
	Put(ctx context.Context, key string, r io.Reader, size int64) (s3backend.ObjectInfo, error)
	PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (s3backend.ObjectInfo, error)
	List(ctx context.Context, prefix string) ([]s3backend.ObjectInfo, error)
}

// Stores returns the stores of the datasets a gateway serves, by
// dataset name, and their names.
type Stores func() (names []string, stores map[string]Store)

// Home is the dataset whose store keeps job's schedule, among names (the
// datasets a gateway serves): the one that ranks first for the job by
// rendezvous hashing, so that it depends on the job and the set of names
// alone — not on their order, nor on the datasets the schedule names —
// and a dataset added or removed moves only the jobs it ranks first for.
// "" for no names.
func Home(job string, names []string) string {
	var home string
	var best uint64
	for _, n := range names {
		h := sha256.Sum256([]byte("brand-schedule-home\n" + job + "\n" + n))
		if r := binary.BigEndian.Uint64(h[:8]); home == "" || r > best || r == best && n < home {
			home, best = n, r
		}
	}
	return home
}

// A Version is one version of a job's schedule.
type Version struct {
	Job     string `json:"job"`
	Version string `json:"version"`
	// Previous is the version this one edits ("" for the first) and
	// FromStep the step from which they differ (0 for the first).
	Previous string `json:"previous,omitempty"`
	FromStep uint64 `json:"from_step"`
	// Schedule is the whole schedule, as mix_schedule= writes it.
	Schedule string `json:"schedule"`
	// BucketStages are a bucketed mixture's staged buckets and budget
	// stored with it (buckets=stored reads them), none for another's.
	api.BucketStages
	sched api.Schedule // parsed
}

// Parsed returns the schedule.
func (v *Version) Parsed() api.Schedule { return v.sched }

// MaxObjectBytes bounds a stored version read back: a schedule of the
// most phases and datasets.
const MaxObjectBytes = 8 << 20

// refresh is how long a node trusts the current version it read last
// before it reads the chain again: an edit made on another node is seen
// within it, and at once where the edit asked this node (Current).
const refresh = time.Second

// A Book is the stored schedules of a gateway's jobs. Safe for concurrent
// use.
type Book struct {
	stores  Stores
	now     func() time.Time
	node    string // this node's name in its reservations' keys
	reserve uint64 // ReserveSteps, or a test's

	// resv is held while a reservation is read or written: one write of
	// a job's at a time, never a lower over a higher.
	resv sync.Mutex
	// floor[job] is 1 + the latest step this node's reservation in the
	// store allowed when first read (a previous life's served steps);
	// reserved[job] the reservation written since (steps below it may be
	// served without another write).
	floor, reserved map[string]uint64
	// holds: an edit's node was told this node's latest step; no step
	// of the job from the hold's on is laid out until it releases the
	// hold or Hold passes (Answer, Release).
	holds *editproto.Holds[string, uint64]
	sleep func(ctx context.Context, d time.Duration, released <-chan struct{}) error

	mu sync.Mutex
	// edit is held by an edit, and shared by the requests resolving a
	// version (For): a request's version and the step it records served
	// are one step to an edit on this node, which sees either both or
	// neither.
	edit     sync.RWMutex
	versions map[string]map[string]*Version // job → version → its content
	current  map[string]currentEntry
	where    map[string]string // job → the dataset whose store keeps it
	latest   map[string]uint64 // job → 1 + the latest step served
	// used[job] is when job was last used: the Book forgets the jobs
	// unused for longest (forget.go).
	used map[string]time.Time
	keep int // maxJobs, or a test's
	// confirmed[job] is 1 + the latest step a request was laid out under
	// the current version read from the store for it: a request reading
	// a later step reads the chain again, so that an edit another node
	// accepted from a step after every step served is seen before that
	// step is laid out.
	confirmed map[string]uint64
}

type currentEntry struct {
	v    *Version
	read time.Time
}

// New returns a book over the stores stores gives, of the node named
// node (its URL in a cluster; "" for a single gateway).
func New(stores Stores, node string) *Book {
	return &Book{stores: stores, now: time.Now, node: node, reserve: ReserveSteps, versions: map[string]map[string]*Version{},
		current: map[string]currentEntry{}, where: map[string]string{}, latest: map[string]uint64{}, confirmed: map[string]uint64{},
		floor: map[string]uint64{}, reserved: map[string]uint64{}, holds: editproto.NewHolds[string](func(a, b uint64) bool { return a < b }), used: map[string]time.Time{}, keep: maxJobs, sleep: editproto.WaitOut}
}

// Answer is this node's answer to another's question before an edit of
// job from step from (Latest), with a promise: no step from the later of
// from and the step after the latest is laid out until the edit's node
// releases it (Release) or Hold passes (For waits),
// and that step is laid out under the chain read again, so that the
// edit, if made, is seen before it. It waits for the requests resolving
// a version now, whose steps it counts.
func (b *Book) Answer(ctx context.Context, job string, from uint64, edit string) (uint64, bool, error) {
	b.use(job)
	b.edit.Lock()
	defer b.edit.Unlock()
	l, ok, err := b.Latest(ctx, job)
	if err != nil {
		return 0, false, err
	}
	if ok {
		from = max(from, l+1)
	}
	b.holds.Add(job, from, b.now(), edit)
	b.mu.Lock()
	b.confirmed[job] = min(b.confirmed[job], from)
	b.mu.Unlock()
	return l, ok, nil
}

// Release ends the hold an Answer promised edit (its ID): the edit of job
// is made or refused.
func (b *Book) Release(job, edit string) { b.holds.Release(job, b.now(), edit) }

// waitHold waits until job's hold ends if a step up to last is held
// (Answer): Hold, or until the edit's node releases it.
func (b *Book) waitHold(ctx context.Context, job string, last uint64) error {
	d, released := b.holds.Wait(job, last+1, b.now())
	if d <= 0 {
		return nil
	}
	return b.sleep(ctx, d, released)
}

func prefix(job string) string { return "_brand/jobs/" + job + "/schedule/" }

// versionOf is a version's name: the hash of its predecessor, first step
// and schedule.
func versionOf(prev string, from uint64, sched string, stages api.BucketStages) string {
	s := "brand-schedule-v1\n" + prev + "\n" + strconv.FormatUint(from, 10) + "\n" + sched
	if !stages.Zero() {
		// A version without stages is named as before stages were.
		s += "\nbuckets=" + stages.Buckets + "\nbudget=" + stages.Budget + "\nbudget_tokens=" + stages.BudgetTokens
	}
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}

// ValidVersion reports whether v looks like a version: 16 lowercase hex
// digits.
func ValidVersion(v string) bool {
	if len(v) != 16 {
		return false
	}
	for i := range len(v) {
		if c := v[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// served records that job has read steps up to last: no edit may start
// at or before it.
func (b *Book) served(job string, last uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if last+1 > b.latest[job] {
		b.latest[job] = last + 1
	}
}

// Latest returns the latest step of job this node has served, its
// reservation read back after a restart included (the package doc), and
// whether it has served any.
func (b *Book) Latest(ctx context.Context, job string) (uint64, bool, error) {
	b.use(job)
	b.resv.Lock()
	floor, err := b.floorOf(ctx, job)
	b.resv.Unlock()
	if err != nil {
		return 0, false, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n := max(b.latest[job], floor)
	return n - 1, n > 0, nil
}

// nodeKey is the key of this node's reservation of job.
func (b *Book) nodeKey(job string) string {
	name := "gateway"
	if b.node != "" {
		h := sha256.Sum256([]byte(b.node))
		name = hex.EncodeToString(h[:8])
	}
	return prefix(job) + "served/" + name
}

// reservation is the body of a node's reservation object.
type reservation struct {
	Node string `json:"node,omitempty"`
	// Below: every step the node has served of the job is below it.
	Below uint64 `json:"below"`
}

// floorOf returns job's floor, reading this node's reservation from the
// store the first time; b.resv held. A job with no stored schedule has
// none (0).
func (b *Book) floorOf(ctx context.Context, job string) (uint64, error) {
	b.mu.Lock()
	f, ok := b.floor[job]
	b.mu.Unlock()
	if ok {
		return f, nil
	}
	st, err := b.locate(ctx, job)
	if errors.Is(err, ErrUnknown) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	body, err := readSmall(ctx, st, b.nodeKey(job))
	var r reservation
	switch {
	case errors.Is(err, s3backend.ErrNotFound):
	case err != nil:
		return 0, fmt.Errorf("reading this node's steps served of job %s: %w", job, err)
	default:
		if err := json.Unmarshal(body, &r); err != nil {
			return 0, fmt.Errorf("this node's steps served of job %s are damaged in the store (%s): %w", job, b.nodeKey(job), err)
		}
	}
	b.mu.Lock()
	b.floor[job] = r.Below
	b.reserved[job] = max(b.reserved[job], r.Below)
	b.mu.Unlock()
	return r.Below, nil
}

// othersReserved returns the latest step the reservations of job's
// nodes other than those named allow (every node that ever served the
// job keeps one), and whether there is any.
func (b *Book) othersReserved(ctx context.Context, job string, named []string) (uint64, bool, error) {
	st, err := b.locate(ctx, job)
	if err != nil {
		return 0, false, err
	}
	objs, err := st.List(ctx, prefix(job)+"served/")
	if err != nil {
		return 0, false, fmt.Errorf("listing the steps served of job %s: %w", job, err)
	}
	var below uint64
	for _, o := range objs {
		body, err := readSmall(ctx, st, o.Key)
		if errors.Is(err, s3backend.ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, false, fmt.Errorf("reading the steps served of job %s: %w", job, err)
		}
		var r reservation
		if err := json.Unmarshal(body, &r); err != nil {
			return 0, false, fmt.Errorf("the steps served of job %s are damaged in the store (%s): %w", job, o.Key, err)
		}
		if !slices.Contains(named, r.Node) {
			below = max(below, r.Below)
		}
	}
	return below - 1, below > 0, nil
}

// reserveFor makes sure this node's reservation of job covers step last,
// writing a new one (last rounded up to the next multiple of b.reserve)
// before the step is served if it does not.
func (b *Book) reserveFor(ctx context.Context, job string, last uint64) error {
	b.mu.Lock()
	_, read := b.floor[job]
	covered := read && last < b.reserved[job]
	b.mu.Unlock()
	if covered {
		return nil
	}
	b.resv.Lock()
	defer b.resv.Unlock()
	if _, err := b.floorOf(ctx, job); err != nil {
		return err
	}
	b.mu.Lock()
	cur := b.reserved[job]
	b.mu.Unlock()
	if last < cur {
		return nil
	}
	st, err := b.locate(ctx, job)
	if err != nil {
		return err
	}
	below := (last/b.reserve + 1) * b.reserve
	body, _ := json.Marshal(reservation{Node: b.node, Below: below})
	if _, err := st.Put(ctx, b.nodeKey(job), bytes.NewReader(body), int64(len(body))); err != nil {
		return fmt.Errorf("recording the steps served of job %s before serving step %d: %w", job, last, err)
	}
	b.mu.Lock()
	b.reserved[job] = below
	b.mu.Unlock()
	return nil
}

// Edit stores a new version of job's schedule: with base "", its first
// (text a whole schedule, from 0); otherwise base's edited from step
// from by text, whose first phase starts at from (api.Schedule.Edit).
// from must be after every step this node has served (Latest), every
// step the other members have, which others asks them for (nil: a single
// gateway) once the edit is known to be of the current version, and
// every step the reservations of nodes not asked allow; a member that
// does not answer fails the edit (ErrUnasked). It refuses with
// ErrConflict an edit of a job that has a schedule with base "", or of a
// version that is not the current one (a *Conflict naming the current
// version), or from a step served (a *ServedError naming the first step
// an edit could start at); with api.ErrMix a schedule it cannot read.
// check vets the edited schedule before it is stored (its datasets
// served, its bounds).
func (b *Book) Edit(ctx context.Context, job, text string, from uint64, base string, others Others, check func(api.Schedule) error) (*Version, error) {
	return b.edit1(ctx, job, text, api.BucketStages{}, api.EditFrom{Step: from}, base, others, check)
}

// EditStages is Edit with the bucket stages stored beside the schedule:
// a first version's whole, an edit's from its step on (the stages before
// kept; none given keeps the version's: api.BucketStages.Edit).
func (b *Book) EditStages(ctx context.Context, job, text string, stages api.BucketStages, from uint64, base string, others Others, check func(api.Schedule) error) (*Version, error) {
	return b.edit1(ctx, job, text, stages, api.EditFrom{Step: from}, base, others, check)
}

// EditNext is Edit from the first step the job has not read: the step
// after every step this node, the other members and the reservations of
// nodes not asked have served (0 if none has), taken under the edit's
// lock, so that no request lays a step out between the choice and the
// edit. text's first phase is written at "next" and steps written +N
// count from the step taken (api.ResolveNext); the version made names
// the step in FromStep. A job with no schedule has no step to start
// from: its first schedule is stored with Edit from step 0.
func (b *Book) EditNext(ctx context.Context, job, text, base string, others Others, check func(api.Schedule) error) (*Version, error) {
	if base == "" {
		return nil, fmt.Errorf("%w: a job's first schedule starts at step 0, not at the next step: store it with from_step 0", api.ErrMix)
	}
	return b.edit1(ctx, job, text, api.BucketStages{}, api.EditFrom{Next: true}, base, others, check)
}

// EditNextStages is EditNext with bucket stages (EditStages), their
// first written at "next" as the schedule's first phase is.
func (b *Book) EditNextStages(ctx context.Context, job, text string, stages api.BucketStages, base string, others Others, check func(api.Schedule) error) (*Version, error) {
	if base == "" {
		return nil, fmt.Errorf("%w: a job's first schedule starts at step 0, not at the next step: store it with from_step 0", api.ErrMix)
	}
	return b.edit1(ctx, job, text, stages, api.EditFrom{Next: true}, base, others, check)
}

// edit1 is Edit and EditNext.
func (b *Book) edit1(ctx context.Context, job, text string, stages api.BucketStages, at api.EditFrom, base string, others Others, check func(api.Schedule) error) (*Version, error) {
	b.use(job)
	if strings.TrimSpace(text) == "" {
		// An empty schedule reads no dataset: stored, every request of
		// the job would have no mixture to lay out.
		return nil, fmt.Errorf("%w: job %s's schedule is empty: give at least one phase, such as 0:web:0.7,code:0.3", api.ErrMix, job)
	}
	// Held through the question to the other members: this node serves
	// no step of the job's until the edit is made or refused.
	b.edit.Lock()
	defer b.edit.Unlock()
	from := at.Step
	var sched api.Schedule
	var prev *Version
	var asked time.Time // when the other members were asked (Answer's hold)
	if base == "" {
		if from != 0 {
			return nil, fmt.Errorf("%w: a job's first schedule starts at step 0, not %d", api.ErrMix, from)
		}
		cur, err := b.Current(ctx, job)
		if err == nil {
			return nil, editproto.NewConflictError(editproto.Schedule, cur.Version, fmt.Errorf("%w: job %s has a schedule, version %s: edit it (base=%s) from a step it has not read", ErrConflict, job, cur.Version, cur.Version))
		}
		if !errors.Is(err, ErrUnknown) {
			return nil, err
		}
		if sched, err = api.ParseSchedule(text); err != nil {
			return nil, err
		}
		if stages, err = (api.BucketStages{}).Edit(0, stages, false); err != nil {
			return nil, fmt.Errorf("%w: %w", api.ErrMix, err)
		}
	} else {
		var err error
		if prev, err = b.fresh(ctx, job); err != nil {
			return nil, err
		}
		if prev.Version != base {
			if b.madeBy(ctx, prev, text, stages, at, base) {
				return prev, nil // this edit's own retry, its answer lost
			}
			return nil, editproto.NewConflictError(editproto.Schedule, prev.Version, fmt.Errorf("%w: the edit is based on version %s of job %s's schedule; the current version is %s (an edit made since): read it and edit that", ErrConflict, base, job, prev.Version))
		}
		latest, served, err := b.Latest(ctx, job)
		if err != nil {
			return nil, err
		}
		if at.Next && served {
			// The other members hold the steps from their own next one
			// on (Answer), each at or before the step the edit takes.
			from = latest + 1
		}
		answered := []string{b.node}
		if others != nil {
			asked = b.now()
			l, ok, nodes, err := others(ctx, job, from)
			if err != nil {
				return nil, err
			}
			if ok && (!served || l > latest) {
				latest, served = l, true
			}
			answered = append(answered, nodes...)
		}
		// Nodes not asked — no longer members, or known by another URL
		// since — may have served steps: their reservations bound them.
		l, ok, err := b.othersReserved(ctx, job, answered)
		if err != nil {
			return nil, err
		}
		if ok && (!served || l > latest) {
			latest, served = l, true
		}
		if at.Next {
			if served {
				from = max(from, latest+1)
			}
			if text, err = api.ResolveNext(text, from); err != nil {
				return nil, err
			}
		}
		if served && from <= latest {
			return nil, editproto.NewServedError(editproto.Schedule, latest+1, fmt.Errorf("%w: job %s has read up to step %d; an edit starts after it (from step %d or later, or from_step %q), not at %d", ErrConflict, job, latest, latest+1, api.NextStep, from))
		}
		if sched, err = prev.sched.Edit(from, text); err != nil {
			return nil, err
		}
		if stages, err = prev.BucketStages.Edit(from, stages, at.Next); err != nil {
			return nil, fmt.Errorf("%w: %w", api.ErrMix, err)
		}
	}
	if check != nil {
		if err := check(sched); err != nil {
			return nil, err
		}
	}
	v := &Version{Job: job, Previous: base, FromStep: from, Schedule: sched.String(), BucketStages: stages, sched: sched}
	v.Version = versionOf(base, from, v.Schedule, v.BucketStages)
	names, stores := b.stores()
	// A job's first schedule is made at its home, where every node looks
	// first: two nodes making one at once race on one root (PutIfAbsent),
	// whatever datasets each names first. An edit is made where the chain
	// is.
	dsName := Home(job, names)
	if prev != nil {
		b.mu.Lock()
		dsName = b.where[job]
		b.mu.Unlock()
	}
	st := stores[dsName]
	if st == nil {
		return nil, fmt.Errorf("%w: dataset %s, whose store keeps job %s's schedule, is not served here", ErrUnknown, dsName, job)
	}
	body, _ := json.Marshal(v)
	p := prefix(job)
	if _, err := st.Put(ctx, p+v.Version, bytes.NewReader(body), int64(len(body))); err != nil {
		return nil, fmt.Errorf("storing job %s's schedule: %w", job, err)
	}
	link := p + "root"
	if prev != nil {
		link = p + prev.Version + ".next"
	}
	if !asked.IsZero() && b.now().Sub(asked) > Hold/2 {
		// The members' holds may have ended: they may be laying out
		// later steps under the version this edit replaces.
		return nil, fmt.Errorf("%w: the edit of job %s took over %s after the members were asked; it is not made: retry", ErrUnasked, job, Hold/2)
	}
	if _, err := st.PutIfAbsent(ctx, link, strings.NewReader(v.Version), int64(len(v.Version))); err != nil {
		if errors.Is(err, s3backend.ErrExists) {
			b.forget(job)
			cur, cerr := b.fresh(ctx, job)
			if cerr == nil && cur.Version == v.Version {
				return cur, nil // this edit's own retry
			}
			if cerr != nil {
				return nil, fmt.Errorf("%w: another edit of job %s's schedule won the race from version %s", ErrConflict, job, base)
			}
			return nil, editproto.NewConflictError(editproto.Schedule, cur.Version, fmt.Errorf("%w: another edit of job %s's schedule won the race from version %s; the current version is %s", ErrConflict, job, base, cur.Version))
		}
		return nil, fmt.Errorf("storing job %s's schedule: %w", job, err)
	}
	// The hint, written last: a reader follows the chain past it anyway.
	_, _ = st.Put(ctx, p+"current", strings.NewReader(v.Version), int64(len(v.Version)))
	b.mu.Lock()
	b.remember(v)
	b.where[job] = dsName
	b.current[job] = currentEntry{v: v, read: b.now()}
	b.mu.Unlock()
	return v, nil
}

// madeBy reports whether version v is what the edit of base by text from
// at made: a client that retries an edit whose answer it lost (its
// connection broke) is told the version it made, rather than a 409 that
// its own edit caused. An edit from the next step took v.FromStep.
func (b *Book) madeBy(ctx context.Context, v *Version, text string, stages api.BucketStages, at api.EditFrom, base string) bool {
	if v.Previous != base || (!at.Next && at.Step != v.FromStep) {
		return false
	}
	st, err := b.locate(ctx, v.Job)
	if err != nil {
		return false
	}
	prev, err := b.load(ctx, st, v.Job, base)
	if err != nil {
		return false
	}
	if at.Next {
		if text, err = api.ResolveNext(text, v.FromStep); err != nil {
			return false
		}
	}
	sched, err := prev.sched.Edit(v.FromStep, text)
	if err != nil {
		return false
	}
	bs, err := prev.BucketStages.Edit(v.FromStep, stages, at.Next)
	return err == nil && versionOf(base, v.FromStep, sched.String(), bs) == v.Version
}

// remember keeps v; b.mu held.
func (b *Book) remember(v *Version) {
	if b.versions[v.Job] == nil {
		b.versions[v.Job] = map[string]*Version{}
	}
	b.versions[v.Job][v.Version] = v
}

func (b *Book) forget(job string) {
	b.mu.Lock()
	delete(b.current, job)
	b.mu.Unlock()
}

// Current returns job's current version: the one read within the last
// second, or the chain read again — and read again on each call while
// another node taking an edit of the job holds this one's word (Answer),
// and once after it releases it, so that the version its node answered
// 201 for is the one every node tells of from then on
// (editproto.Holds.Settled).
func (b *Book) Current(ctx context.Context, job string) (*Version, error) {
	b.use(job)
	b.mu.Lock()
	e, ok := b.current[job]
	b.mu.Unlock()
	if ok && b.now().Sub(e.read) < refresh && b.holds.Settled(job, e.read) {
		return e.v, nil
	}
	return b.fresh(ctx, job)
}

// fresh reads job's current version from the store: the current hint
// (or the root), then each .next until the last. It is as new as its
// beginning: a version made while it ran may be missing from it.
func (b *Book) fresh(ctx context.Context, job string) (*Version, error) {
	start := b.now()
	st, err := b.locate(ctx, job)
	if err != nil {
		return nil, err
	}
	p := prefix(job)
	name, err := readSmall(ctx, st, p+"current")
	if errors.Is(err, s3backend.ErrNotFound) {
		name, err = readSmall(ctx, st, p+"root")
	}
	if err != nil {
		return nil, fmt.Errorf("reading job %s's schedule: %w", job, err)
	}
	for range 1 << 16 {
		next, err := readSmall(ctx, st, p+string(name)+".next")
		if errors.Is(err, s3backend.ErrNotFound) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading job %s's schedule: %w", job, err)
		}
		name = next
	}
	v, err := b.load(ctx, st, job, string(name))
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.current[job] = currentEntry{v: v, read: start}
	b.mu.Unlock()
	return v, nil
}

// locate returns the store that keeps job's schedule: the dataset found
// before, or the first whose store has the job's root, its home first
// (a schedule made before the home was the rule, in the store of its
// first dataset, is found after it).
func (b *Book) locate(ctx context.Context, job string) (Store, error) {
	names, stores := b.stores()
	b.mu.Lock()
	ds := b.where[job]
	b.mu.Unlock()
	if st := stores[ds]; st != nil {
		return st, nil
	}
	home := Home(job, names)
	names = append([]string{home}, slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == home })...)
	for _, n := range names {
		if stores[n] == nil {
			continue
		}
		if _, err := stores[n].Stat(ctx, prefix(job)+"root"); err == nil {
			b.mu.Lock()
			b.where[job] = n
			b.mu.Unlock()
			return stores[n], nil
		} else if !errors.Is(err, s3backend.ErrNotFound) {
			return nil, fmt.Errorf("looking for job %s's schedule in dataset %s's store: %w", job, n, err)
		}
	}
	return nil, fmt.Errorf("%w: job %s has no stored schedule (PUT /jobs/%s/schedule stores one)", ErrUnknown, job, job)
}

// load returns version name of job, kept or read from st.
func (b *Book) load(ctx context.Context, st Store, job, name string) (*Version, error) {
	b.mu.Lock()
	v := b.versions[job][name]
	b.mu.Unlock()
	if v != nil {
		return v, nil
	}
	if !ValidVersion(name) {
		return nil, fmt.Errorf("%w: job %s's schedule names version %s", ErrUnknown, job, quote.Input(name))
	}
	body, err := readSmall(ctx, st, prefix(job)+name)
	if errors.Is(err, s3backend.ErrNotFound) {
		return nil, fmt.Errorf("%w: job %s has no schedule version %s", ErrUnknown, job, name)
	}
	if err != nil {
		return nil, err
	}
	v = &Version{}
	if err := json.Unmarshal(body, v); err != nil || v.Version != name || v.Job != job {
		return nil, fmt.Errorf("job %s's schedule version %s is damaged in the store (%v)", job, name, err)
	}
	if v.sched, err = api.ParseSchedule(v.Schedule); err != nil {
		return nil, fmt.Errorf("job %s's schedule version %s: %w", job, name, err)
	}
	if versionOf(v.Previous, v.FromStep, v.Schedule, v.BucketStages) != name {
		return nil, fmt.Errorf("job %s's schedule version %s does not hash to its name", job, name)
	}
	b.mu.Lock()
	b.remember(v)
	b.mu.Unlock()
	return v, nil
}

// For returns the version a request of job that reads steps [first,
// last] is laid out under: the current one for version "" or "latest";
// the version it names where it agrees with the current one, before the
// first step an edit since it changed; otherwise ErrConflict naming the
// current version. With serve, the steps are recorded as served (in
// memory, and in the store's reservation first if they pass it) with the
// version's resolution: an edit on this node sees both or neither. A
// step held by an answer to an edit's node (Answer) waits for the hold.
func (b *Book) For(ctx context.Context, job, version string, first, last uint64, serve bool) (*Version, error) {
	b.use(job)
	if err := b.waitHold(ctx, job, last); err != nil {
		return nil, err
	}
	b.edit.RLock()
	defer b.edit.RUnlock()
	v, err := b.resolve(ctx, job, version, first, last)
	if err == nil && serve {
		if err = b.reserveFor(ctx, job, last); err != nil {
			return nil, err
		}
		b.served(job, last)
	}
	return v, err
}

func (b *Book) resolve(ctx context.Context, job, version string, first, last uint64) (*Version, error) {
	b.mu.Lock()
	ahead := last >= b.confirmed[job]
	b.mu.Unlock()
	var cur *Version
	var err error
	if ahead {
		cur, err = b.fresh(ctx, job)
		if err == nil {
			b.mu.Lock()
			b.confirmed[job] = max(b.confirmed[job], last+1)
			b.mu.Unlock()
		}
	} else {
		cur, err = b.Current(ctx, job)
	}
	if err != nil {
		return nil, err
	}
	if version == "" || version == "latest" || version == cur.Version {
		return cur, nil
	}
	st, err := b.locate(ctx, job)
	if err != nil {
		return nil, err
	}
	// Walk back from the current version: the earliest step an edit
	// after the named version changed.
	changed := cur.FromStep
	for v := cur; ; {
		if v.Previous == "" {
			return nil, fmt.Errorf("%w: job %s's schedule has no version %s; the current version is %s", ErrUnknown, job, version, cur.Version)
		}
		if v, err = b.load(ctx, st, job, v.Previous); err != nil {
			return nil, err
		}
		if v.Version == version {
			if last < changed {
				return v, nil
			}
			return nil, editproto.NewConflictError(editproto.Schedule, cur.Version, fmt.Errorf("%w: job %s's schedule was edited from step %d (version %s is current); step %d of version %s is no longer read", ErrConflict, job, changed, cur.Version, max(first, changed), version))
		}
		changed = min(changed, v.FromStep)
	}
}

// readSmall reads an object of at most MaxObjectBytes.
func readSmall(ctx context.Context, st Store, key string) ([]byte, error) {
	return editproto.ReadObject(ctx, st, key, MaxObjectBytes)
}
