package logbuffer_test

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/internal/server/logbuffer"
)

// recorder records each write it is given.
type recorder struct {
	mu     sync.Mutex
	writes []string
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes = append(r.writes, string(p))
	return len(p), nil
}

func (r *recorder) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.writes...)
}

// Lines below warn are held and written together within Every; a warning
// goes out at once, after the lines held before it.
func TestHoldsInfoWritesWarnAtOnce(t *testing.T) {
	var r recorder
	b := logbuffer.New(&r)
	log := zerolog.New(b)
	log.Info().Msg("one")
	log.Debug().Msg("two")
	if w := r.all(); len(w) != 0 {
		t.Fatalf("info and debug lines written at once: %q", w)
	}
	log.Warn().Msg("three")
	w := r.all()
	if len(w) != 2 || !strings.Contains(w[0], "one") || !strings.Contains(w[0], "two") || !strings.Contains(w[1], "three") {
		t.Fatalf("writes %q, want the held lines in one, then the warning", w)
	}
	log.Info().Msg("four")
	deadline := time.Now().Add(10 * time.Second)
	for len(r.all()) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("a held line not written within 10 s (Every is %v)", logbuffer.Every)
		}
		time.Sleep(logbuffer.Every / 10)
	}
	if w := r.all(); !strings.Contains(w[2], "four") {
		t.Fatalf("writes %q", w)
	}
}

// Size bytes held are written at once; Close writes the rest, and every
// line after it goes out as it comes.
func TestSizeAndClose(t *testing.T) {
	var r recorder
	b := logbuffer.New(&r)
	line := bytes.Repeat([]byte("x"), 1000)
	var n int
	for n < logbuffer.Size {
		if _, err := b.WriteLevel(zerolog.InfoLevel, line); err != nil {
			t.Fatal(err)
		}
		n += len(line)
	}
	if w := r.all(); len(w) != 1 || len(w[0]) != n {
		t.Fatalf("%d writes after %d bytes held, want one of them all", len(w), n)
	}
	if _, err := b.WriteLevel(zerolog.InfoLevel, []byte("held\n")); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteLevel(zerolog.InfoLevel, []byte("after\n")); err != nil {
		t.Fatal(err)
	}
	if w := r.all(); len(w) != 3 || w[1] != "held\n" || w[2] != "after\n" {
		t.Fatalf("writes after Close %q", w[1:])
	}
}

// A line without a level (zerolog's Log, a console writer above) is
// written at once.
func TestNoLevelAtOnce(t *testing.T) {
	var r recorder
	b := logbuffer.New(&r)
	if _, err := b.Write([]byte("plain\n")); err != nil {
		t.Fatal(err)
	}
	if w := r.all(); len(w) != 1 {
		t.Fatalf("writes %q", w)
	}
}
