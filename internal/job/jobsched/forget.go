package jobsched

import (
	"slices"
	"time"
)

// What a Book keeps of a job in memory — its versions read, its current
// version, where its chain is, the steps this node served and reserved,
// the holds it promised — is bounded by the jobs it keeps: past maxJobs,
// the jobs unused for longest, and unused for at least forgetIdle, are
// forgotten. Nothing is lost with them: the versions, the chain and this
// node's reservation are in the store, read again on the job's next use
// as after a restart, and a reservation covers every step this node
// served (it is written before the step is), so an edit is never made
// from a step served. A hold (Answer) is never forgotten before it ends.

// maxJobs bounds the jobs a Book keeps in memory.
const maxJobs = 1024

// forgetIdle is how long a job is unused before it may be forgotten:
// longer than any request of it takes, a hold included.
const forgetIdle = time.Minute

// use records that job is used now and, if the Book keeps more than
// b.keep jobs (maxJobs), forgets those unused for longest — down to half
// of it, so that the work is done once per b.keep/2 new jobs.
func (b *Book) use(job string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	b.used[job] = now
	if len(b.used) <= b.keep {
		return
	}
	idle := make([]string, 0, len(b.used))
	for j, at := range b.used {
		if now.Sub(at) >= forgetIdle && !b.holds.Holding(j, now) {
			idle = append(idle, j)
		}
	}
	slices.SortFunc(idle, func(x, y string) int { return b.used[x].Compare(b.used[y]) })
	for _, j := range idle[:min(len(idle), len(b.used)-b.keep/2)] {
		b.forgetJobLocked(j)
	}
}

// forgetJobLocked drops what the Book keeps of job; b.mu held.
func (b *Book) forgetJobLocked(job string) {
	delete(b.used, job)
	delete(b.versions, job)
	delete(b.current, job)
	delete(b.where, job)
	delete(b.latest, job)
	delete(b.confirmed, job)
	delete(b.floor, job)
	delete(b.reserved, job)
	b.holds.Forget(job)
}

// Jobs is how many jobs the Book keeps in memory.
func (b *Book) Jobs() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.used)
}
