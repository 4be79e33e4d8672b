package clips_test

import (
	"slices"
	"testing"

	"github.com/brandgw/brand/internal/batch/units/unitstest"

	"github.com/brandgw/brand/internal/batch/layout"
	uclip "github.com/brandgw/brand/internal/batch/units/clips"

	"github.com/brandgw/brand/format/video/clips"
)

// A clip batch served without clips whose GOPs' chunks are damaged or
// lost (WithoutClips, by read positions) and then without clips whose
// video did not decode (WithoutClipsAt, by their index among the clips
// left) names every clip left out by its position in the batch as laid
// out, in order, with its key; its ETag is the partial one of those
// positions whichever way they were left out, and the batch's full ETag
// stays the one laid out.
func TestWithoutClipsAt(t *testing.T) {
	// Six clips; clip i needs GOP i, read at position i.
	laid := func() *layout.Batch {
		cb := &uclip.ClipBatch{GOPs: map[clips.GOP]int{}}
		for i := range 6 {
			g := clips.GOP{Video: i, GOP: 0}
			cb.Clips = append(cb.Clips, clips.Clip{GOPs: []clips.GOP{g}, Row: -1})
			cb.Keys = append(cb.Keys, string(rune('a'+i)))
			cb.GOPs[g] = i
		}
		return &layout.Batch{ETag: `"laid"`, Content: cb}
	}
	for _, tc := range []struct {
		name      string
		reads     []int // read positions of damaged or lost chunks
		at        []int // then: indexes among the clips left
		missing   []int
		keys      []string
		remaining []string
	}{
		{"nothing", nil, nil, nil, nil, []string{"a", "b", "c", "d", "e", "f"}},
		{"undecodable alone", nil, []int{1, 4}, []int{1, 4}, []string{"b", "e"}, []string{"a", "c", "d", "f"}},
		{"lost alone", []int{0, 3}, nil, []int{0, 3}, []string{"a", "d"}, []string{"b", "c", "e", "f"}},
		// Left after the read: b c e f; indexes 0 and 2 are b and e.
		{"both", []int{0, 3}, []int{0, 2}, []int{0, 1, 3, 4}, []string{"a", "b", "d", "e"}, []string{"c", "f"}},
		{"every one", []int{1}, []int{0, 1, 2, 3, 4}, []int{0, 1, 2, 3, 4, 5}, []string{"a", "b", "c", "d", "e", "f"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := laid()
			nb := unitstest.WithoutClipsAt(unitstest.WithoutClips(b, tc.reads), tc.at)
			if !slices.Equal(nb.Missing, tc.missing) || !slices.Equal(nb.MissingKeys, tc.keys) {
				t.Errorf("missing %v %q, want %v %q", nb.Missing, nb.MissingKeys, tc.missing, tc.keys)
			}
			if got := unitstest.Clips(nb).Keys; !slices.Equal(got, tc.remaining) || len(unitstest.Clips(nb).Clips) != len(got) {
				t.Errorf("clips left %q (%d), want %q", got, len(unitstest.Clips(nb).Clips), tc.remaining)
			}
			want := b.ETag
			if len(tc.missing) > 0 {
				want = b.Partial(nil, tc.missing, nil).ETag // the partial ETag of a batch missing those
			}
			if nb.ETag != want {
				t.Errorf("ETag %s, want %s", nb.ETag, want)
			}
			if len(unitstest.Clips(b).Keys) != 6 || b.Missing != nil {
				t.Error("the batch laid out was changed")
			}
		})
	}
}
