package resolve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/chain"
	"github.com/brandgw/brand/internal/job/editproto"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/job/jobsched"
	"github.com/brandgw/brand/internal/job/query"
)

// An Editor makes the edits of named jobs — an exclusion or an append of
// a job's chain, an edit of its stored schedule — under one rule on a
// cluster: an edit from step S only if no member has served S, every
// other member asked at once (Question) and holding the job's later
// steps and positions until the edit is made or refused. It answers the
// same question when another member takes an edit, and reads the jobs'
// chains. It resolves each edit's job with its Resolver.
type Editor struct{ r *Resolver }

// A Question is what a node taking an edit of a job asks every other
// member: the furthest it has served of the job — the latest step of its
// stored schedule, and for an edit of its chain over Dataset the furthest
// position — and to hold the job's steps from Step, and its positions
// from Epoch's Pos, until the edit is made or refused. With Release, the
// edit's node says it is: the holds the question promised end. To names
// the members a release is for (Answer.Node); nil asks every member. Edit
// is the edit's ID, the same in its question and its release, so that a
// member that hears the release first (paused while the edit asked) holds
// nothing when it hears the question.
type Question struct {
	Edit    string
	Job     string
	Step    uint64
	Dataset string // "" for a schedule's edit
	Epoch   uint64
	Pos     int
	Release bool
	To      []string
}

// An Answer is a member's: the latest step of the job's schedule it has
// served (StepServed false: none), and the furthest position of its
// chain over the question's dataset (PosServed false: none).
type Answer struct {
	Node       string
	Step       uint64
	StepServed bool
	Epoch      uint64
	End        int
	PosServed  bool
}

// Others asks every other member of the cluster a question at once (those
// q.To names, if not nil): their answers, or with an error wrapping
// jobsched.ErrUnasked (503) if one did not answer, for every kind of edit
// (an edit is never made on a guess), the answers of those that did. nil:
// a single gateway.
type Others func(ctx context.Context, q Question) ([]Answer, error)

// Answer is this node's answer to another taking an edit of a job: what
// it has served, and the promise to hold the job's later steps and
// positions while the edit is made (jobsched.Book.Answer,
// editproto.Positions.Answer).
func (ed *Editor) Answer(ctx context.Context, q Question) (Answer, error) {
	a := Answer{Node: ed.r.cfg.Node}
	if q.Release {
		ed.r.book().Release(q.Job, q.Edit)
		if q.Dataset != "" {
			ed.r.served.Release(q.Dataset, q.Job, q.Edit)
		}
		return a, nil
	}
	var err error
	if a.Step, a.StepServed, err = ed.r.book().Answer(ctx, q.Job, q.Step, q.Edit); err != nil {
		return Answer{}, err
	}
	if q.Dataset != "" {
		a.Epoch, a.End, a.PosServed = ed.r.served.Answer(q.Dataset, q.Job, q.Epoch, q.Pos, q.Edit)
	}
	return a, nil
}

// releaseTimeout bounds the release of the holds an edit's question
// promised: a member that does not hear it ends its hold after
// editproto.Hold.
const releaseTimeout = 2 * time.Second

// ask asks every other member q (Config.Others) under a new edit ID, and
// returns with their answers release, which tells the members that the
// edit q asked about is made or refused: to call once it is. The members
// that answered are told before release returns; those that did not (an
// edit one of them fails is refused) are told in the background, for
// editproto.Hold at most, so that the refusal waits for no release
// bound, and a member that hears the question late (paused while it was
// asked) holds nothing: the release came first (editproto.Holds).
func (ed *Editor) ask(ctx context.Context, q Question) (as []Answer, release func(), err error) {
	var id [16]byte
	_, _ = rand.Read(id[:])
	q.Edit = hex.EncodeToString(id[:])
	as, err = ed.r.cfg.Others(ctx, q)
	to := make([]string, len(as))
	for i, a := range as {
		to[i] = a.Node
	}
	return as, func() {
		if err != nil {
			go ed.releaseAll(ctx, q)
		}
		ed.release(ctx, q, to)
	}, err
}

