package httperr_test

import (
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/server/httperr"
)

func TestMessage(t *testing.T) {
	long := strings.Repeat("x", httperr.MaxMessage)
	tests := []struct {
		name, msg, want string
	}{
		{"short", "bad request: seed", "bad request: seed"},
		{"at the bound", long, long},
		{"past it", long + strings.Repeat("y", 10<<20), long + "… (10485760 more bytes left out)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := httperr.Message(tt.msg); got != tt.want {
				t.Errorf("Message = %.100s…%s (%d bytes), want %d bytes", got, got[max(0, len(got)-40):], len(got), len(tt.want))
			}
		})
	}
}
