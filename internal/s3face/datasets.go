package s3face

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/internal/batch/reader"
	"github.com/brandgw/brand/internal/batch/respond"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/s3face/s3proto"
	"github.com/brandgw/brand/internal/server/httperr"
)

// datasetBuckets is what the face keeps of the datasets it serves as
// buckets: what it derived from the version each last served, and where
// GETs last read each dataset, for its read-ahead.
type datasetBuckets struct {
	mu       sync.Mutex
	versions map[string]*datasetVersion // by dataset name
	last     map[string]lastChunk       // by dataset name
}

// datasetVersion is what the face derives from one dataset version, each
// part built on first use and kept.
type datasetVersion struct {
	ds      *catalog.Dataset
	members kept[memberTable]
	names   kept[*objectNames]
}

// kept is a value built once it is built at all: the value, or a failure
// that building again cannot mend, is kept; any other failure (a store
// that did not answer) is returned, and the next caller builds again. One
// caller builds at a time; the others wait for it.
type kept[T any] struct {
	mu   sync.Mutex
	v    T
	err  error
	done bool
}

// get returns the value kept, or builds it with build, which reports
// whether its failure is final.
func (k *kept[T]) get(build func() (v T, final bool, err error)) (T, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.done {
		v, final, err := build()
		if err != nil && !final {
			return v, err
		}
		k.v, k.err, k.done = v, err, true
	}
	return k.v, k.err
}

// lastChunk is the chunk a dataset's last GET read.
type lastChunk struct {
	id    string // the dataset version
	chunk int
}

// serveDataset answers the operations on the bucket list and on datasets.
func (f *Face) serveDataset(w http.ResponseWriter, r *http.Request, o s3proto.Op) error {
	switch o.Name {
	case "ListBuckets":
		f.listBuckets(w, r)
		return nil
	case "HeadBucket", "GetBucketLocation", "ListObjectsV2", "ListObjects", "GetObject", "HeadObject":
	default:
		return notImplemented(o)
	}
	d, err := f.dataset(o.Bucket)
	if err != nil {
		return err
	}
	switch o.Name {
	case "HeadBucket":
		w.WriteHeader(http.StatusOK)
	case "GetBucketLocation":
		s3proto.WriteXML(w, http.StatusOK, s3proto.LocationConstraint{})
	case "ListObjectsV2", "ListObjects":
		return f.listDataset(w, r, o, d)
	default:
		return f.datasetObject(w, r, o, d)
	}
	return nil
}

// dataset is the bucket's dataset, the version a request reads now.
func (f *Face) dataset(bucket string) (*datasetVersion, error) {
	if !slices.Contains(f.versions.Names(), bucket) {
		return nil, s3proto.ErrorOf(s3proto.NoSuchBucket, "The specified bucket does not exist")
	}
	ds, err := f.versions.Version(bucket)
	if err != nil {
		return nil, err
	}
	b := &f.datasets
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.versions[bucket]
	if d == nil || d.ds != ds {
		// A reloaded dataset's names and members are built anew; the old
		// version's go with the last request that holds them.
		d = &datasetVersion{ds: ds}
		b.versions[bucket] = d
	}
	return d, nil
}

// memberTable is the dataset version's member table, made once it is
// made at all (a dataset without one is told so for good): a tar
// dataset's read from the store, a dataset served in place's by reading
// and decoding every chunk (decodeMembers). Its making outlives the
// request that starts it (others wait for it); the read of a tar
// dataset's table is bounded by the fetch timeout, each chunk's read of
// one served in place by the reader's bounds.
func (f *Face) memberTable(ctx context.Context, d *datasetVersion) (memberTable, error) {
	return d.members.get(func() (memberTable, bool, error) {
		if d.ds.InPlace != nil {
			start := time.Now()
			m, final, err := f.decodeMembers(context.WithoutCancel(ctx), d.ds)
			if err != nil {
				f.log.Warn().Err(err).Str("dataset", d.ds.Name).Msg("S3 face: the members of a dataset served in place could not be read")
				return nil, final, err
			}
			f.log.Info().Str("dataset", d.ds.Name).Int("chunks", d.ds.Index.NumChunks()).Int("objects", m.Len()).
				Float64("duration_ms", float64(time.Since(start))/float64(time.Millisecond)).Msg("S3 face: chunks read to list a dataset served in place")
			return m, false, nil
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.timeout)
		defer cancel()
		m, err := stored.ReadMembers(rctx, d.ds.Store, d.ds.Index)
		final := errors.Is(err, stored.ErrNoMembers)
		if final {
			err = s3proto.ErrorOf(s3proto.NotImplemented, fmt.Sprintf(
				"dataset %q has no member table (%s), which its files are listed and found by: "+
					"run `brand index` over its chunks to add one (docs/format.md §5)", d.ds.Name, chunkindex.MembersKey))
		}
		if err != nil {
			f.log.Warn().Err(err).Str("dataset", d.ds.Name).Msg("S3 face: member table unavailable")
			return nil, final, err
		}
		return m, false, nil
	})
}

