package peer

import (
	"context"
	"errors"

	"github.com/brandgw/brand/internal/catalog"
)

// Solo is a single gateway's peers: none, so its importance feedback is
// its own.
type Solo struct{}

// Peers is none.
func (Solo) Peers() []int { return nil }

// URL is "": a single gateway is not named.
func (Solo) URL(int) string { return "" }

// Feedback is never called: there is no peer to ask.
func (Solo) Feedback(context.Context, int, *catalog.Dataset, string, uint64) ([]byte, error) {
	return nil, errors.New("peer: a single gateway has no peers")
}
