package reader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/cluster/route"
	"github.com/brandgw/brand/internal/cluster/transport"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
)

// damagedOwner stands for a cluster whose other node owns the chunks in
// damaged, damaged at rest there: it leaves their samples out and says
// which; every other sample this node reads itself.
type damagedOwner struct {
	route.Solo
	damaged map[int]bool
}

func (damagedOwner) Nodes() int { return 2 }

func (o damagedOwner) ReadRemote(_ context.Context, s layout.Samples, _ *transport.Origin, _, _ [][]byte) (local, missing []int, err error) {
	for i, in := range s.Info {
		if o.damaged[in.Chunk] {
			missing = append(missing, i)
		} else {
			local = append(local, i)
		}
	}
	return local, missing, nil
}

// TestDamagedChunkOnACluster: a chunk damaged at rest on a cluster. Its
// owner answers a peer's request without the chunk's samples and names
// them, whatever its own mode (the asker decides); an asker told so
// leaves them out in skip mode and fails the read in fail mode
// (catalog.ErrCorrupt, 502), naming the chunk. The reproduction (gateway's
// TestSkipDamagedChunkOnACluster, whose owner's answer and its head are
// internal/cluster/transport's TestReplyHeadNamesMissingSamples, and a 502 that keeps
// the owner up its TestFetchClassifiesFailures): an asker got a 502 from
// the owner, held it down and read its chunks itself.
func TestDamagedChunkOnACluster(t *testing.T) {
	ds := catalogtest.Dataset(t, "a", 4, 4) // samples 0..3 in chunk 0
	tests := []struct {
		name    string
		local   bool // the owner's read of a peer's request
		skip    bool
		ids     []int
		missing []int // positions left out
		fails   bool
	}{
		{"a peer's request, fail mode", true, false, []int{5, 0, 9, 1}, []int{1, 3}, false},
		{"a peer's request for the damaged chunk alone", true, false, []int{2, 0}, []int{0, 1}, false},
		{"told by the owner, skip mode", false, true, []int{5, 0, 9, 1}, []int{1, 3}, false},
		{"told by the owner, fail mode", false, false, []int{5, 0, 9, 1}, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := &store{damaged: map[chunkcache.Key]bool{}}
			if tc.local {
				st.damaged[ds.ChunkKey(0)] = true
			}
			r, c, _ := newNodeReader(t, 64<<10, st, tc.skip, damagedOwner{damaged: map[int]bool{0: !tc.local}})
			info := make([]chunkindex.Sample, len(tc.ids))
			for i, id := range tc.ids {
				info[i] = ds.Index.Sample(id)
			}
			res, err := r.Read(context.Background(), Request{Samples: layout.SamplesOf(ds, tc.ids, info), Local: tc.local})
			if tc.fails {
				if !errors.Is(err, catalog.ErrCorrupt) || !strings.Contains(fmt.Sprint(err), ds.Index.Chunk(0).Key) {
					t.Fatalf("read: %v; want ErrCorrupt naming chunk %s", err, ds.Index.Chunk(0).Key)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer res.Release()
			if !slices.Equal(res.MissingPos, tc.missing) {
				t.Errorf("MissingPos %v, want %v", res.MissingPos, tc.missing)
			}
			var wantBody []byte
			for i, id := range tc.ids {
				if !slices.Contains(tc.missing, i) {
					wantBody = append(wantBody, want(ds, id)...)
				}
			}
			if got := bytes.Join(res.Parts, nil); !bytes.Equal(got, wantBody) || res.Bytes != int64(len(wantBody)) {
				t.Errorf("read %d bytes (Bytes %d), want the %d of the samples kept, in order", len(got), res.Bytes, len(wantBody))
			}
			res.Release()
			if st := c.Stats(); st.PinnedBytes != 0 {
				t.Errorf("%d bytes still pinned after Release", st.PinnedBytes)
			}
		})
	}
}