// objectNames is the dataset version's objects in listing order, built
// once (a dataset too large to list is told so for good; a sample table a
// cluster node could not read is read again next time).
func (f *Face) objectNames(ctx context.Context, d *datasetVersion) (*objectNames, error) {
	m, err := f.memberTable(ctx, d)
	if err != nil {
		return nil, err
	}
	return d.names.get(func() (*objectNames, bool, error) {
		start := time.Now()
		names, err := buildObjectNames(context.WithoutCancel(ctx), d.ds.Index, m)
		if err == nil {
			f.log.Info().Str("dataset", d.ds.Name).Int("objects", names.Len()).
				Float64("duration_ms", float64(time.Since(start))/float64(time.Millisecond)).Msg("S3 face: object names sorted")
		}
		return names, errors.Is(err, httperr.ErrNotImplemented), err
	})
}

// listDataset answers ListObjects(V2) of a dataset: from its member table
// alone (a dataset served in place: from its chunks' members, read on its
// first listing).
func (f *Face) listDataset(w http.ResponseWriter, r *http.Request, o s3proto.Op, d *datasetVersion) error {
	p, err := s3proto.ParseListParams(r.URL.Query(), o.Name == "ListObjects")
	if err != nil {
		return err
	}
	names, err := f.objectNames(r.Context(), d)
	if err != nil {
		return err
	}
	page, err := s3proto.List(names, p)
	if err != nil {
		return err
	}
	res := s3proto.NewListBucketResult(o.Bucket, p, page)
	res.Contents = make([]s3proto.Object, len(page.Contents))
	ix := d.ds.Index
	modified := filesModified(d.ds)
	for i, n := range page.Contents {
		id, j := names.Entry(n)
		m := names.members.Member(id, j)
		res.Contents[i] = s3proto.Object{Key: names.Name(n), Size: m.Size, LastModified: modified, ETag: memberETag(ix, id, m)}
	}
	s3proto.WriteXML(w, http.StatusOK, res.Encode())
	return nil
}

// filesModified is the time of a dataset version's files: its index
// object's, which a re-pack writes anew. The tar headers' times are not
// used: `brand pack` writes none (they read 1970, so that any
// If-Modified-Since answered 304 after a re-pack too), and a copy of a
// file into a new pack may keep an old one.
func filesModified(ds *catalog.Dataset) time.Time {
	if !ds.IndexModified.IsZero() {
		return ds.IndexModified
	}
	return ds.LoadedAt
}

// memberETag is an object's ETag: a hash of what identifies its bytes —
// its chunk object and that object's ETag, where it lies in the sample and
// its size and CRC32C. It changes when the dataset is re-packed or the
// chunk rewritten, and is not an MD5 (16 hex digits, not 32, so that no
// client takes it for one and checks the body against it).
func memberETag(ix *chunkindex.Index, id int, m chunkindex.MemberInfo) string {
	ch := ix.Chunk(ix.ChunkOf(id))
	h := fnv.New64a()
	var b [28]byte
	binary.LittleEndian.PutUint64(b[0:], uint64(id))
	binary.LittleEndian.PutUint64(b[8:], uint64(m.DataOffset))
	binary.LittleEndian.PutUint64(b[16:], uint64(m.Size))
	binary.LittleEndian.PutUint32(b[24:], m.CRC)
	h.Write([]byte(ch.Key))
	h.Write([]byte{0})
	h.Write([]byte(ch.ETag))
	h.Write([]byte{0})
	h.Write(b[:])
	return fmt.Sprintf(`"%016x"`, h.Sum64())
}

