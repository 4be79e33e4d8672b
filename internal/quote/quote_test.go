package quote_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/quote"
)

func TestInput(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", `""`},
		{"short", "gen-1", `"gen-1"`},
		{"at the bound", strings.Repeat("a", quote.MaxBytes), strconv.Quote(strings.Repeat("a", quote.MaxBytes))},
		{"past it", strings.Repeat("a", quote.MaxBytes+1), strconv.Quote(strings.Repeat("a", quote.MaxBytes)) + "… (129 bytes; the first 128 quoted)"},
		{"a character not cut", strings.Repeat("a", quote.MaxBytes-1) + "é" + "b", strconv.Quote(strings.Repeat("a", quote.MaxBytes-1)) + "… (130 bytes; the first 127 quoted)"},
		{"60 MiB of control bytes", strings.Repeat("\x01", 60<<20), strconv.Quote(strings.Repeat("\x01", quote.MaxBytes)) + "… (62914560 bytes; the first 128 quoted)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := quote.Input(tt.in)
			if got != tt.want {
				t.Errorf("Input = %.200s, want %.200s", got, tt.want)
			}
			// However long and whatever its bytes, a quote is at most
			// four bytes a byte quoted, and the count.
			if len(got) > 4*quote.MaxBytes+64 {
				t.Errorf("a quote of %d bytes", len(got))
			}
		})
	}
}

func TestError(t *testing.T) {
	base := errors.New("the base")
	long := fmt.Errorf("json: unknown field %q: %w", strings.Repeat("n", 1<<20), base)
	tests := []struct {
		name    string
		err     error
		wantLen int // of the message; 0: as err's
	}{
		{"short", fmt.Errorf("json: unknown field %q: %w", "x", base), 0},
		{"a name of 1 MiB", long, quote.MaxErrorBytes + len("… (1048623 bytes; the first 512 told)")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := quote.Error(tt.err)
			want := tt.wantLen
			if want == 0 {
				want = len(tt.err.Error())
			}
			if len(got.Error()) != want {
				t.Errorf("a message of %d bytes, want %d: %.100s", len(got.Error()), want, got)
			}
			if !errors.Is(got, base) {
				t.Errorf("%T does not wrap the error it bounds", got)
			}
		})
	}
	if quote.Error(nil) != nil {
		t.Error("Error(nil) is not nil")
	}
}
