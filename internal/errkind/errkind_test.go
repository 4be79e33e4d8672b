package errkind_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/brandgw/brand/internal/errkind"
)

var (
	errBusy     = errkind.Named(errkind.Busy, "cache_busy", "busy")
	errMismatch = errkind.Named(errkind.Upstream, "store_mismatch", "changed")
	errMissing  = errkind.New(errkind.NotFound, "no such thing")
	errPlain    = errors.New("plain")
)

// damaged is an error type of a package's own that says its kind.
type damaged struct{ reads int }

func (d *damaged) Error() string      { return fmt.Sprintf("damaged after %d reads", d.reads) }
func (d *damaged) Kind() errkind.Kind { return errkind.Corrupt }

func TestKinds(t *testing.T) {
	tests := []struct {
		name  string
		err   error
		kinds []errkind.Kind
		of    errkind.Kind
		names []string
	}{
		{"nil", nil, nil, errkind.Other, nil},
		{"plain", errPlain, nil, errkind.Other, nil},
		{"sentinel", errMissing, []errkind.Kind{errkind.NotFound}, errkind.NotFound, nil},
		{"wrapped", fmt.Errorf("x: %w", errBusy), []errkind.Kind{errkind.Busy}, errkind.Busy, []string{"cache_busy"}},
		{"a sentinel made of another", fmt.Errorf("y: %w", fmt.Errorf("%w: more", errMismatch)), []errkind.Kind{errkind.Upstream}, errkind.Upstream, []string{"store_mismatch"}},
		{"two", fmt.Errorf("%w: %w", errBusy, errMismatch), []errkind.Kind{errkind.Busy, errkind.Upstream}, errkind.Busy, []string{"cache_busy", "store_mismatch"}},
		{"joined", errors.Join(errPlain, errMissing, errMismatch), []errkind.Kind{errkind.NotFound, errkind.Upstream}, errkind.NotFound, []string{"store_mismatch"}},
		{"a type of its own", fmt.Errorf("z: %w", &damaged{3}), []errkind.Kind{errkind.Corrupt}, errkind.Corrupt, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k := errkind.Other; k <= errkind.Internal; k++ {
				if got, want := errkind.Has(tt.err, k), slices.Contains(tt.kinds, k); got != want {
					t.Errorf("Has(%v) = %v, want %v", k, got, want)
				}
			}
			if got := errkind.Of(tt.err); got != tt.of {
				t.Errorf("Of = %v, want %v", got, tt.of)
			}
			if got := errkind.Names(tt.err); !slices.Equal(got, tt.names) {
				t.Errorf("Names = %q, want %q", got, tt.names)
			}
		})
	}
}

// TestSentinelIdentity: a kind does not make two sentinels of one kind
// and text the same error.
func TestSentinelIdentity(t *testing.T) {
	a := errkind.New(errkind.Invalid, "bad")
	b := errkind.New(errkind.Invalid, "bad")
	if errors.Is(a, b) || !errors.Is(fmt.Errorf("w: %w", a), a) {
		t.Fatal("sentinels compare by identity")
	}
	if a.Error() != "bad" {
		t.Fatalf("message %q", a.Error())
	}
}

func TestKindString(t *testing.T) {
	seen := map[string]bool{}
	for k := errkind.Other; k <= errkind.Internal; k++ {
		s := k.String()
		if seen[s] || s == "" {
			t.Errorf("kind %d is named %q", k, s)
		}
		seen[s] = true
	}
	if got := errkind.Kind(200).String(); got != "kind(200)" {
		t.Errorf("an unknown kind is %q", got)
	}
}