// datasetObject answers GetObject and HeadObject of a dataset file: its
// sample is read as a batch's are, and the file's bytes written from the
// pinned chunk. A tar dataset's file is found in its member table, before
// its sample is read (a HEAD or a 304 reads no chunk); a file of a
// dataset served in place is found in its sample's members, once read.
func (f *Face) datasetObject(w http.ResponseWriter, r *http.Request, o s3proto.Op, d *datasetVersion) error {
	ctx := r.Context()
	var m memberTable
	if d.ds.InPlace == nil {
		var err error
		if m, err = f.memberTable(ctx, d); err != nil {
			return err
		}
	}
	noSuchKey := s3proto.ErrorOf(s3proto.NoSuchKey, "The specified key does not exist.")
	key, ext := chunkindex.SplitKey(o.Key)
	ix := d.ds.Index
	id, ok, err := ix.Lookup(ctx, key)
	if err != nil {
		return err
	}
	if !ok {
		return noSuchKey
	}
	var (
		mi  chunkindex.MemberInfo
		res *reader.Result
	)
	if m != nil {
		j, ok := m.Find(id, ext)
		if !ok {
			return noSuchKey
		}
		mi = m.Member(id, j)
	} else {
		if res, mi, ok, err = f.decodedMember(ctx, d.ds, id, ext); err != nil {
			return err
		}
		defer res.Release()
		if !ok {
			return noSuchKey
		}
	}
	s, done, err := s3proto.Prepare(w, r, s3proto.ObjectMeta{ETag: memberETag(ix, id, mi), Modified: filesModified(d.ds), Size: mi.Size, Ext: ext, CRC32C: &mi.CRC})
	if done || err != nil {
		return err
	}
	if res == nil {
		if res, _, err = f.readSamples(ctx, d.ds, []int{id}); err != nil {
			return err
		}
		defer res.Release()
	}
	f.sawChunk(d.ds, ix.ChunkOf(id))
	body := sliceBuffers(res.Parts, mi.DataOffset+s.Start, s.N)
	written, err := f.writer.Write(w, r, w.Header().Get("Content-Type"), respond.Payload{Parts: body, N: s.N, Relieve: res.Relieve, Status: s.Status})
	f.bytes.Add(float64(written))
	if err != nil {
		f.log.Debug().Err(err).Msg("S3 object not completed")
	}
	return nil
}

// decodedMember reads sample id of ds, a dataset served in place, and
// finds its member of extension ext: the read (to be released) and the
// member, if the sample has it.
func (f *Face) decodedMember(ctx context.Context, ds *catalog.Dataset, id int, ext string) (*reader.Result, chunkindex.MemberInfo, bool, error) {
	res, keys, err := f.readSamples(ctx, ds, []int{id})
	if err != nil {
		return nil, chunkindex.MemberInfo{}, false, err
	}
	var mi chunkindex.MemberInfo
	found := false
	err = describeSamples(res.Parts, keys, func(_ int, ms []chunkindex.MemberInfo) error {
		for _, m := range ms {
			if m.Ext == ext {
				mi, found = m, true
			}
		}
		return nil
	})
	if err != nil {
		res.Release()
		return nil, mi, false, err
	}
	return res, mi, found, nil
}

// sawChunk records that a GET read chunk c of ds and, when it follows the
// chunk read before it — a per-file reader listing a dataset packed in
// key order reads chunk after chunk — starts loading the chunks after it
// that this node reads itself, so that their files are hits. The loads
// are preloads (internal/cache/preload); a GET never waits for one.
func (f *Face) sawChunk(ds *catalog.Dataset, c int) {
	if f.readAhead == 0 {
		return
	}
	b := &f.datasets
	b.mu.Lock()
	prev, ok := b.last[ds.Name]
	b.last[ds.Name] = lastChunk{id: ds.ID(), chunk: c}
	b.mu.Unlock()
	if !ok || prev.id != ds.ID() || prev.chunk+1 != c {
		return
	}
	for next := c + 1; next <= c+f.readAhead && next < ds.Index.NumChunks(); next++ {
		if f.cluster.Local(ds, next) {
			f.preload.Load(ds.ChunkRequest(next), nil)
		}
	}
}

// sliceBuffers is bytes [off, off+n) of bufs, without copying.
func sliceBuffers(bufs [][]byte, off, n int64) [][]byte {
	out := make([][]byte, 0, 1)
	for _, b := range bufs {
		if n == 0 {
			break
		}
		if off >= int64(len(b)) {
			off -= int64(len(b))
			continue
		}
		b = b[off:]
		off = 0
		if int64(len(b)) > n {
			b = b[:n]
		}
		out = append(out, b)
		n -= int64(len(b))
	}
	return out
}
