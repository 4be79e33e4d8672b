package s3test_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/testsupport/s3test"
	"github.com/brandgw/brand/s3backend"
)

// TestConformance holds Memory to s3backend.Local's semantics: each step
// runs on a Memory and on a Local over a temporary directory, and must
// answer alike on both.
func TestConformance(t *testing.T) {
	local, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	stores := map[string]s3backend.Store{"memory": s3test.NewMemory(), "local": local}
	ctx := context.Background()
	put := func(st s3backend.Store, key, data string) s3backend.ObjectInfo {
		t.Helper()
		info, err := st.Put(ctx, key, strings.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	read := func(st s3backend.Store, key, etag string, off int64, n int) (string, error) {
		p := make([]byte, n)
		err := st.ReadRange(ctx, key, etag, off, p)
		return string(p), err
	}
	steps := []struct {
		name string
		run  func(t *testing.T, st s3backend.Store)
	}{
		{"a put is read back, pinned to its ETag", func(t *testing.T, st s3backend.Store) {
			info := put(st, "a/b.tar", "hello world")
			if info.Key != "a/b.tar" || info.Size != 11 || info.ETag == "" || !info.ModTime.IsZero() {
				t.Errorf("Put: %+v", info)
			}
			if got, err := read(st, "a/b.tar", info.ETag, 6, 5); err != nil || got != "world" {
				t.Errorf("ReadRange: %q, %v", got, err)
			}
			if got, err := read(st, "a/b.tar", "", 0, 5); err != nil || got != "hello" {
				t.Errorf("ReadRange unpinned: %q, %v", got, err)
			}
			st2, err := st.Stat(ctx, "a/b.tar")
			if err != nil || st2.Size != 11 || st2.ETag != info.ETag || st2.ModTime.IsZero() {
				t.Errorf("Stat: %+v, %v", st2, err)
			}
		}},
		{"the same bytes keep their ETag, others change it", func(t *testing.T, st s3backend.Store) {
			a := put(st, "k", "one")
			if b := put(st, "k", "one"); b.ETag != a.ETag {
				t.Errorf("the same bytes put again: ETag %s, was %s", b.ETag, a.ETag)
			}
			c := put(st, "k", "two")
			if c.ETag == a.ETag {
				t.Errorf("other bytes put: ETag %s unchanged", c.ETag)
			}
			if _, err := read(st, "k", a.ETag, 0, 3); !errors.Is(err, s3backend.ErrChanged) {
				t.Errorf("a read pinned to the replaced version: %v; want ErrChanged", err)
			}
			if got, err := read(st, "k", c.ETag, 0, 3); err != nil || got != "two" {
				t.Errorf("a read pinned to the new version: %q, %v", got, err)
			}
		}},
		{"reads past the end, of nothing, at a negative offset", func(t *testing.T, st s3backend.Store) {
			info := put(st, "r", "0123456789")
			if _, err := read(st, "r", info.ETag, 8, 3); !errors.Is(err, s3backend.ErrOutOfRange) {
				t.Errorf("past the end: %v; want ErrOutOfRange", err)
			}
			if _, err := read(st, "r", info.ETag, 10, 0); err != nil {
				t.Errorf("nothing at the end: %v", err)
			}
			if _, err := read(st, "r", "", -1, 1); err == nil {
				t.Error("a negative offset read")
			}
			if _, err := read(st, "none", "", 0, 1); !errors.Is(err, s3backend.ErrNotFound) {
				t.Errorf("no object: %v; want ErrNotFound", err)
			}
			if _, err := st.Stat(ctx, "none"); !errors.Is(err, s3backend.ErrNotFound) {
				t.Errorf("Stat of no object: %v; want ErrNotFound", err)
			}
		}},
		{"put of unknown size, and a reader cut short", func(t *testing.T, st s3backend.Store) {
			info, err := st.Put(ctx, "u", strings.NewReader("unknown"), -1)
			if err != nil || info.Size != 7 {
				t.Errorf("size -1: %+v, %v", info, err)
			}
			if _, err := st.Put(ctx, "short", strings.NewReader("ab"), 5); !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("a reader of 2 bytes for 5: %v; want io.ErrUnexpectedEOF", err)
			}
			if _, err := st.Stat(ctx, "short"); !errors.Is(err, s3backend.ErrNotFound) {
				t.Errorf("a Put cut short left an object: %v", err)
			}
		}},
		{"put if absent", func(t *testing.T, st s3backend.Store) {
			a, err := st.PutIfAbsent(ctx, "once", strings.NewReader("first"), 5)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.PutIfAbsent(ctx, "once", strings.NewReader("second"), 6); !errors.Is(err, s3backend.ErrExists) {
				t.Errorf("a second PutIfAbsent: %v; want ErrExists", err)
			}
			if got, err := read(st, "once", a.ETag, 0, 5); err != nil || got != "first" {
				t.Errorf("after a refused PutIfAbsent: %q, %v", got, err)
			}
			if _, err := st.PutIfAbsent(ctx, "unsized", strings.NewReader("x"), -1); err == nil {
				t.Error("PutIfAbsent of unknown size succeeded")
			}
		}},
		{"list by plain prefix, sorted", func(t *testing.T, st s3backend.Store) {
			for _, k := range []string{"l/b", "l/a/2", "l/a/1", "lx", "m"} {
				put(st, k, k)
			}
			for prefix, want := range map[string][]string{
				"l/":  {"l/a/1", "l/a/2", "l/b"},
				"l":   {"l/a/1", "l/a/2", "l/b", "lx"},
				"l/a": {"l/a/1", "l/a/2"},
				"n/":  nil,
			} {
				objs, err := st.List(ctx, prefix)
				if err != nil {
					t.Fatal(err)
				}
				var keys []string
				for _, o := range objs {
					keys = append(keys, o.Key)
					if o.Size != int64(len(o.Key)) || o.ETag == "" {
						t.Errorf("listed %+v", o)
					}
				}
				if !slices.Equal(keys, want) {
					t.Errorf("List(%q): %v; want %v", prefix, keys, want)
				}
			}
		}},
		{"delete, twice", func(t *testing.T, st s3backend.Store) {
			put(st, "d", "x")
			for range 2 {
				if err := st.Delete(ctx, "d"); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := st.Stat(ctx, "d"); !errors.Is(err, s3backend.ErrNotFound) {
				t.Errorf("Stat after Delete: %v; want ErrNotFound", err)
			}
		}},
		{"invalid keys", func(t *testing.T, st s3backend.Store) {
			for _, k := range []string{"", "/abs", "a//b", "a/./b", "../x", "dir/", "nul\x00"} {
				if _, err := st.Stat(ctx, k); !errors.Is(err, s3backend.ErrInvalidKey) {
					t.Errorf("Stat(%q): %v; want ErrInvalidKey", k, err)
				}
				if _, err := st.Put(ctx, k, strings.NewReader("x"), 1); !errors.Is(err, s3backend.ErrInvalidKey) {
					t.Errorf("Put(%q): %v; want ErrInvalidKey", k, err)
				}
			}
			for _, p := range []string{"/", "/abs", "a//", "../"} {
				if _, err := st.List(ctx, p); !errors.Is(err, s3backend.ErrInvalidKey) {
					t.Errorf("List(%q): %v; want ErrInvalidKey", p, err)
				}
			}
		}},
		{"an ended context", func(t *testing.T, st s3backend.Store) {
			done, cancel := context.WithCancel(ctx)
			cancel()
			if _, err := st.Stat(done, "a/b.tar"); !errors.Is(err, context.Canceled) {
				t.Errorf("Stat: %v; want context.Canceled", err)
			}
			if err := st.ReadRange(done, "a/b.tar", "", 0, make([]byte, 1)); !errors.Is(err, context.Canceled) {
				t.Errorf("ReadRange: %v; want context.Canceled", err)
			}
		}},
	}
	for name, st := range stores {
		t.Run(name, func(t *testing.T) {
			for _, s := range steps {
				t.Run(s.name, func(t *testing.T) { s.run(t, st) })
			}
		})
	}
}

// TestCounts: reads, bytes and writes by key, in total and since the
// last take, and the most reads of one key at once.
func TestCounts(t *testing.T) {
	ctx := context.Background()
	s := s3test.Wrap(s3test.NewMemory())
	for _, k := range []string{"chunks/0", "chunks/1", "index"} {
		if _, err := s.Put(ctx, k, bytes.NewReader(make([]byte, 100)), 100); err != nil {
			t.Fatal(err)
		}
	}
	p := make([]byte, 10)
	for _, k := range []string{"chunks/0", "chunks/0", "chunks/1", "index"} {
		if err := s.ReadRange(ctx, k, "", 0, p); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Total().Under("chunks/").Sum(); got != (s3test.Counts{Reads: 3, Bytes: 30, Most: 1, Puts: 2}) {
		t.Errorf("chunks in total: %+v", got)
	}
	if got := s.Take()["chunks/0"]; got.Reads != 2 || got.Bytes != 20 {
		t.Errorf("chunks/0 taken: %+v", got)
	}
	if err := s.ReadRange(ctx, "index", "", 0, p); err != nil {
		t.Fatal(err)
	}
	if got := s.Take(); len(got) != 1 || got["index"].Reads != 1 {
		t.Errorf("taken after one read of the index: %+v", got)
	}
	if got := s.Total()["index"]; got.Reads != 2 || got.Puts != 1 {
		t.Errorf("index in total: %+v", got)
	}
}

// TestMost: reads of one key in flight at once are counted as such; the
// wrapped store holds them so that they overlap.
func TestMost(t *testing.T) {
	ctx := context.Background()
	inner := holding(t, "k", "x")
	g := inner.Gate(func(c s3test.Call) bool { return c.Op == s3backend.OpGet })
	s := s3test.Wrap(inner)
	errs := make(chan error, 3)
	for range 3 {
		go func() { errs <- s.ReadRange(ctx, "k", "", 0, make([]byte, 1)) }()
	}
	for range 3 {
		<-g.Waiting()
	}
	if got := s.Total()["k"]; got.Most != 3 || got.Reads != 3 {
		t.Errorf("three reads held below the count: %+v; want Most 3", got)
	}
	g.Open()
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ReadRange(ctx, "k", "", 0, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if got := s.Take()["k"]; got.Most != 3 || got.Reads != 4 {
		t.Errorf("after a fourth read alone: %+v; want Most 3 of 4 reads", got)
	}
	if got := s.Take(); len(got) != 0 {
		t.Errorf("taken again with nothing read: %+v", got)
	}
}

// TestFail: the calls Fail picks answer its error, counted; the rest,
// and every call once Fail is undone, are passed on.
func TestFail(t *testing.T) {
	ctx := context.Background()
	s := s3test.Wrap(s3test.NewMemory())
	errInjected := errors.New("injected")
	s.Fail(func(c s3test.Call) error {
		if c.Op == s3backend.OpPut && strings.Contains(c.Key, "bad") {
			return errInjected
		}
		return nil
	})
	if _, err := s.Put(ctx, "a/bad/x", strings.NewReader("x"), 1); !errors.Is(err, errInjected) {
		t.Errorf("a picked Put: %v", err)
	}
	if _, err := s.Put(ctx, "a/good/x", strings.NewReader("x"), 1); err != nil {
		t.Errorf("a Put not picked: %v", err)
	}
	if _, err := s.Stat(ctx, "a/bad/x"); !errors.Is(err, s3backend.ErrNotFound) {
		t.Errorf("the failed Put stored: %v", err)
	}
	if got := s.Total()["a/bad/x"].Puts; got != 1 {
		t.Errorf("failed Puts counted %d; want 1", got)
	}
	s.Fail(nil)
	if _, err := s.Put(ctx, "a/bad/x", strings.NewReader("x"), 1); err != nil {
		t.Errorf("after Fail(nil): %v", err)
	}
}

// TestGate: a gate holds the calls it picks from when it is made until
// it is opened, signals each, lets a held call's context end it, and
// passes the rest.
func TestGate(t *testing.T) {
	ctx := context.Background()
	s := holding(t, "k", "0123456789")
	g := s.Gate(func(c s3test.Call) bool { return c.Op == s3backend.OpGet && c.Off >= 5 })
	if err := s.ReadRange(ctx, "k", "", 0, make([]byte, 5)); err != nil {
		t.Fatalf("a read the gate does not pick: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- s.ReadRange(ctx, "k", "", 5, make([]byte, 5)) }()
	if c := <-g.Waiting(); c.Key != "k" || c.Off != 5 || c.Len != 5 {
		t.Errorf("held %+v", c)
	}
	select {
	case err := <-done:
		t.Fatalf("a held read returned %v before the gate opened", err)
	case <-time.After(20 * time.Millisecond):
	}
	short, cancel := context.WithCancel(ctx)
	ended := make(chan error, 1)
	go func() { ended <- s.ReadRange(short, "k", "", 6, make([]byte, 1)) }()
	<-g.Waiting()
	cancel()
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Errorf("a held read whose context ended: %v", err)
	}
	g.Open()
	g.Open()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := s.ReadRange(ctx, "k", "", 5, make([]byte, 5)); err != nil {
		t.Errorf("a read past an open gate: %v", err)
	}
}

// holding is a wrapped Memory with data under key.
func holding(t *testing.T, key, data string) *s3test.Store {
	t.Helper()
	s := s3test.Wrap(s3test.NewMemory())
	if _, err := s.Put(context.Background(), key, strings.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	return s
}
