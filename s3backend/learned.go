package s3backend

import "time"

// What a Pacer with no GET budget learns from the store's throttling.
//
// A throttled answer says the store refuses some GETs now; it does not
// say how many it takes. When the store refuses a share of the GETs (a
// tenth or more of those of the last second or two, at least
// minLimiting of them), the GETs it answered over the last second are
// the rate it takes, and that stands for a budget. A refusal now and then
// says nothing of the rate (S3 answers an odd 503 below its limit; the
// fault suite's proxy refuses one chunk GET in 18 at any rate): learning
// a bound from it would hold the node down for a minute at a time, and
// the store client's retry takes it (four refusals in a row at one in 18
// are one read in 100,000). Once a rate above the floor is learned, every
// refusal cuts it, as a budget's: the store took less than it taught
// (TestStoreBudget's store at 53 GETs a second, refusing under a tenth of
// them uncut, passed 3 errors on to plain ranks).
//
// A store that fails (5xx other than 503, no answer at all) as often as
// it answers is down or partly down, not at a rate limit: the fault
// suite's proxy answered 502 while MinIO restarted, refusing one GET in 18
// all the same, and the rate the store answered at before it went down
// was taken for its limit, the node held under it after the restart. Its
// refusals then teach the floor alone.
//
// When the store refuses a share in an outage (every GET refused: a store
// restarting answers 503 to all of them) or after a lull, it answered
// next to nothing lately, and the lesson would be next to nothing too:
// the fault suite's MinIO restart taught one GET a second, and the reads
// after it waited seconds for each GET. So no learned bound, and no cut
// of one, holds a node under the larger of
//
//   - MinLearnedGETs, and
//   - floorOfPeak of the most GETs the store answered in one second over
//     the last one to two minutes: a store that took that many a moment
//     ago and now refuses everything is down, not at a limit a quarter of
//     what it took; a limit that did fall fourfold (other clients came)
//     is still met at a quarter of the rate, the rest absorbed by the
//     store client's retries, as with no pacer.
//
// Under the floor the pacer no longer paces: a store whose limit is lower
// throttles, and its client retries, as it did before the pacer learned.
// A bound at its floor learned nothing but that the store refused (the
// rate it answered at was lower still): it holds the node there while the
// store refuses, and is lifted a second after its last cut, so a store
// back from an outage is read at once as before it, not at the floor for
// a minute (the fault suite's MinIO restart left its reads at 15 GETs a
// second of 50 until the suite's end, 28–41 s of two epochs instead of
// 9–17).
const (
	// MinLearnedGETs is the least rate, GETs a second, a bound learned
	// from the store's throttling holds a node to: the index and chunk
	// tables a node reads before it is ready, and a trainer's batches of
	// a few parts each, keep moving through an outage's lesson, while a
	// store that takes fewer from a node (a per-user limit of a few
	// hundred a minute) is best given a budget (--store-gets-per-sec).
	MinLearnedGETs = 10
	// floorOfPeak is the part of the most GETs the store answered in a
	// second lately that a learned bound never goes under.
	floorOfPeak = 1.0 / 4
	// limitingShare and minLimiting: the refusals of the last second or
	// two that say the store is at a limit, a share of its answers and a
	// count.
	limitingShare = 1.0 / 10
	minLimiting   = 5
)

// answered counts the GETs and HEADs a store answered (failed ones not)
// and those it refused, by second, and keeps the most answered in any
// second over this minute and the last. The zero value is ready; it is
// used under the pacer's lock.
type answered struct {
	second            time.Time  // the start of the current second
	now, last         float64    // GETs answered in the current second and the one before
	refNow, refLast   float64    // and refused (503, 429)
	failNow, failLast float64    // and failed (other 5xx, no answer)
	minute            time.Time  // the start of the current minute
	peaks             [2]float64 // the most of a second, this minute and the one before
}

// add counts an answer at at.
func (a *answered) add(at time.Time) {
	a.roll(at)
	a.now++
}

// refuse counts a throttled answer at at.
func (a *answered) refuse(at time.Time) {
	a.roll(at)
	a.refNow++
}

// fail counts a failed GET at at.
func (a *answered) fail(at time.Time) {
	a.roll(at)
	a.failNow++
}

// down says whether the store failed as many GETs of the last second or
// two as it answered.
func (a *answered) down(at time.Time) bool {
	a.roll(at)
	failed := a.failNow + a.failLast
	return failed > 0 && failed >= a.now+a.last
}

// limiting says whether the store refuses enough of the GETs of the last
// second or two to be at a limit.
func (a *answered) limiting(at time.Time) bool {
	a.roll(at)
	refused := a.refNow + a.refLast
	return refused >= minLimiting && refused >= limitingShare*(refused+a.now+a.last)
}

// rate is the GETs a second the store answered lately: the last whole
// second's, or the current one's if more.
func (a *answered) rate(at time.Time) float64 {
	a.roll(at)
	return max(a.last, a.now)
}

// floor is the least rate a learned bound holds a node to at at.
func (a *answered) floor(at time.Time) float64 {
	a.roll(at)
	return max(MinLearnedGETs, floorOfPeak*max(a.peaks[0], a.peaks[1], a.now))
}

// roll moves the counts on to the second and the minute at is in, a
// second that ended going into its minute's most.
func (a *answered) roll(at time.Time) {
	switch d := at.Sub(a.second); {
	case d >= 2*time.Second:
		a.keep(a.second.Add(time.Second), a.now)
		a.now, a.last, a.refNow, a.refLast, a.failNow, a.failLast, a.second = 0, 0, 0, 0, 0, 0, at
	case d >= time.Second:
		a.keep(a.second.Add(time.Second), a.now)
		a.now, a.last, a.refNow, a.refLast, a.second = 0, a.now, 0, a.refNow, a.second.Add(time.Second)
		a.failNow, a.failLast = 0, a.failNow
	}
	a.rollMinute(at)
}

// keep notes a whole second of n answers that ended at end.
func (a *answered) keep(end time.Time, n float64) {
	a.rollMinute(end)
	a.peaks[0] = max(a.peaks[0], n)
}

// rollMinute moves the most of a second on to the minute at is in.
func (a *answered) rollMinute(at time.Time) {
	switch d := at.Sub(a.minute); {
	case d >= 2*time.Minute:
		a.peaks, a.minute = [2]float64{}, at
	case d >= time.Minute:
		a.peaks, a.minute = [2]float64{0, a.peaks[0]}, a.minute.Add(time.Minute)
	}
}