// releaseAll tells every member that the edit q asked about is refused,
// asking again every half second until each has heard or editproto.Hold
// has passed: a member paused while it was asked hears it on resuming,
// beside the question, and holds nothing (editproto.Holds). Those that
// answered the question hear it twice; the second holds nothing either.
func (ed *Editor) releaseAll(ctx context.Context, q Question) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), editproto.Hold)
	defer cancel()
	q.Release, q.To = true, nil
	for {
		if _, err := ed.r.cfg.Others(ctx, q); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(releaseTimeout / 4):
		}
	}
}

// release tells the members to that the edit q asked about is made or
// refused, so that the job's batches held for it go on at once rather
// than after editproto.Hold, and their requests of the job read its
// edits again (editproto.Positions.Settled). It returns once they have
// heard, before the edit's node answers its client. Best effort: a
// member that does not hear it ends its hold by the time.
func (ed *Editor) release(ctx context.Context, q Question, to []string) {
	if len(to) == 0 {
		return
	}
	q.Release, q.To = true, to
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	_, _ = ed.r.cfg.Others(ctx, q)
}

// scheduleOthers is the others a stored schedule's edit asks (nil on a
// single gateway): the same question, its steps alone. release is set
// to release the members that answered.
func (ed *Editor) scheduleOthers(release *func()) jobsched.Others {
	if ed.r.cfg.Others == nil {
		return nil
	}
	return func(ctx context.Context, job string, from uint64) (uint64, bool, []string, error) {
		as, done, err := ed.ask(ctx, Question{Job: job, Step: from})
		*release = done
		if err != nil {
			return 0, false, nil, err
		}
		var latest uint64
		served := false
		nodes := make([]string, 0, len(as))
		for _, a := range as {
			if a.StepServed && (!served || a.Step > latest) {
				latest, served = a.Step, true
			}
			nodes = append(nodes, a.Node)
		}
		return latest, served, nodes, nil
	}
}

// chainOf reads the chain of edits stored under job's name over what src
// reads (nil if the job is not named or has none). A mixture's
// components are each asked: a chain over one of them is the table's to
// refuse, not a chain to drop.
func (r *Resolver) chainOf(ctx context.Context, src layout.Source, job api.Job) (*chain.Link, error) {
	if job.Name == "" {
		return nil, nil
	}
	for _, ds := range src.Datasets() {
		if ds.Store == nil {
			continue // a dataset of no store (a test's) keeps no edits
		}
		head, err := r.chains.Of(ctx, ds.Store, ds.Name, job.Name)
		if err != nil || head != nil {
			return head, err
		}
	}
	return nil, nil
}

// applyChain lays src and job out under the chain ending at head, read
// over src's dataset: the layout's chain (registered with the orders),
// the versions its appends grew the job to, and the version it names.
// A job whose chain has appends reads them from the version it read
// first, any version they grew it to, or one extending the last (a
// client that pins none, after a later brand index --append): from
// another version (the dataset re-packed since) it is refused
// (chain.ErrNotOfVersion), never served without its edits.
func (r *Resolver) applyChain(ctx context.Context, head *chain.Link, src *layout.Source, job *api.Job) error {
	read := src.DS
	over := read
	var versions []*catalog.Dataset
	if head.Newest(chain.Append) != nil {
		ids := []string{head.Chain()[0].IndexID}
		for _, e := range head.Chain() {
			if e.IsAppend() {
				ids = append(ids, e.Index)
			}
		}
		last := ids[len(ids)-1]
		if !slices.Contains(ids, read.ID()) && !extends(read, last) {
			return fmt.Errorf("%w: job %s took appends over index versions %s to %s; this request reads %s, which neither is nor extends them (the dataset was re-packed since?): pin index=%s, or name the job anew",
				chain.ErrNotOfVersion, job.Name, ids[0], last, read.ID(), ids[0])
		}
		for _, id := range ids {
			ds, err := r.cfg.Catalog.Version(read.Name, id)
			if errors.Is(err, catalog.ErrVersion) {
				return fmt.Errorf("%w; job %s took the samples appended in it (POST /jobs/%s/append): this node has not loaded it yet", err, job.Name, job.Name)
			}
			if err == nil {
				ds, err = r.view(ctx, ds, *job)
			}
			if err != nil {
				return err
			}
			versions = append(versions, ds)
		}
		over = versions[len(versions)-1]
	}
	x, err := r.chains.Resolve(ctx, over, head)
	if err != nil {
		return err
	}
	r.cfg.Orders.Edits().Add(x)
	src.DS, src.Edit, src.Versions = over, x, versions
	if read.ID() != over.ID() {
		src.Index = read.ID()
	}
	job.Edit = x.Version
	return nil
}

