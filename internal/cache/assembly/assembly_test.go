package assembly_test

import (
	"slices"
	"testing"

	"github.com/brandgw/brand/internal/cache/assembly"
)

func TestGroups(t *testing.T) {
	for _, tt := range []struct {
		name     string
		sizes    []int64
		capacity int64
		want     []assembly.Group
	}{
		{"none", nil, 10, nil},
		{"all in half", []int64{2, 3}, 10, []assembly.Group{{0, 2, 5}}},
		{"cut at half", []int64{3, 2, 1, 4, 5}, 10, []assembly.Group{{0, 2, 5}, {2, 4, 5}, {4, 5, 5}}},
		{"a chunk over half is alone", []int64{1, 7, 1, 1}, 10, []assembly.Group{{0, 1, 1}, {1, 2, 7}, {2, 4, 2}}},
		{"a chunk over the cache is alone", []int64{12, 1}, 10, []assembly.Group{{0, 1, 12}, {1, 2, 1}}},
		{"cache of 0: one chunk a group", []int64{1, 1}, 0, []assembly.Group{{0, 1, 1}, {1, 2, 1}}},
		{"empty chunks join", []int64{0, 5, 0, 0}, 10, []assembly.Group{{0, 4, 5}}},
	} {
		got := slices.Collect(assembly.Groups(len(tt.sizes), func(i int) int64 { return tt.sizes[i] }, tt.capacity))
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestGroupsStop: a caller that stops early is not called again.
func TestGroupsStop(t *testing.T) {
	n := 0
	for range assembly.Groups(5, func(int) int64 { return 4 }, 8) {
		n++
		break
	}
	if n != 1 {
		t.Errorf("%d groups after a break", n)
	}
}
