package scope_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/server/scope"
)

// inForce is the scope of each token of a set, as Grant.Scope says it.
func inForce(ts []scope.Token) map[string]string {
	out := map[string]string{}
	for _, t := range ts {
		out[t.Secret] = t.Grant.Scope()
	}
	return out
}

const (
	admin   = "admin over everything"
	webOnly = "read over datasets web-*"
	readAll = "read over datasets *"
)

// errAny stands for any error in the tables below.
var errAny = errors.New("any error")

// reload is f.Reload, checking that it says taken when it hands over
// the set it then holds, and only then.
func reload(t *testing.T, f *scope.TokenFile) error {
	t.Helper()
	var handed []scope.Token
	taken, err := f.Reload(func(ts []scope.Token) error { handed = ts; return nil })
	if taken != (handed != nil) || taken && !reflect.DeepEqual(handed, f.Tokens()) {
		t.Errorf("taken %v, handed %v, in force %v", taken, handed, f.Tokens())
	}
	return err
}

func checkErr(t *testing.T, what string, err, want error) {
	t.Helper()
	switch {
	case want == errAny && err == nil, want != errAny && !errors.Is(err, want):
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
}

// TestTokenFileWrittenInParts: a file rewritten in place is read between
// a writer's writes, the re-reads driven directly. The reproduction
// (issue 98, item 5): a scoped line read with its secret written and its
// fields not yet made that token an admin token until the next re-read.
func TestTokenFileWrittenInParts(t *testing.T) {
	type step struct {
		write  string // written to the file (truncated before the first)
		err    error  // the re-read's
		scopes map[string]string
	}
	const start = "ops\nro rights=read datasets=web-*\n"
	startScopes := map[string]string{"ops": admin, "ro": webOnly}
	tests := []struct {
		name  string
		steps []step
	}{
		{"a scoped line cut after its secret", []step{
			{"ops\nro", scope.ErrUnsettled, startScopes},
			{" rights=read datasets=web-*,code\n", nil, map[string]string{"ops": admin, "ro": "read over datasets web-*,code"}},
		}},
		{"a new token's line cut after its secret", []step{
			{"ops\nro rights=read datasets=web-*\nnew", scope.ErrUnsettled, startScopes},
			{" rights=read datasets=web-*\n", nil, map[string]string{"ops": admin, "ro": webOnly, "new": webOnly}},
		}},
		{"a line cut before its datasets=", []step{
			{"ops\nro rights=read", scope.ErrUnsettled, startScopes},
			{" datasets=web-*\n", nil, startScopes},
		}},
		{"a writer stalled after a secret in force", []step{
			{"ops\nro", scope.ErrUnsettled, startScopes},
			{"", scope.ErrRescoped, startScopes},
			{"", nil, startScopes},                                    // told once
			{"\n", nil, map[string]string{"ops": admin, "ro": admin}}, // whole: the operator's word
		}},
		{"a line that does not parse", []step{
			{"ops\nro rights=rea\n", errAny, startScopes},
			{"", nil, startScopes}, // told once
		}},
		{"no token", []step{{"# nobody\n", errAny, startScopes}}},
		{"a last line without its newline, unchanged at the next read", []step{
			{"ops\nro rights=read datasets=web-*\nnew rights=read", scope.ErrUnsettled, startScopes},
			{"", nil, map[string]string{"ops": admin, "ro": webOnly, "new": readAll}},
		}},
		{"a comment without its newline", []step{
			{"ro rights=read datasets=web-*\n# ops rotated out", nil, map[string]string{"ro": webOnly}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tokens")
			if err := os.WriteFile(path, []byte(start), 0o600); err != nil {
				t.Fatal(err)
			}
			f, err := scope.ReadTokenFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// One file rewritten in place, as a shell's > does:
			// truncated, then written in parts.
			w, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			for i, s := range tt.steps {
				if _, err := w.WriteString(s.write); err != nil {
					t.Fatal(err)
				}
				what := fmt.Sprintf("after write %d", i+1)
				checkErr(t, what, reload(t, f), s.err)
				if got := inForce(f.Tokens()); !reflect.DeepEqual(got, s.scopes) {
					t.Fatalf("%s: in force %v, want %v", what, got, s.scopes)
				}
			}
		})
	}
}

// TestTokenFileSameSizeAndTime: a file rewritten with another token of
// the same length, its modification time put back. The reproduction
// (issue 98, item 6): a change was seen by modification time and size
// alone, so the old token kept working.
func TestTokenFileSameSizeAndTime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("old-aaaa\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := scope.ReadTokenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("new-bbbb\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := reload(t, f); err != nil {
		t.Fatal(err)
	}
	if got, want := inForce(f.Tokens()), map[string]string{"new-bbbb": admin}; !reflect.DeepEqual(got, want) {
		t.Fatalf("in force %v, want %v", got, want)
	}
}

// TestTokenFileSymlinkSwap: a Kubernetes secret volume's rotation, the
// path a symlink through a directory symlink swapped (renamed over)
// between two generations of the same size and modification time. The
// reproduction (issue 98, item 6): the old token was never revoked.
// Kubernetes' secrets often end without a newline: taken a read late.
func TestTokenFileSymlinkSwap(t *testing.T) {
	tests := []struct {
		name     string
		old, new string
		errs     []error // of the re-reads until the new set is in force
	}{
		{"lines ending with a newline", "ops\nold-aaaa rights=read\n", "ops\nnew-bbbb rights=read\n", []error{nil}},
		{"no final newline", "old-aaaa", "new-bbbb", []error{scope.ErrUnsettled, nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			when := time.Now().Add(-time.Hour).Truncate(time.Second)
			for gen, text := range map[string]string{"..gen1": tt.old, "..gen2": tt.new} {
				if err := os.Mkdir(filepath.Join(dir, gen), 0o700); err != nil {
					t.Fatal(err)
				}
				p := filepath.Join(dir, gen, "tokens")
				if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chtimes(p, when, when); err != nil {
					t.Fatal(err)
				}
			}
			link := func(gen string) {
				t.Helper()
				tmp := filepath.Join(dir, "..data_tmp")
				if err := os.Symlink(gen, tmp); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
					t.Fatal(err)
				}
			}
			link("..gen1")
			path := filepath.Join(dir, "tokens")
			if err := os.Symlink(filepath.Join("..data", "tokens"), path); err != nil {
				t.Fatal(err)
			}
			f, err := scope.ReadTokenFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := inForce(f.Tokens())["old-aaaa"]; !ok {
				t.Fatalf("in force at start %v, want old-aaaa", inForce(f.Tokens()))
			}
			link("..gen2")
			for i, want := range tt.errs {
				checkErr(t, fmt.Sprintf("re-read %d", i+1), reload(t, f), want)
			}
			got := inForce(f.Tokens())
			if _, ok := got["old-aaaa"]; ok {
				t.Errorf("the old generation's token still in force after the swap: %v", got)
			}
			if _, ok := got["new-bbbb"]; !ok {
				t.Errorf("the new generation's token not in force after the swap: %v", got)
			}
		})
	}
}

// TestTokenFileWarnings: a token file every user may read starts, with a
// warning naming it and its mode; the mode is the target's, not a
// symlink's (always 0777).
func TestTokenFileWarnings(t *testing.T) {
	tests := []struct {
		name string
		mode os.FileMode
		link bool
		want string // a part of the one warning; "" for none
	}{
		{"owner only", 0o600, false, ""},
		{"group", 0o640, false, ""},
		{"world-readable", 0o644, false, "(mode -rw-r--r--)"},
		{"through a symlink to an owner-only file", 0o600, true, ""},
		{"through a symlink to a world-readable file", 0o604, true, "(mode -rw----r--)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tokens")
			if err := os.WriteFile(path, []byte("ops\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tt.mode); err != nil { // whatever the umask
				t.Fatal(err)
			}
			if tt.link {
				l := path + "-link"
				if err := os.Symlink(path, l); err != nil {
					t.Fatal(err)
				}
				path = l
			}
			f, err := scope.ReadTokenFile(path)
			if err != nil {
				t.Fatal(err)
			}
			w := f.Warnings()
			switch {
			case tt.want == "" && len(w) != 0:
				t.Errorf("warnings %q, want none", w)
			case tt.want != "" && (len(w) != 1 || !strings.Contains(w[0], tt.want) || !strings.Contains(w[0], path)):
				t.Errorf("warnings %q, want one naming %s and saying %q", w, path, tt.want)
			}
		})
	}
}
