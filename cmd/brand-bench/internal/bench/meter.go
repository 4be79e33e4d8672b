package bench

import (
	"io"
	"slices"
	"sync/atomic"
	"time"
)

// meter measures what a consuming training loop sees: samples and bytes
// delivered, elapsed time, and how long the loop waited for each batch.
// Sources that deliver samples one at a time are cut into batches of
// batchSize samples, so every configuration's batch latency means the same
// thing. A meter is used by one goroutine, the consumer.
type meter struct {
	batchSize int
	start     time.Time
	last      time.Time // when the previous batch was complete
	inBatch   int
	samples   int64
	waits     []time.Duration
}

func newMeter(batchSize int) *meter {
	now := time.Now()
	return &meter{batchSize: batchSize, start: now, last: now}
}

// samplesArrived records n samples handed to the consumer.
func (m *meter) samplesArrived(n int) {
	m.samples += int64(n)
	m.inBatch += n
	for m.inBatch >= m.batchSize {
		m.inBatch -= m.batchSize
		m.batchDone(time.Now())
	}
}

// batchArrived records a whole batch of n samples handed to the consumer.
func (m *meter) batchArrived(n int) {
	m.samples += int64(n)
	m.batchDone(time.Now())
}

func (m *meter) batchDone(now time.Time) {
	m.waits = append(m.waits, now.Sub(m.last))
	m.last = now
}

// stop ends the measurement: a final partial batch counts as a batch.
func (m *meter) stop() (elapsed time.Duration) {
	now := time.Now()
	if m.inBatch > 0 {
		m.inBatch = 0
		m.batchDone(now)
	}
	return now.Sub(m.start)
}

// percentile returns the p-th percentile (0 < p <= 100) of ds by the
// nearest-rank method, or 0 for none.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(p/100*float64(len(s)) + 0.999999)
	return s[min(max(rank, 1), len(s))-1]
}

// countingReader counts the bytes read through it into a shared counter.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// countingBody is a countingReader that closes.
type countingBody struct {
	countingReader
	c io.Closer
}

func (b countingBody) Close() error { return b.c.Close() }

// readFull reads r to EOF into a buffer of the expected size (-1 if
// unknown), growing it if the body is longer, and returns the bytes.
// Reading to EOF (not just size bytes) lets the HTTP transport reuse the
// connection.
func readFull(r io.Reader, size int64) ([]byte, error) {
	return readInto(r, make([]byte, 0, max(size, 0)+1))
}

// readInto is readFull into buf, an empty buffer whose capacity is the
// expected size plus one.
func readInto(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, max(len(buf), 64<<10))
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
