package s3backend

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSymbolicLinks: one rule for links to files and to directories. A
// link that leads inside the store's directory is followed, whichever it
// leads to, and listed under its own name; one that leads out of it (or
// back up into a directory that holds it) fails the listing and every
// read through it with ErrOutside naming the link and nothing it leads
// to; a dangling link is skipped. The Live view follows none. Before,
// a link to a file out of the directory was listed and read, and a link
// to a directory inside it was not listed at all.
func TestSymbolicLinks(t *testing.T) {
	ctx := context.Background()
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("root:x:0:0:the first bytes of a file out of the tree"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		target func(dir string) string // where the link leads
		link   string                  // its key
		want   []string                // keys listed; nil with a refusal
		err    error
	}{
		{"a file inside", func(dir string) string { return filepath.Join(dir, "pool", "a.mp4") }, "v/link.mp4", []string{"pool/a.mp4", "pool/sub/b.mp4", "v/link.mp4"}, nil},
		{"a file inside, relative", func(string) string { return "../pool/a.mp4" }, "v/link.mp4", []string{"pool/a.mp4", "pool/sub/b.mp4", "v/link.mp4"}, nil},
		{"a directory inside", func(dir string) string { return filepath.Join(dir, "pool", "sub") }, "v/linked", []string{"pool/a.mp4", "pool/sub/b.mp4", "v/linked/b.mp4"}, nil},
		{"a file outside", func(string) string { return secret }, "v/evil.mp4", nil, ErrOutside},
		{"a directory outside", func(string) string { return outside }, "v/evil", nil, ErrOutside},
		{"a directory that holds it", func(dir string) string { return dir }, "v/loop", nil, ErrOutside},
		{"dangling", func(string) string { return "nowhere" }, "v/dangling", []string{"pool/a.mp4", "pool/sub/b.mp4"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newTestLocal(t)
			for _, k := range []string{"pool/a.mp4", "pool/sub/b.mp4"} {
				putSettled(t, l, k, []byte("movie "+k))
			}
			if err := os.MkdirAll(filepath.Join(l.Dir(), "v"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(tt.target(l.Dir()), l.path(tt.link)); err != nil {
				t.Fatal(err)
			}
			for _, view := range []*Local{l, l.IdentityETags()} {
				objs, err := view.List(ctx, "")
				var keys []string
				for _, o := range objs {
					keys = append(keys, o.Key)
				}
				switch {
				case tt.err != nil && (!errors.Is(err, tt.err) || !strings.Contains(err.Error(), tt.link)):
					t.Fatalf("List: %v, %v; want %v naming %s", keys, err, tt.err, tt.link)
				case tt.err != nil && (strings.Contains(err.Error(), "root:x") || strings.Contains(err.Error(), outside)):
					t.Fatalf("List: %v names what the link leads to", err)
				case tt.err == nil && (err != nil || !slices.Equal(keys, tt.want)):
					t.Fatalf("List: %v, %v; want %v", keys, err, tt.want)
				}
			}
			live, err := l.Live(0).List(ctx, "")
			if err != nil || len(live) != 2 {
				t.Fatalf("the Live view listed %+v, %v; want the two files, no link", live, err)
			}
			if tt.name == "a file outside" {
				p := make([]byte, 4)
				if err := l.ReadRange(ctx, tt.link, "", 0, p); !errors.Is(err, ErrOutside) {
					t.Fatalf("a read through the link: %v (%q); want ErrOutside", err, p)
				}
				if _, err := l.Stat(ctx, tt.link); !errors.Is(err, ErrOutside) {
					t.Fatalf("a stat through the link: %v; want ErrOutside", err)
				}
			}
		})
	}
}
