package editproto

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/brandgw/brand/s3backend"
)

// Store is what a chain needs of a dataset's store (s3backend.Store).
type Store interface {
	Stat(ctx context.Context, key string) (s3backend.ObjectInfo, error)
	ReadRange(ctx context.Context, key, etag string, off int64, p []byte) error
	Put(ctx context.Context, key string, r io.Reader, size int64) (s3backend.ObjectInfo, error)
	PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (s3backend.ObjectInfo, error)
}

// Versions is where the versions of one subject of edit of named jobs
// are kept: in the store of the dataset the job reads, where every node
// and a restarted one find them, under _brand/jobs/JOB/DIR/:
//
//	VERSION       a version: its body (the kind's JSON); VERSION is a
//	              digest of its content, so a retry makes the same name
//	root          the first version's name, created once (PutIfAbsent):
//	              of two first versions made at once, on one node or
//	              two, one wins, and the other is refused naming it (a
//	              retry of the same version is told the version it made)
//	VERSION.next  its successor's name, created once (PutIfAbsent): of
//	              two extensions of one version, one wins
//
// A version is fixed once made; the job's current version is the last of
// the chain from root.
type Versions struct {
	Subject Subject
	// Dir is the folder under the job's ("exclude"); What names a version
	// in errors ("exclusion list").
	Dir, What string
	// Max bounds the versions (1: a job has one); Limit a version's body.
	Max   int
	Limit int64
	// Conflict (409) and Unknown (404, a job without a version) are the
	// kind's sentinels, which its errors wrap.
	Conflict, Unknown error
}

// A Version is a version of an edit being made.
type Version struct {
	Job, Dataset string
	// Version names it; Previous the version it extends ("" for the
	// first).
	Version, Previous string
	// Epoch and From are the position it applies from, the first
	// position of step FromStep.
	Epoch    uint64
	From     int
	FromStep uint64
	// Body is what is stored under Version.
	Body []byte
}

// Prefix is the folder of job's versions.
func (c Versions) Prefix(job string) string { return "_brand/jobs/" + job + "/" + c.Dir + "/" }

// Make stores v as the version of job v.Job's chain after v.Previous,
// and reports whether it was made already (done: a retry, answered with
// the version it made, even after the job was served past its step). It
// refuses v from a position pos says this node has served (a
// *ServedError naming the step stepOf gives of the position served), a
// first version of a job that has one or an extension of a version that
// is not the current one (a *ConflictError naming the current version),
// and an extension of a job without a version (Unknown). Requests are
// held off (pos.Hold) only while the small objects are written: the
// version's body is stored before.
func (c Versions) Make(ctx context.Context, st Store, pos *Positions, v Version, stepOf func(epoch uint64, end int) uint64) (done bool, err error) {
	if done, err := c.existing(ctx, st, v); done || err != nil {
		return done, err
	}
	if err := c.unserved(pos, v, stepOf); err != nil {
		return false, err
	}
	pre := c.Prefix(v.Job)
	if _, err := st.Put(ctx, pre+v.Version, bytes.NewReader(v.Body), int64(len(v.Body))); err != nil {
		return false, fmt.Errorf("storing job %s's %s: %w", v.Job, c.What, err)
	}
	defer pos.making()()
	if done, err := c.existing(ctx, st, v); done || err != nil {
		return done, err
	}
	if err := c.unserved(pos, v, stepOf); err != nil {
		return false, err
	}
	link := pre + "root"
	if v.Previous != "" {
		link = pre + v.Previous + ".next"
	}
	_, err = st.PutIfAbsent(ctx, link, strings.NewReader(v.Version), int64(len(v.Version)))
	if !errors.Is(err, s3backend.ErrExists) {
		if err != nil {
			return false, fmt.Errorf("storing job %s's %s: %w", v.Job, c.What, err)
		}
		return false, nil
	}
	vs, err := c.Versions(ctx, st, v.Job)
	switch {
	case err == nil && slices.Contains(vs, v.Version):
		return true, nil
	case err == nil && len(vs) > 0:
		cur := vs[len(vs)-1]
		return false, conflictf(c.Subject, cur, c.Conflict, "another version of job %s's %s was made at the same time: version %s", v.Job, c.What, cur)
	}
	return false, fmt.Errorf("%w: another version of job %s's %s was made at the same time", c.Conflict, v.Job, c.What)
}

