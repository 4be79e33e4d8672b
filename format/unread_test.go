package format

import (
	"strings"
	"testing"
)

// A sample written unread after some of its members keeps none of them:
// it is one member saying why, found from its bytes alone (and not taken
// for a damaged one, nor an intact sample for it); the chunk's Need is
// its samples, table and footer, which a buffer of that size holds as the
// bound's did.
func TestWriteUnread(t *testing.T) {
	dst := make([]byte, 64<<10)
	w, err := NewWriter(dst, 3, WriterOptions{ModTime: 1700000000})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("the quick brown fox ", 100)
	steps := []func() error{
		func() error { return w.Begin("d/0") },
		func() error { return w.Add("png", []byte("an image")) },
		func() error { return w.Begin("d/1") },
		func() error { return w.Add("png", []byte("an image")) },
		func() error { return w.Add("json", []byte(long)) },
		func() error { return WriteUnread(w, "d/1", "field conversations holds a text of 104857596 bytes") },
		func() error { return w.Begin("d/2") },
		func() error { return w.Add(UnreadExt, []byte("a field called unread")) },
		func() error { return w.Finish() },
	}
	for i, f := range steps {
		if err := f(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	tab, err := Verify(dst)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"", "field conversations holds a text of 104857596 bytes", ""} {
		off, n, _ := tab.Sample(i)
		why, unread := SampleUnread(dst[off : off+n])
		if unread != (want != "") || why != want {
			t.Errorf("sample %d: unread %v (%q), want %q", i, unread, why, want)
		}
		if _, damaged := SampleDamage(dst[off : off+n]); damaged {
			t.Errorf("sample %d taken for a damaged one", i)
		}
		if strings.Contains(string(dst[off:off+n]), "quick brown") {
			t.Errorf("sample %d holds the text left unread", i)
		}
	}
	if off, n, _ := tab.Sample(1); n != 2*Block || off != 2*Block {
		t.Errorf("the unread sample at %d+%d; want one member at %d", off, n, 2*Block)
	}
	need := tab.Need()
	if want := int64(6*Block) + Overhead(3); need != want {
		t.Errorf("Need %d, want %d", need, want)
	}
}
