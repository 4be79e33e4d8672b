package s3backend

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// An hour ago: a modification time long settled.
func settledTime() time.Time {
	return time.Now().Add(-time.Hour).Truncate(time.Millisecond).Add(123456 * time.Nanosecond)
}

// putSettled puts data under key and moves its modification time an hour
// back, so that its identity is settled.
func putSettled(t *testing.T, l *Local, key string, data []byte) {
	t.Helper()
	mustPut(t, l, key, data)
	if err := os.Chtimes(filepath.Join(l.Dir(), key), settledTime(), settledTime()); err != nil {
		t.Fatal(err)
	}
}

// TestIdentityETags: an IdentityETags view's Stat and List name a file by
// its size and modification time, reading nothing, and a read pinned to
// that sees what the content ETag cannot — a same-size edit of the
// middle — and a touch, and a copy with new times; a copy that keeps the
// times (cp -p, rsync -a) reads under it.
func TestIdentityETags(t *testing.T) {
	ctx := context.Background()
	size := 5*etagBlock + 17
	data := randomBytes(size, 3)
	tests := []struct {
		name    string
		change  func(t *testing.T, dir string)
		changed string // in the error; "" for none
	}{
		{"untouched", func(*testing.T, string) {}, ""},
		{"same size, middle only", func(t *testing.T, dir string) {
			name := filepath.Join(dir, "obj")
			f, err := os.OpenFile(name, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte{data[size/2] ^ 1}, int64(size/2)); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}, "modified at"},
		{"touched", func(t *testing.T, dir string) {
			now := time.Now()
			if err := os.Chtimes(filepath.Join(dir, "obj"), now, now); err != nil {
				t.Fatal(err)
			}
		}, "modified at"},
		{"one byte longer", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, "obj"), append(bytes.Clone(data), 0), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "bytes, indexed at"},
		{"copied, times kept", func(t *testing.T, dir string) {
			copyTree(t, dir, dir+".copy", keepMtime)
			os.RemoveAll(dir)
			os.Rename(dir+".copy", dir)
		}, ""},
		{"copied, new times", func(t *testing.T, dir string) {
			copyTree(t, dir, dir+".copy", newMtime)
			os.RemoveAll(dir)
			os.Rename(dir+".copy", dir)
		}, "modified at"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plain := newTestLocal(t)
			putSettled(t, plain, "obj", data)
			view := plain.IdentityETags()
			info, err := view.Stat(ctx, "obj")
			if err != nil {
				t.Fatal(err)
			}
			content, _ := plain.Stat(ctx, "obj")
			if !isIdentityETag(info.ETag) || info.ETag == content.ETag || info.Size != int64(size) || info.Unsettled {
				t.Fatalf("identity %+v, content %+v", info, content)
			}
			if listed, err := view.List(ctx, ""); err != nil || len(listed) != 1 || listed[0] != info {
				t.Fatalf("List: %v %+v, Stat: %+v", err, listed, info)
			}
			tt.change(t, plain.Dir())
			p := make([]byte, 100)
			rerr := view.ReadRange(ctx, "obj", info.ETag, int64(size/2)-10, p)
			werr := plain.ReadObject(ctx, "obj", `"`+info.ETag+`"`, make([]byte, size), nil)
			for what, err := range map[string]error{"ranged read": rerr, "whole read": werr} {
				switch {
				case tt.changed == "" && err != nil:
					t.Errorf("%s: %v", what, err)
				case tt.changed != "" && (!errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), tt.changed) ||
					!strings.Contains(err.Error(), filepath.Join(plain.Dir(), "obj"))):
					t.Errorf("%s: %v, want ErrChanged naming the file and saying %q", what, err, tt.changed)
				}
			}
			if tt.changed == "" && !bytes.Equal(p, data[size/2-10:][:100]) {
				t.Error("the read's bytes are not the file's")
			}
			if c, _ := plain.Stat(ctx, "obj"); tt.name == "same size, middle only" && c.ETag != content.ETag {
				t.Error("the content ETag saw the middle edit: this test no longer tests what only the identity sees")
			}
		})
	}
}