// extends reports whether ds is index version id or one extending it.
func extends(ds *catalog.Dataset, id string) bool {
	return ds.ID() == id || slices.ContainsFunc(ds.Index.Lineage().Ancestors(), func(a chunkindex.Ancestor) bool { return a.ID == id })
}

// PeerEdit reports whether version is an edit of job's chain over ds,
// registering the chain up to it for its layout: a peer's stream names
// the edit its positions are laid out under.
func (ed *Editor) PeerEdit(ctx context.Context, ds *catalog.Dataset, job, version string) bool {
	if _, ok := ed.r.cfg.Orders.Edits().Get(version); ok {
		return true
	}
	head, err := ed.r.chains.Of(ctx, ds.Store, ds.Name, job)
	if err != nil || head == nil {
		return false
	}
	for _, e := range head.Chain() {
		if e.Version == version {
			// The chain up to it, resolved in the version it grew the
			// job to: the one the asker's batch is laid out over.
			x, err := ed.r.chains.Resolve(ctx, ds, e)
			if err != nil {
				return false
			}
			ed.r.cfg.Orders.Edits().Add(x)
			return true
		}
	}
	return false
}

// An EditJob is a named job as an edit of its chain finds it: resolved
// as its batches are, with its chain's current edit read from the store
// now, and its steps counted through the chain.
type EditJob struct {
	*Job
	Head  *chain.Link // the current edit, nil for none
	Store chain.Store
	Steps chain.Steps
}

// EditJob resolves the job of an edit of kind (chain.Exclude or
// chain.Append) of job name, whose query string is raw: the job's other
// parameters are the query's, as on /epoch/… . A job the edit's kind
// does not go with is refused by the table, as its batches would be.
func (ed *Editor) EditJob(ctx context.Context, name, raw, kind string) (*EditJob, error) {
	if err := ed.checkName(name); err != nil {
		return nil, err
	}
	q, err := query.Parse(raw, query.JobParams, ed.r.cfg.Defaults, ed.r.cfg.Limits)
	if err != nil {
		return nil, err
	}
	q.Job.Name = name
	set := features.Requested(q.Job).With(kindFeature(kind))
	if err := set.Check(); err != nil {
		return nil, err
	}
	// A job whose name keeps a stored schedule reads a schedule: the
	// table's to refuse an edit of its chain, as its reads would be.
	if _, err := ed.r.book().Current(ctx, name); err == nil {
		if err := set.Without(features.Dataset).With(features.Schedule).Check(); err != nil {
			return nil, err
		}
	}
	// The chain as the store has it now: an edit made on another node
	// within chain.Refresh is the one this one follows.
	un, err := ed.r.unit(q.Job)
	if err != nil {
		return nil, err
	}
	src, err := ed.r.source(ctx, q.Job, un)
	if err != nil {
		return nil, err
	}
	if src.DS != nil {
		if _, err := ed.r.chains.Current(ctx, src.DS.Store, src.DS.Name, name); err != nil {
			return nil, err
		}
	}
	j, err := ed.r.Resolve(ctx, q, 0, -1, features.Of(kindFeature(kind)))
	if err != nil {
		return nil, err
	}
	ej := &EditJob{Job: j, Store: j.Source.DS.Store}
	if ej.Head, err = ed.r.chains.Of(ctx, ej.Store, j.Source.DS.Name, name); err != nil {
		return nil, err
	}
	// A unit that cuts its epochs at steps (a bucket job) counts an
	// edit's steps over its whole epochs, whose lengths may differ.
	var until uint64
	if c, ok := layout.As[layout.StepCutter](un); ok {
		if j.Query.Job, until, err = c.Counted(j.Query.Job); err != nil {
			return nil, err
		}
	}
	ej.Steps, err = chain.NewVaryingSteps(j.Query.Job, j.Source.Edit, func(epoch uint64) (int, error) {
		_, n, err := ed.r.cfg.Orders.Extent(j.Source, j.Query.Job, epoch)
		if epoch > 0 && errkind.Has(err, errkind.Unprocessable) {
			// A later epoch of no step (a staged job's later stage
			// whose buckets hold no step's images): the steps end
			// there, and an edit from one of the steps before is made.
			return 0, nil
		}
		return n, err
	}, until, ed.r.cfg.Limits.MaxEpoch)
	return ej, err
}

