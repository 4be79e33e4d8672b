package s3face

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/server/httperr"
)

// objectNames is a dataset version's objects as the S3 face lists them:
// every member of every sample, named key.ext as the member was named in
// its tar (or key alone when it has no extension), sorted as S3 sorts keys
// — by bytes. It implements s3proto.Names.
//
// It is built on the first listing of the dataset version and kept with
// it: keys in one string (the index's own are not used, since a cluster
// node's partial index holds only some chunks' keys) and 8 bytes a member
// for the order, so a dataset of N samples of m members costs about
// N·(key length + 4) + 8·N·m bytes.
type objectNames struct {
	keys    string   // every sample's key, in sample ID order
	keyEnds []uint32 // end of sample i's key in keys
	members memberTable
	order   []uint64 // sample<<16 | member, in name order
}

// buildObjectNames reads every sample's key (chunk by chunk, so a
// partial index loads each table once) and sorts the dataset's members by
// name.
func buildObjectNames(ctx context.Context, ix *chunkindex.Index, m memberTable) (*objectNames, error) {
	n := ix.NumSamples()
	if n >= 1<<47 {
		return nil, fmt.Errorf("%w: %d samples are more than the S3 face lists", httperr.ErrNotImplemented, n)
	}
	var b strings.Builder
	on := &objectNames{keyEnds: make([]uint32, n), members: m, order: make([]uint64, 0, m.Len())}
	ids := make([]int, 0, 1024)
	for c := range ix.NumChunks() {
		first, cnt := ix.ChunkRange(c)
		ids = ids[:0]
		for id := first; id < first+cnt; id++ {
			ids = append(ids, id)
		}
		smp, err := ix.Samples(ctx, ids)
		if err != nil {
			return nil, err
		}
		for i, s := range smp {
			if uint64(b.Len())+uint64(len(s.Key)) > 1<<32-1 {
				return nil, fmt.Errorf("%w: the dataset's keys exceed 4 GiB", httperr.ErrNotImplemented)
			}
			b.WriteString(s.Key)
			on.keyEnds[first+i] = uint32(b.Len())
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	on.keys = b.String()
	for id := range n {
		for j := range m.Count(id) {
			on.order = append(on.order, uint64(id)<<16|uint64(j))
		}
	}
	cmp := func(a, b uint64) int {
		ka, ea := on.parts(a)
		kb, eb := on.parts(b)
		return compareNames(ka, ea, kb, eb)
	}
	// A pack of ordered keys lists in sample order already.
	if !slices.IsSortedFunc(on.order, cmp) {
		slices.SortFunc(on.order, cmp)
	}
	return on, nil
}

// key is sample id's key.
func (on *objectNames) key(id int) string {
	start := uint32(0)
	if id > 0 {
		start = on.keyEnds[id-1]
	}
	return on.keys[start:on.keyEnds[id]]
}

// parts is the key and extension of the member e names.
func (on *objectNames) parts(e uint64) (key, ext string) {
	id, j := int(e>>16), int(e&0xffff)
	return on.key(id), on.members.Member(id, j).Ext
}

// Len is the number of objects.
func (on *objectNames) Len() int { return len(on.order) }

// Name is the i-th object's name in listing order.
func (on *objectNames) Name(i int) string {
	k, e := on.parts(on.order[i])
	return objectName(k, e)
}

// Entry is the sample and member of the i-th object in listing order.
func (on *objectNames) Entry(i int) (sample, member int) {
	e := on.order[i]
	return int(e >> 16), int(e & 0xffff)
}

// objectName is the name of a sample's member: key.ext, or the key alone
// when the member has no extension — the member's path in its tar, by the
// key rules of docs/format.md §1.2.
func objectName(key, ext string) string {
	if ext == "" {
		return key
	}
	return key + "." + ext
}

// compareNames compares objectName(k1, e1) with objectName(k2, e2) as
// byte strings without building either: sorting a dataset's names calls
// it tens of millions of times.
func compareNames(k1, e1, k2, e2 string) int {
	n := min(len(k1), len(k2))
	if c := strings.Compare(k1[:n], k2[:n]); c != 0 {
		return c
	}
	a := nameCursor{k: k1, e: e1, i: n}
	b := nameCursor{k: k2, e: e2, i: n}
	for {
		ca, oka := a.next()
		cb, okb := b.next()
		switch {
		case !oka && !okb:
			return 0
		case !oka:
			return -1
		case !okb:
			return 1
		case ca != cb:
			if ca < cb {
				return -1
			}
			return 1
		}
	}
}

// nameCursor walks the bytes of key, then "." and ext if ext is not empty.
type nameCursor struct {
	k, e string
	i    int
}

func (c *nameCursor) next() (byte, bool) {
	i := c.i
	c.i++
	switch {
	case i < len(c.k):
		return c.k[i], true
	case c.e == "":
		return 0, false
	case i == len(c.k):
		return '.', true
	case i-len(c.k)-1 < len(c.e):
		return c.e[i-len(c.k)-1], true
	}
	return 0, false
}
