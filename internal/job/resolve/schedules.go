package resolve

import (
	"context"
	"fmt"
	"sync"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/job/jobsched"
	"github.com/brandgw/brand/internal/job/query"
)

// schedules is the book of named jobs' stored schedules, made on first
// use over the stores of the datasets the catalog serves, with this
// node's name (its URL in a cluster).
type schedules struct {
	node string
	once sync.Once
	book *jobsched.Book
}

// book is the book of the jobs' stored schedules.
func (r *Resolver) book() *jobsched.Book {
	r.scheds.once.Do(func() {
		r.scheds.book = jobsched.New(func() ([]string, map[string]jobsched.Store) {
			names := r.cfg.Catalog.Names()
			stores := make(map[string]jobsched.Store, len(names))
			for _, n := range names {
				if ds, err := r.cfg.Catalog.Get(n); err == nil {
					stores[n] = ds.Store
				}
			}
			return names, stores
		}, r.scheds.node)
	})
	return r.scheds.book
}

// Schedules is the book of the jobs' stored schedules.
func (ed *Editor) Schedules() *jobsched.Book { return ed.r.book() }

// EditSchedule makes an edit of job's stored schedule from step from,
// or with next from the first step not yet read (jobsched.Book.Edit,
// EditNext), asking every other member what it has served with the
// question every edit asks (Question), and releasing the holds they
// promised once the edit is made or refused. This node's latest step is
// the book's own, checked under the edit's lock. A schedule naming a
// dataset not served here is refused, as every request of it would be.
func (ed *Editor) EditSchedule(ctx context.Context, job, text string, stages api.BucketStages, from uint64, next bool, base string) (*jobsched.Version, error) {
	check := func(s api.Schedule) error {
		for _, name := range s.Datasets() {
			if _, err := ed.r.Version(api.Job{Dataset: name}); err != nil {
				return err
			}
		}
		return nil
	}
	release := func() {}
	defer func() { release() }()
	others := ed.scheduleOthers(&release)
	if next {
		return ed.r.book().EditNextStages(ctx, job, text, stages, base, others, check)
	}
	return ed.r.book().EditStages(ctx, job, text, stages, from, base, others, check)
}

// stored resolves job's stored schedule (job.ScheduleVersion) for the
// steps a request reads — epoch's first, or with batch >= 0 that batch's
// global batch — into job.Schedule, job.Mix and the version, and
// records a batch's steps as served.
func (r *Resolver) stored(ctx context.Context, job *api.Job, epoch uint64, batch int64) error {
	book := r.book()
	cur, err := book.Current(ctx, job.Name)
	if err == nil {
		err = nonEmpty(cur)
	}
	if err != nil {
		return err
	}
	// Every version reads the same datasets, so an epoch's length, and
	// so its steps, are the same under each: the mixture's of the
	// current version's. A token job's epoch is its sources' packed
	// sequences, which their windows (the job's split by the first
	// phase's weights) decide: the same under every version that keeps
	// the first phase, as an edit from a step after 0 does.
	samples := job.MixSamples
	if samples == 0 {
		tj := *job
		tj.Schedule, tj.Mix, tj.Dataset, tj.Offset = cur.Parsed(), cur.Parsed()[0].Mix, "", 0
		if err := withStages(&tj, cur); err != nil {
			return err
		}
		un, err := r.unit(tj)
		if err != nil {
			return err
		}
		src, err := r.data(ctx, tj, un)
		if err != nil {
			return err
		}
		if _, samples, err = r.cfg.Orders.Extent(src, tj, 0); err != nil {
			return err
		}
	}
	k := uint64(max(job.Block(), 1))
	steps := max((uint64(samples)+k-1)/k, 1) // L/K
	first, last := epoch*steps, epoch*steps
	if batch >= 0 {
		g := uint64(job.BatchSize * max(job.World, 1))
		start := uint64(job.Offset) + uint64(batch)*g
		if end := min(steps*k, start+g); start < end {
			first, last = epoch*steps+start/k, epoch*steps+(end-1)/k
		}
	}
	// A batch's steps are recorded served as its version is resolved,
	// before it is laid out: an edit from them is refused from now on.
	v, err := book.For(ctx, job.Name, job.ScheduleVersion, first, last, batch >= 0)
	if err == nil {
		err = nonEmpty(v)
	}
	if err != nil {
		return err
	}
	job.Schedule, job.Mix, job.ScheduleVersion, job.Dataset = v.Parsed(), v.Parsed()[0].Mix, v.Version, ""
	return withStages(job, v)
}

// withStages gives job the bucket stages version v stores, where the job
// reads them (buckets=stored, budget=stored), and the clip parameters
// their clip buckets make, as the parser derives a request's.
func withStages(job *api.Job, v *jobsched.Version) error {
	if !job.Buckets.FromStore() {
		return nil
	}
	b, err := job.Buckets.WithStored(v.BucketStages)
	if err != nil {
		return fmt.Errorf("%w: job %s's schedule version %s: %w", query.ErrBadRequest, v.Job, v.Version, err)
	}
	job.Buckets = b
	c, ok, err := b.ClipOf(job.Clip)
	if err != nil {
		return fmt.Errorf("%w: %w", query.ErrBadRequest, err)
	}
	if ok {
		job.Clip = c
	}
	return nil
}

// nonEmpty refuses a stored schedule version of no phase, which a release
// that took an empty schedule may have stored (jobsched.Book refuses one
// now): it reads no dataset, and its name cannot be given a first
// schedule again.
func nonEmpty(v *jobsched.Version) error {
	if len(v.Parsed()) > 0 {
		return nil
	}
	return fmt.Errorf("%w: job %s's schedule version %s is empty (stored by a release that took an empty schedule): name the job anew", jobsched.ErrConflict, v.Job, v.Version)
}