// checkName refuses a job name that is not one (400).
func (ed *Editor) checkName(name string) error {
	if err := importance.ValidJobName(name); err != nil {
		return fmt.Errorf("%w: %w", query.ErrBadRequest, err)
	}
	return nil
}

// Read is the chain of job name over the dataset its query raw names, as
// the store had it within chain.Refresh (nil if none), resolved: the
// stored edits, and the layout's chain.
func (ed *Editor) Read(ctx context.Context, name, raw string) (*chain.Link, *layout.Edit, *catalog.Dataset, error) {
	if err := ed.checkName(name); err != nil {
		return nil, nil, nil, err
	}
	q, err := query.Parse(raw, query.JobParams, ed.r.cfg.Defaults, ed.r.cfg.Limits)
	if err != nil {
		return nil, nil, nil, err
	}
	q.Job.Name = name
	j, err := ed.r.Resolve(ctx, q, 0, -1, 0)
	if err != nil {
		return nil, nil, nil, err
	}
	ds := j.Source.DS
	if ds == nil {
		return nil, nil, nil, fmt.Errorf("%w: a job's edits are kept over one dataset: give dataset=", query.ErrBadRequest)
	}
	head, err := ed.r.chains.Of(ctx, ds.Store, ds.Name, name)
	return head, j.Source.Edit, ds, err
}

// A NewEdit is an edit of a job's chain as its endpoint takes it: from
// global step FromStep, after the job's edit Previous ("" for its
// first), an exclusion's keys or an append's index version.
type NewEdit struct {
	Kind     string
	FromStep uint64
	Previous string
	Keys     []string
	Index    string
}

// Make makes e, an edit of ej's chain: its step's position in the order
// of the edits before it, refused (editproto.ServedError, naming the first
// editable step) if any member of the cluster has served it, then stored
// (chain.Book.Make, whose refusals it returns). The made edit, with the
// version the job reads after it, and the layout's chain up to it.
func (ed *Editor) Make(ctx context.Context, ej *EditJob, e NewEdit) (*chain.Link, *catalog.Dataset, *layout.Edit, error) {
	job, ds := ej.Query.Job, ej.Source.DS
	if h := ej.Head; h != nil && e.Previous == h.Version && e.FromStep < h.FromStep {
		return nil, nil, nil, fmt.Errorf("%w: job %s's edit %s applies from step %d; the next applies from that step or a later one, not from step %d",
			layout.ErrBeforePrevious, job.Name, h.Version, h.FromStep, e.FromStep)
	}
	epoch, m, ok := ej.Steps.At(e.FromStep)
	if !ok {
		return nil, nil, nil, fmt.Errorf("%w: dataset %s has no batches for batch_size=%d world=%d offset=%d drop_last=%t: no step to count from", query.ErrBadRequest, ds.Name, job.BatchSize, job.World, job.Offset, job.DropLast)
	}
	if epoch > ed.r.cfg.Limits.MaxEpoch {
		return nil, nil, nil, fmt.Errorf("%w: from_step %d is in epoch %d, past the last epoch %d", query.ErrBadRequest, e.FromStep, epoch, ed.r.cfg.Limits.MaxEpoch)
	}
	from, _, err := job.GlobalBatch(ej.Steps.Samples(epoch), m)
	if err != nil {
		return nil, nil, nil, err
	}
	var passStep *int
	un, err := ed.r.unit(job)
	if err != nil {
		return nil, nil, nil, err
	}
	if c, ok := layout.As[layout.StepCutter](un); ok {
		// A unit that cuts its epochs at steps (a bucket job): the edit
		// applies from step m of the epoch's pass; from, where the step's
		// batches start in the job's items, is what its served check
		// compares with.
		k, err := c.PassStep(ej.Source, job, epoch, uint64(m))
		if err != nil {
			return nil, nil, nil, err
		}
		passStep = &k
	}
	ext := ds
	if e.Kind == chain.Append {
		if ext, err = ed.r.cfg.Catalog.Version(ds.Name, e.Index); err == nil {
			ext, err = ed.r.view(ctx, ext, job)
		}
		if err != nil {
			return nil, nil, nil, err
		}
	}
	kind := editproto.Exclusion
	if e.Kind == chain.Append {
		kind = editproto.Append
	}
	asked, done, err := ed.unserved(ctx, kind, ds.Name, job.Name, epoch, from, e.FromStep, ej.Steps)
	if err != nil {
		return nil, nil, nil, err
	}
	defer done()
	edit := chain.Link{Kind: e.Kind, Job: job.Name, Dataset: ds.Name, Epoch: epoch, FromPosition: from, FromStep: e.FromStep,
		StepSamples: job.BatchSize * max(job.World, 1), PassStep: passStep, Keys: e.Keys, Previous: e.Previous}
	if !asked.IsZero() && time.Since(asked) > editproto.Hold/2 {
		// The members' holds may have ended by the time the edit is
		// stored: they may be laying out later positions without it.
		return nil, nil, nil, fmt.Errorf("%w: the edit of job %s took over %s after the members were asked; it is not made: retry", jobsched.ErrUnasked, job.Name, editproto.Hold/2)
	}
	made, x, err := ed.r.chains.Make(ctx, ej.Store, ds, ext, ej.Head, edit, ej.Steps.After)
	if err != nil {
		return nil, nil, nil, err
	}
	ed.r.cfg.Orders.Edits().Add(x)
	return made, ext, x, nil
}

