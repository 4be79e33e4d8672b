package transform

import (
	"math"
	"runtime"
	"sync/atomic"
	"time"
)

// cpuTimer measures the thread CPU time of one Apply. The goroutine is
// locked to its thread for the call, so the thread's clock is the
// goroutine's: without the lock the scheduler could move it mid-image and
// the difference would mix two threads' clocks. Locking costs tens of
// nanoseconds; an image costs milliseconds.
type cpuTimer struct {
	start time.Duration
	wall  time.Time
}

func startCPU() cpuTimer {
	runtime.LockOSThread()
	t, ok := threadCPU()
	if !ok {
		return cpuTimer{start: -1, wall: time.Now()}
	}
	return cpuTimer{start: t}
}

// stop returns the CPU time since start; the caller then unlocks the
// thread (deferred, so that a panic does not leave it locked).
func (c cpuTimer) stop() time.Duration {
	if c.start < 0 {
		return time.Since(c.wall)
	}
	t, _ := threadCPU()
	return t - c.start
}

// Meter accumulates a pipeline's figures on a server: images applied,
// failures, CPU. Its methods are safe for concurrent use; the zero value
// is ready.
type Meter struct {
	images, failed atomic.Uint64
	cpuNanos       atomic.Int64
}

// Add records one Apply's result and error.
func (m *Meter) Add(r Result, err error) {
	m.cpuNanos.Add(int64(r.CPU))
	if err != nil {
		m.failed.Add(1)
		return
	}
	m.images.Add(1)
}

// MeterStats is a Meter's figures at one moment.
type MeterStats struct {
	Images, Failed uint64
	// CPU is the thread CPU time of every Apply, failed ones included.
	CPU time.Duration
}

// Stats returns the figures so far.
func (m *Meter) Stats() MeterStats {
	return MeterStats{Images: m.images.Load(), Failed: m.failed.Load(), CPU: time.Duration(m.cpuNanos.Load())}
}

// PerImage is the mean CPU per image applied (failures' CPU counted
// against the images that succeeded: it was spent all the same); 0 before
// the first image.
func (s MeterStats) PerImage() time.Duration {
	if s.Images == 0 {
		return 0
	}
	return s.CPU / time.Duration(s.Images)
}

// ImagesPerCoreSecond is how many images one core transforms a second at
// this cost; 0 before the first image.
func (s MeterStats) ImagesPerCoreSecond() float64 {
	if s.CPU <= 0 || s.Images == 0 {
		return 0
	}
	return float64(s.Images) / s.CPU.Seconds()
}

// CoresFor returns the cores a node needs to transform imagesPerSecond
// images a second with a pipeline whose measured cost is perImage of CPU
// each: their product, a fraction (a planner rounds up and adds the
// headroom it wants). A non-positive rate or cost needs no core.
func CoresFor(imagesPerSecond float64, perImage time.Duration) float64 {
	if imagesPerSecond <= 0 || perImage <= 0 || math.IsNaN(imagesPerSecond) {
		return 0
	}
	return imagesPerSecond * perImage.Seconds()
}

// ThreadCPU runs f with the goroutine locked to its thread and returns
// the thread CPU time f took (wall time where the platform has no thread
// clock): how the transform stage measures a video decode, whose work is
// in C on that thread.
func ThreadCPU(f func()) time.Duration {
	t := startCPU()
	defer runtime.UnlockOSThread()
	f()
	return t.stop()
}