// existing reports whether job v.Job has version v already (done), or
// refuses v: a first version of a job that has one, an extension of a
// version that is not the current one, or of a job without a version.
func (c Versions) existing(ctx context.Context, st Store, v Version) (done bool, err error) {
	vs, err := c.Versions(ctx, st, v.Job)
	switch {
	case err != nil:
		return false, err
	case len(vs) == 0 && v.Previous != "":
		return false, fmt.Errorf("%w: job %s has no %s to extend (previous %s)", c.Unknown, v.Job, c.What, v.Previous)
	case len(vs) == 0:
		return false, nil
	case slices.Contains(vs, v.Version):
		return true, nil
	}
	cur := vs[len(vs)-1]
	switch {
	case v.Previous == "" && c.Max == 1:
		return false, conflictf(c.Subject, cur, c.Conflict, "job %s has an %s, version %s; a job has one", v.Job, c.What, cur)
	case v.Previous == "":
		return false, conflictf(c.Subject, cur, c.Conflict, "job %s has an %s, version %s; extend it with previous %q", v.Job, c.What, cur, cur)
	case cur != v.Previous:
		return false, conflictf(c.Subject, cur, c.Conflict, "job %s's %s is at version %s, not %s: extend the current version", v.Job, c.What, cur, v.Previous)
	}
	return false, nil
}

// unserved refuses v if pos says this node has served job v.Job at or
// past v's first position.
func (c Versions) unserved(pos *Positions, v Version, stepOf func(epoch uint64, end int) uint64) error {
	epoch, end, ok := pos.Last(v.Dataset, v.Job)
	if !ok || v.Epoch > epoch || (v.Epoch == epoch && v.From >= end) {
		return nil
	}
	next := stepOf(epoch, end)
	return NewServedError(c.Subject, next, fmt.Errorf("%w: this node has served job %s up to position %d of epoch %d; an %s starts after it (from step %d or later), not at step %d",
		c.Conflict, v.Job, end, epoch, c.Subject, next, v.FromStep))
}

// Versions are the names of job's versions, first first (none if it has
// none): root, and each version's successor in turn.
func (c Versions) Versions(ctx context.Context, st Store, job string) ([]string, error) {
	var vs []string
	key := c.Prefix(job) + "root"
	for {
		v, err := ReadObject(ctx, st, key, 64)
		if errors.Is(err, s3backend.ErrNotFound) {
			return vs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading job %s's %s: %w", job, c.What, err)
		}
		if vs = append(vs, string(v)); len(vs) > c.Max {
			return nil, fmt.Errorf("job %s's %s has more than %d versions: damaged in the store", job, c.What, c.Max)
		}
		key = c.Prefix(job) + string(v) + ".next"
	}
}

// Read reads job's versions from the first to the current one, handing
// each to decode with the version it extends; decode refuses a damaged
// one. A job without a version is Unknown.
func (c Versions) Read(ctx context.Context, st Store, job string, decode func(version, previous string, body []byte) error) error {
	pre := c.Prefix(job)
	v, err := ReadObject(ctx, st, pre+"root", 64)
	if errors.Is(err, s3backend.ErrNotFound) {
		return fmt.Errorf("%w: job %s has no %s (POST /jobs/%s/%s makes one)", c.Unknown, job, c.What, job, c.Dir)
	}
	if err != nil {
		return fmt.Errorf("reading job %s's %s: %w", job, c.What, err)
	}
	prev := ""
	for n := 1; ; n++ {
		body, err := ReadObject(ctx, st, pre+string(v), c.Limit)
		if err != nil {
			return fmt.Errorf("reading job %s's %s %s: %w", job, c.What, v, err)
		}
		if err := decode(string(v), prev, body); err != nil {
			return fmt.Errorf("job %s's %s %s is damaged in the store (%v)", job, c.What, v, err)
		}
		if n > c.Max {
			return fmt.Errorf("job %s's %s has more than %d versions: damaged in the store", job, c.What, c.Max)
		}
		prev = string(v)
		v, err = ReadObject(ctx, st, pre+prev+".next", 64)
		if errors.Is(err, s3backend.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading job %s's %s after %s: %w", job, c.What, prev, err)
		}
	}
}

// Extended reports whether the store holds a successor of job's version:
// false too when the store does not answer, so that a node serves the
// version it knows on through an outage.
func (c Versions) Extended(ctx context.Context, st Store, job, version string) bool {
	_, err := st.Stat(ctx, c.Prefix(job)+version+".next")
	return err == nil
}

// Reader is what ReadObject needs of a store.
type Reader interface {
	Stat(ctx context.Context, key string) (s3backend.ObjectInfo, error)
	ReadRange(ctx context.Context, key, etag string, off int64, p []byte) error
}

// ReadObject reads the object key of st, of at most limit bytes.
func ReadObject(ctx context.Context, st Reader, key string, limit int64) ([]byte, error) {
	info, err := st.Stat(ctx, key)
	if err != nil {
		return nil, err
	}
	if info.Size > limit {
		return nil, fmt.Errorf("%s holds %d bytes; at most %d", key, info.Size, limit)
	}
	p := make([]byte, info.Size)
	if err := st.ReadRange(ctx, key, info.ETag, 0, p); err != nil {
		return nil, err
	}
	return p, nil
}