// unserved refuses an edit of kind of job over dataset from position
// from of epoch (global step step) if any member of the cluster has
// served it — this node (its own positions, checked again as the edit
// is stored), and every other member, asked at once, each holding the
// job's positions from the edit's on while it is made — naming the step
// after the furthest position any of them served. It returns when the
// others were asked (zero on a single gateway), and done, to call once
// the edit is made or refused: it releases their holds.
func (ed *Editor) unserved(ctx context.Context, kind editproto.Subject, dataset, job string, epoch uint64, from int, step uint64, steps chain.Steps) (asked time.Time, done func(), err error) {
	type served struct {
		epoch uint64
		end   int
		who   string
	}
	var furthest *served
	past := func(e uint64, end int, who string) {
		if (e > epoch || e == epoch && end > from) && (furthest == nil || e > furthest.epoch || e == furthest.epoch && end > furthest.end) {
			furthest = &served{e, end, who}
		}
	}
	if e, end, ok := ed.r.served.Last(dataset, job); ok {
		past(e, end, "this node")
	}
	done = func() {}
	if ed.r.cfg.Others != nil {
		// Asked even where this node has served past the edit: the
		// refusal names the step after the furthest any member served,
		// from which an edit is not refused again.
		asked = time.Now()
		var as []Answer
		as, done, err = ed.ask(ctx, Question{Job: job, Step: step, Dataset: dataset, Epoch: epoch, Pos: from})
		if err != nil {
			done() // those that answered hold
			return time.Time{}, nil, err
		}
		for _, a := range as {
			if a.PosServed {
				past(a.Epoch, a.End, "member "+a.Node)
			}
		}
	}
	if furthest != nil {
		done()
		next := steps.After(furthest.epoch, furthest.end)
		return time.Time{}, nil, editproto.NewServedError(kind, next, fmt.Errorf("%w: %s has served job %s up to position %d of epoch %d; an %s starts after it (from step %d or later), not at step %d",
			chain.ErrConflict, furthest.who, job, furthest.end, furthest.epoch, kind, next, step))
	}
	return asked, done, nil
}

// CheckScheduleEdit refuses an edit of job name's stored schedule where
// the job keeps a chain of exclusions or appends over a dataset served
// here: a schedule's job reads each component's order, which a chain
// over one dataset does not apply to (the table's refusal, as its reads
// would be refused).
func (ed *Editor) CheckScheduleEdit(ctx context.Context, name string) error {
	for _, n := range ed.r.cfg.Catalog.Names() {
		ds, err := ed.r.cfg.Catalog.Get(n)
		if err != nil || ds.Store == nil {
			continue
		}
		head, err := ed.r.chains.Of(ctx, ds.Store, ds.Name, name)
		if err != nil {
			return err
		}
		for _, e := range head.Chain() {
			if err := features.Of(features.Schedule, kindFeature(e.Kind)).Check(); err != nil {
				return err
			}
		}
	}
	return nil
}
