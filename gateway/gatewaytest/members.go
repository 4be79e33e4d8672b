package gatewaytest

import (
	"context"
	"slices"
	"sync"
)

// MemberList is a cluster's member list that a test edits, as an
// operator edits a --peers-file: a membership.Lister.
type MemberList struct {
	mu   sync.Mutex
	urls []string
}

// Set makes the list urls.
func (l *MemberList) Set(urls ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.urls = slices.Clone(urls)
}

// List is the list now.
func (l *MemberList) List(context.Context) ([]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.urls), nil
}
