package s3backend

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// rewriteMiddle overwrites, in place, one byte in the middle of a file
// larger than the two blocks its content ETag hashes, and puts its
// modification time back: only the change time tells the versions apart.
func rewriteMiddle(t *testing.T, name string, b byte) {
	t.Helper()
	fi, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{b}, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(name, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
}

// TestLiveVersions: a Live view's ETag changes with a same-size rewrite
// of a file's middle, which its content ETag does not see, and a read
// pinned to the old version fails rather than return the new bytes; the
// plain view's content ETags are unchanged by it.
func TestLiveVersions(t *testing.T) {
	ctx := context.Background()
	plain := newTestLocal(t)
	live := plain.Live(0)
	data := randomBytes(3*etagBlock, 1)
	mustPut(t, plain, "a/obj", data)
	before, err := live.Stat(ctx, "a/obj")
	if err != nil {
		t.Fatal(err)
	}
	content, _ := plain.Stat(ctx, "a/obj")
	if !isVersionETag(before.ETag) || before.Unsettled || before.Size != int64(len(data)) || isVersionETag(content.ETag) {
		t.Fatalf("live %+v, plain %+v", before, content)
	}
	listed, err := live.List(ctx, "a/")
	if err != nil || len(listed) != 1 || listed[0].ETag != before.ETag {
		t.Fatalf("List: %v %+v; Stat said %s", err, listed, before.ETag)
	}
	p := make([]byte, 10)
	if err := live.ReadRange(ctx, "a/obj", before.ETag, int64(len(data)/2), p); err != nil || !bytes.Equal(p, data[len(data)/2:][:10]) {
		t.Fatalf("read pinned to the current version: %v", err)
	}

	// Past a clock tick of file systems without fine-grained timestamps,
	// whose change time the rewrite would otherwise share (the case
	// TestLiveUnsettled covers).
	time.Sleep(20 * time.Millisecond)
	rewriteMiddle(t, filepath.Join(plain.Dir(), "a/obj"), data[len(data)/2]+1)
	after, err := live.Stat(ctx, "a/obj")
	if err != nil {
		t.Fatal(err)
	}
	if after.ETag == before.ETag {
		t.Fatalf("a middle rewrite kept the live ETag %s", after.ETag)
	}
	if c, _ := plain.Stat(ctx, "a/obj"); c.ETag != content.ETag {
		t.Fatalf("the content ETag changed (%s → %s): indexes of local datasets would break", content.ETag, c.ETag)
	}
	if err := live.ReadRange(ctx, "a/obj", before.ETag, 0, p); !errors.Is(err, ErrChanged) {
		t.Fatalf("read pinned to the old version: %v, want ErrChanged", err)
	}
	if err := live.ReadRange(ctx, "a/obj", `"`+after.ETag+`"`, int64(len(data)/2), p[:1]); err != nil || p[0] != data[len(data)/2]+1 {
		t.Fatalf("read pinned to the new version: %v %d", err, p[0])
	}

	// Replaced by rename: another inode, another version.
	mustPut(t, plain, "a/obj", data)
	if again, _ := live.Stat(ctx, "a/obj"); again.ETag == before.ETag || again.ETag == after.ETag {
		t.Fatalf("a file replaced by rename kept a version ETag: %s", again.ETag)
	}
}

// TestLiveUnsettled: a version taken within the settle time of the
// file's change is marked unsettled, with the ETag it has settled.
func TestLiveUnsettled(t *testing.T) {
	ctx := context.Background()
	plain := newTestLocal(t)
	mustPut(t, plain, "obj", []byte("fresh"))
	info, err := plain.Live(time.Hour).Stat(ctx, "obj")
	if err != nil || !info.Unsettled {
		t.Fatalf("a file just written: %v %+v, want unsettled", err, info)
	}
	listed, err := plain.Live(time.Hour).List(ctx, "")
	if err != nil || len(listed) != 1 || !listed[0].Unsettled {
		t.Fatalf("listed: %v %+v, want unsettled", err, listed)
	}
	settled, _ := plain.Live(0).Stat(ctx, "obj")
	if settled.Unsettled || settled.ETag != info.ETag {
		t.Fatalf("settled %+v, unsettled %+v: want one ETag", settled, info)
	}
	if content, _ := plain.Stat(ctx, "obj"); content.Unsettled {
		t.Fatal("a plain view's Stat marks versions unsettled")
	}
}

// TestLiveNoSymlinks: a Live view neither lists nor reads a symbolic link
// — to a file outside its directory, to one inside, or to a directory —
// nor a FIFO, and a name too long for the file system is not found; the
// plain view follows links as before.
func TestLiveNoSymlinks(t *testing.T) {
	ctx := context.Background()
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("credentials"), 0o600); err != nil {
		t.Fatal(err)
	}
	plain := newTestLocal(t)
	dir := plain.Dir()
	mustPut(t, plain, "d/real.txt", []byte("real"))
	for link, target := range map[string]string{"link.txt": secret, "d/inside.txt": filepath.Join(dir, "d/real.txt"), "out": outside} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "d/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	live := plain.Live(0)
	var keys []string
	for _, prefix := range []string{"", "d/", "out/", "link.txt"} {
		objs, err := live.List(ctx, prefix)
		if err != nil {
			t.Fatalf("List(%q): %v", prefix, err)
		}
		for _, o := range objs {
			keys = append(keys, o.Key)
		}
	}
	if !slices.Equal(keys, []string{"d/real.txt", "d/real.txt"}) {
		t.Fatalf("listed %v; want d/real.txt alone, under each prefix that holds it", keys)
	}
	p := make([]byte, 4)
	for _, key := range []string{"link.txt", "d/inside.txt", "out/secret", "d/fifo", strings.Repeat("k", 300), strings.Repeat("k/", 40000) + "k"} {
		if _, err := live.Stat(ctx, key); !errors.Is(err, ErrNotFound) {
			t.Errorf("Stat(%.40q): %v, want ErrNotFound", key, err)
		}
		if err := live.ReadRange(ctx, key, "", 0, p); !errors.Is(err, ErrNotFound) {
			t.Errorf("ReadRange(%.40q): %v, want ErrNotFound", key, err)
		}
	}
	if err := live.ReadRange(ctx, "d/real.txt", "", 0, p); err != nil || string(p) != "real" {
		t.Fatalf("a real file: %v %q", err, p)
	}
	if err := plain.ReadRange(ctx, "d/inside.txt", "", 0, p); err != nil || string(p) != "real" {
		t.Fatalf("the plain view follows links as before: %v", err)
	}
}
