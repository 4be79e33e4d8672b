package s3face

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/reader"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/quote"
	"github.com/brandgw/brand/internal/server/httperr"
)

// A dataset served in place (package format: Parquet, MDS, Megatron) has
// no member table: its samples' members — their names and sizes — exist
// once a chunk is decoded into its resident form, whose samples are runs
// of tar members as a tar chunk's are. So the face finds a file by
// reading its sample through the reader, as a batch does (the cache, the
// disk tier, a cluster's owners), and the member in the sample's tar
// bytes; and lists a dataset by reading every chunk once the same way,
// keeping what it found for the dataset version (decodedMembers).

// memberTable is what the face knows of a dataset version's files: each
// sample's members in archive order. A tar dataset's is its member table
// (chunkindex.Members, read from the store); a dataset served in place
// has its chunks' decoded members (decodedMembers).
type memberTable interface {
	Len() int
	Count(id int) int
	Member(id, j int) chunkindex.MemberInfo
	Find(id int, ext string) (j int, ok bool)
}

// decodedMembers is the member table of a dataset served in place, made
// by decoding every chunk (decodeMembers): 16 bytes a member and 4 a
// sample, as a tar dataset's member table costs 24 and 4.
type decodedMembers struct {
	exts    []string
	starts  []uint32 // sample i's members are [starts[i], starts[i+1])
	recs    []uint32 // per member: extension, data offset, size, CRC32C
	modTime time.Time
}

func (m *decodedMembers) Len() int         { return len(m.recs) / 4 }
func (m *decodedMembers) Count(id int) int { return int(m.starts[id+1] - m.starts[id]) }

func (m *decodedMembers) Member(id, j int) chunkindex.MemberInfo {
	r := m.recs[4*(int(m.starts[id])+j):]
	return chunkindex.MemberInfo{Ext: m.exts[r[0]], DataOffset: int64(r[1]), Size: int64(r[2]), ModTime: m.modTime, CRC: r[3]}
}

func (m *decodedMembers) Find(id int, ext string) (int, bool) {
	for j := range m.Count(id) {
		if m.exts[m.recs[4*(int(m.starts[id])+j)]] == ext {
			return j, true
		}
	}
	return 0, false
}

// Bounds of reading a dataset served in place to list it.
const (
	// listChunks is how many chunks are read at once.
	listChunks = 4
	// listReadBytes bounds one read's samples by their chunk's resident
	// size: a larger chunk is read in parts (each pinning the chunk, a
	// hit after the first), so that no read nears --max-batch-bytes.
	listReadBytes = 16 << 20
	// maxListedMembers is the most members a listing holds: the table's
	// offsets are 32-bit.
	maxListedMembers = 1<<32 - 1
)