// A file written while a read pinned to its identity reads it fails the
// read: its bytes could be of two versions.
func TestIdentityWrittenWhileRead(t *testing.T) {
	ctx := context.Background()
	l := newTestLocal(t)
	data := randomBytes(4*progressPiece, 5)
	putSettled(t, l, "obj", data)
	info, err := l.IdentityETags().Stat(ctx, "obj")
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(l.Dir(), "obj")
	pieces := 0
	err = l.ReadRangeProgress(ctx, "obj", info.ETag, 0, make([]byte, len(data)), func(start, end int) {
		if pieces++; pieces == 1 {
			f, err := os.OpenFile(name, os.O_WRONLY, 0)
			if err != nil {
				t.Error(err)
				return
			}
			f.WriteAt([]byte{data[len(data)-1] ^ 1}, int64(len(data)-1))
			f.Close()
			now := time.Now()
			os.Chtimes(name, now, now) // past any tick of the clock the write was stamped with
		}
	})
	if !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), "while it was read") {
		t.Fatalf("a read during which the file was written: %v, want ErrChanged", err)
	}
}

// A file modified less than its settle time ago is listed and stated
// Unsettled — 50 ms for a time with a fraction of a second, the default
// settle time for whole seconds — and settled after.
func TestIdentityUnsettled(t *testing.T) {
	ctx := context.Background()
	if SettleOf(time.Unix(1700000000, 0)) != DefaultSettle || SettleOf(time.Unix(1700000000, 1)) != fineSettle {
		t.Fatalf("SettleOf: %v for whole seconds, %v for nanoseconds", SettleOf(time.Unix(1700000000, 0)), SettleOf(time.Unix(1700000000, 1)))
	}
	l := newTestLocal(t)
	view := l.IdentityETags()
	name := filepath.Join(l.Dir(), "obj")
	for _, tt := range []struct {
		name      string
		mtime     time.Time
		unsettled bool
	}{
		{"fine, just now", time.Now().Add(-time.Millisecond), true},
		{"fine, 200 ms ago", time.Now().Add(-200 * time.Millisecond), false},
		{"whole seconds, this second", time.Now().Truncate(time.Second), true},
		{"whole seconds, 5 s ago", time.Now().Add(-5 * time.Second).Truncate(time.Second), false},
		{"in the future", time.Now().Add(time.Minute), true},
	} {
		mustPut(t, l, "obj", []byte("x"))
		if err := os.Chtimes(name, tt.mtime, tt.mtime); err != nil {
			t.Fatal(err)
		}
		st, err := view.Stat(ctx, "obj")
		listed, lerr := view.List(ctx, "")
		if err != nil || lerr != nil || st.Unsettled != tt.unsettled || len(listed) != 1 || listed[0].Unsettled != tt.unsettled {
			t.Errorf("%s: Stat %+v %v, List %+v %v; want unsettled %t", tt.name, st, err, listed, lerr, tt.unsettled)
		}
	}
	if c, _ := l.Stat(ctx, "obj"); c.Unsettled {
		t.Error("the plain view marks a file unsettled")
	}
}

// An IdentityETags view lists what the plain view lists: regular files,
// symbolic links to them as the files, nothing being written.
func TestIdentityListsAsPlain(t *testing.T) {
	ctx := context.Background()
	l := newTestLocal(t)
	putSettled(t, l, "a/x", []byte("x"))
	putSettled(t, l, "b", []byte("yy"))
	if err := os.Symlink(filepath.Join(l.Dir(), "b"), filepath.Join(l.Dir(), "a/link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(l.Dir(), "a", tempPrefix+"1"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	plain, err := l.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	ids, err := l.IdentityETags().List(ctx, "")
	if err != nil || len(ids) != len(plain) {
		t.Fatalf("identity view listed %+v (%v), the plain view %+v", ids, err, plain)
	}
	for i := range ids {
		fi, _ := os.Stat(filepath.Join(l.Dir(), ids[i].Key))
		if ids[i].Key != plain[i].Key || ids[i].Size != plain[i].Size || ids[i].ETag != identityETag(fi) {
			t.Errorf("%+v, plain %+v", ids[i], plain[i])
		}
	}
}
