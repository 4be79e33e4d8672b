// Package logbuffer gathers a process's log lines into fewer writes.
//
// A node logs a line for every request it serves; written as it comes,
// each line is a system call of its own, as many as the responses' own
// writes when clients ask for small batches over a warm cache. A Writer
// holds the lines of level info and below for at most Every, or until
// they reach Size bytes, and writes them in one write, as nginx's
// access_log buffer= and flush= do. A line of level warn and above, or
// one without a level, goes out at once, after the lines held before it:
// the order of the lines is the order they were logged in.
//
// # Costs
//
// A line held costs a copy into the buffer. A process that dies without
// Close (a kill, a crash) loses the lines of its last Every at most,
// none of them a warning or an error.
//
// # Concurrency
//
// A Writer is safe for concurrent use; its timer writes the lines held
// from a goroutine of its own, never two writes at once.
package logbuffer

import (
	"io"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Bounds of what a Writer holds.
const (
	Every = 100 * time.Millisecond // the longest a line is held
	Size  = 64 << 10               // bytes held that are written at once
)

// Writer is a zerolog.LevelWriter that holds lines below warn (see the
// package doc).
type Writer struct {
	mu     sync.Mutex
	w      io.Writer
	buf    []byte
	timer  *time.Timer // armed while buf holds lines
	armed  bool
	closed bool
}

// New returns a Writer to w.
func New(w io.Writer) *Writer { return &Writer{w: w} }

// Write writes p at once: a line without a level.
func (b *Writer) Write(p []byte) (int, error) { return b.WriteLevel(zerolog.NoLevel, p) }

// WriteLevel holds p, a line of level l, if l is below warn, and writes
// it at once otherwise.
func (b *Writer) WriteLevel(l zerolog.Level, p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || l >= zerolog.WarnLevel {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
		return b.w.Write(p)
	}
	b.buf = append(b.buf, p...)
	if len(b.buf) >= Size {
		return len(p), b.flushLocked()
	}
	if !b.armed {
		b.armed = true
		if b.timer == nil {
			b.timer = time.AfterFunc(Every, b.flushHeld)
		} else {
			b.timer.Reset(Every)
		}
	}
	return len(p), nil
}

// flushHeld writes the lines held; the timer calls it. Its error has no
// caller to go to and is dropped: a log that cannot be written has
// nowhere else to say so.
func (b *Writer) flushHeld() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.armed = false
	_ = b.flushLocked()
}

func (b *Writer) flushLocked() error {
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.w.Write(b.buf)
	b.buf = b.buf[:0]
	if cap(b.buf) > 2*Size { // a burst of long lines: keep no more than a buffer's worth
		b.buf = nil
	}
	return err
}

// Close writes the lines held; every later line is written at once.
func (b *Writer) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	if b.timer != nil {
		b.timer.Stop()
		b.armed = false
	}
	return b.flushLocked()
}