// decodeMembers reads every chunk of ds, a dataset served in place,
// through the reader, listChunks at a time, and describes its samples'
// members. Each chunk is read as a batch reads it: a hit if cached, else
// loaded once (on a cluster, from its owner). A chunk damaged at rest
// fails the listing for good (final); any other failure may pass later.
func (f *Face) decodeMembers(ctx context.Context, ds *catalog.Dataset) (_ *decodedMembers, final bool, _ error) {
	ix := ds.Index
	perChunk := make([][][]chunkindex.MemberInfo, ix.NumChunks())
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(listChunks)
	for c := range ix.NumChunks() {
		g.Go(func() error {
			first, n := ix.ChunkRange(c)
			parts := int(min(int64(n), max(1, ds.ChunkSize(c)/listReadBytes+1)))
			for p := range parts {
				lo, hi := first+p*n/parts, first+(p+1)*n/parts
				ids := make([]int, 0, hi-lo)
				for id := lo; id < hi; id++ {
					ids = append(ids, id)
				}
				ms, err := f.readMembers(gctx, ds, ids)
				if err != nil {
					return err
				}
				perChunk[c] = append(perChunk[c], ms...)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, errors.Is(err, catalog.ErrCorrupt), err
	}
	m := &decodedMembers{starts: make([]uint32, 1, ix.NumSamples()+1), modTime: time.Unix(ix.InPlace().Created, 0).UTC()}
	extID := map[string]uint32{}
	for _, chunk := range perChunk {
		for _, sample := range chunk {
			for _, mi := range sample {
				x, ok := extID[mi.Ext]
				if !ok {
					x = uint32(len(m.exts))
					extID[mi.Ext] = x
					m.exts = append(m.exts, mi.Ext)
				}
				m.recs = append(m.recs, x, uint32(mi.DataOffset), uint32(mi.Size), mi.CRC)
			}
			if m.Len() > maxListedMembers {
				return nil, true, fmt.Errorf("%w: dataset %s has more than %d files, the most the S3 face lists", httperr.ErrNotImplemented, ds.Name, maxListedMembers)
			}
			m.starts = append(m.starts, uint32(m.Len()))
		}
	}
	return m, false, nil
}

// readMembers reads samples ids of ds through the reader and describes
// each one's members.
func (f *Face) readMembers(ctx context.Context, ds *catalog.Dataset, ids []int) ([][]chunkindex.MemberInfo, error) {
	res, keys, err := f.readSamples(ctx, ds, ids)
	if err != nil {
		return nil, err
	}
	defer res.Release()
	out := make([][]chunkindex.MemberInfo, 0, len(ids))
	err = describeSamples(res.Parts, keys, func(_ int, ms []chunkindex.MemberInfo) error {
		out = append(out, ms)
		return nil
	})
	return out, err
}

// readSamples reads samples ids of ds whole through the reader, as a
// batch does, and returns their keys too. A sample of a chunk damaged at
// rest is an error wrapping catalog.ErrCorrupt: the face has no skip
// mode.
func (f *Face) readSamples(ctx context.Context, ds *catalog.Dataset, ids []int) (*reader.Result, []string, error) {
	smp, err := layout.NewSamples(ctx, ds, ids)
	if err != nil {
		return nil, nil, err
	}
	res, err := f.reader.Read(ctx, reader.Request{Samples: smp})
	if err != nil {
		return nil, nil, err
	}
	if len(res.MissingPos) > 0 {
		key := smp.Info[res.MissingPos[0]].Key
		res.Release()
		return nil, nil, fmt.Errorf("%w: sample %s of dataset %s is in a chunk damaged at rest", catalog.ErrCorrupt, quote.Input(key), ds.Name)
	}
	keys := make([]string, len(smp.Info))
	for i, in := range smp.Info {
		keys[i] = in.Key
	}
	return res, keys, nil
}

// describeSamples walks samples read back to back (parts: a read's
// bytes, split anywhere), each a run of tar members named key.ext after
// its key (keys, in order), and calls each with every sample's members:
// their extensions, where each one's data starts from its sample's
// start, its size, time and CRC32C.
func describeSamples(parts net.Buffers, keys []string, each func(i int, ms []chunkindex.MemberInfo) error) error {
	cr := &countingReader{r: append(net.Buffers(nil), parts...)}
	tr := tar.NewReader(cr)
	var (
		i     int
		start int64 // of sample i
		next  int64 // just past the last member's data and padding
		ms    []chunkindex.MemberInfo
	)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("S3 face: reading the members of sample %q: %w", keys[min(i, len(keys)-1)], err)
		}
		key, ext := chunkindex.SplitKey(h.Name)
		if i >= len(keys) || key != keys[i] {
			if len(ms) == 0 || i+1 >= len(keys) || key != keys[i+1] {
				return fmt.Errorf("S3 face: member %q where a member of sample %q was expected", h.Name, keys[min(i, len(keys)-1)])
			}
			if err := each(i, ms); err != nil {
				return err
			}
			i, start, ms = i+1, next, nil
		}
		data := cr.n
		crc := crc32.New(castagnoli)
		if _, err := io.Copy(crc, tr); err != nil {
			return fmt.Errorf("S3 face: reading member %q: %w", h.Name, err)
		}
		ms = append(ms, chunkindex.MemberInfo{Ext: ext, DataOffset: data - start, Size: h.Size, ModTime: h.ModTime.UTC(), CRC: crc.Sum32()})
		next = data + (h.Size+chunkindex.BlockSize-1)/chunkindex.BlockSize*chunkindex.BlockSize
	}
	if len(ms) == 0 || i != len(keys)-1 {
		return fmt.Errorf("S3 face: %d samples read, members found for %d", len(keys), i+min(len(ms), 1))
	}
	return each(i, ms)
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// countingReader counts the bytes read through it.
type countingReader struct {
	r net.Buffers
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
