package mds

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/internal/keys"
)

// Format is Mosaic Streaming's MDS format. Its zero value is ready.
type Format struct{}

// Name is "mds".
func (Format) Name() string { return "mds" }

// Detect reports whether objs hold an index.json and MDS shards.
func (Format) Detect(objs []format.Object) bool {
	var index, shard bool
	for _, o := range objs {
		base := path.Base(o.Key)
		index = index || base == "index.json"
		shard = shard || strings.HasSuffix(base, ".mds") || strings.Contains(base, ".mds.")
	}
	return index && shard
}

// indexFiles are the index.json files that describe the source: the
// root's alone when there is one, else every index.json that has none
// in a directory above it, in key order (partitions, each a stream).
func indexFiles(objs []format.Object) []format.Object {
	has := make(map[string]bool) // directories with an index.json
	for _, o := range objs {
		if path.Base(o.Key) == "index.json" {
			has[path.Dir(o.Key)] = true
		}
	}
	var out []format.Object
	for _, o := range objs {
		if path.Base(o.Key) != "index.json" {
			continue
		}
		covered := false
		for d := path.Dir(o.Key); d != "." && !covered; {
			d = path.Dir(d)
			covered = has[d]
		}
		if !covered {
			out = append(out, o)
		}
	}
	return out
}

// Index reads the source's index.json files (never a shard) and makes
// each shard a chunk.
func (Format) Index(ctx context.Context, st format.Store, objs []format.Object, opt format.Options) (*format.Layout, error) {
	lim := opt.Limits.WithDefaults()
	par := opt.Parallel
	if par <= 0 {
		par = 16
	}
	byKey := make(map[string]format.Object, len(objs))
	for _, o := range objs {
		byKey[o.Key] = o
	}
	idxs := indexFiles(objs)
	if len(idxs) == 0 {
		return nil, fmt.Errorf("%w: no index.json in the source", format.ErrInvalid)
	}
	for _, o := range idxs {
		if o.Size > lim.MetaBytes {
			return nil, fmt.Errorf("%w: %s: %d bytes, over the metadata limit of %d", format.ErrInvalid, o.Key, o.Size, lim.MetaBytes)
		}
	}
	parsed := make([]*indexJSON, len(idxs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(par)
	for i, o := range idxs {
		g.Go(func() error {
			b := make([]byte, o.Size)
			if err := st.ReadRange(gctx, o.Key, o.ETag, 0, b); err != nil {
				return fmt.Errorf("mds: reading %s: %w", o.Key, err)
			}
			x, err := parseIndex(o.Key, b)
			parsed[i] = x
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}

	var (
		m       meta
		cols    columns
		colsOf  string // the index.json and shard the columns were taken from
		lay     = &format.Layout{}
		stems   = make(map[string]string)
		encs    []encoding
		present bool
	)
	for i, x := range parsed {
		dir := path.Dir(idxs[i].Key)
		if dir == "." {
			dir = ""
		}
		for j, s := range x.Shards {
			where := fmt.Sprintf("%s: shard %d", idxs[i].Key, j)
			if s.Format != "mds" {
				return nil, fmt.Errorf("%w: %s is of format %q; only mds is read", format.ErrUnsupported, where, s.Format)
			}
			if s.Version != 2 {
				return nil, fmt.Errorf("%w: %s: version %d; only 2 is read", format.ErrUnsupported, where, s.Version)
			}
			c := columns{s.ColumnNames, s.ColumnEncodings, s.ColumnSizes}
			if !present {
				var err error
				if encs, err = checkColumns(where, c, lim); err != nil {
					return nil, err
				}
				cols, colsOf, present = c, where, true
			} else if !cols.equal(c) {
				return nil, fmt.Errorf("%w: %s has other columns than %s: one dataset has one set of columns", format.ErrInvalid, where, colsOf)
			}
			sh, obj, err := checkShard(where, dir, s, encs, byKey, lim)
			if err != nil {
				return nil, err
			}
			if sh.Samples == 0 {
				continue // nothing to serve; the MDS writer never writes one
			}
			if other, ok := stems[sh.Stem]; ok {
				return nil, fmt.Errorf("%w: %s and %s both name the shard %s", format.ErrInvalid, other, where, sh.Stem)
			}
			stems[sh.Stem] = where
			m.Shards = append(m.Shards, sh)
			lay.Chunks = append(lay.Chunks, format.Chunk{Object: obj.Key, ETag: obj.ETag, Size: obj.Size, Samples: sh.Samples})
		}
	}
	if !present {
		return nil, fmt.Errorf("%w: %s: no shards", format.ErrInvalid, idxs[0].Key)
	}
	exts, err := memberExts(cols.names, encs, opt.Members)
	if err != nil {
		return nil, err
	}
	for i, n := range cols.names {
		m.Columns = append(m.Columns, columnMeta{Name: n, Encoding: cols.encodings[i], Ext: exts[i]})
	}
	d, err := newDecoder(&m)
	if err != nil {
		return nil, err
	}
	total := 0
	for _, sh := range m.Shards {
		total += sh.Samples
	}
	lay.Keys = make([]string, 0, total)
	for c, sh := range m.Shards {
		if _, r := d.Extent(c, nil); r > lim.ChunkBytes {
			return nil, fmt.Errorf("%w: shard %s: its %d samples take up to %d bytes resident, over the chunk limit of %d",
				format.ErrInvalid, sh.Object, sh.Samples, r, lim.ChunkBytes)
		}
		lay.Keys = keys.Append(lay.Keys, sh.Stem, 0, sh.Samples, keyWidth)
	}
	if opt.Tokens != "" || opt.Text != "" {
		// A token dataset: the one time indexing reads shards.
		if m.Tokens, err = d.indexTokens(ctx, st, lay.Chunks, opt, lim, par); err != nil {
			return nil, err
		}
		if d, err = newDecoder(&m); err != nil {
			return nil, err
		}
		for c, sh := range m.Shards {
			if _, r := d.Extent(c, nil); r > lim.ChunkBytes {
				return nil, fmt.Errorf("%w: shard %s: its %d samples take up to %d bytes resident with their tokens, over the chunk limit of %d",
					format.ErrInvalid, sh.Object, sh.Samples, r, lim.ChunkBytes)
			}
		}
	}
	lay.Meta, err = json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return lay, nil
}

// checkColumns checks a shard's columns and returns their encodings.
func checkColumns(where string, c columns, lim format.Limits) ([]encoding, error) {
	n := len(c.names)
	if n == 0 || len(c.encodings) != n || len(c.sizes) != n {
		return nil, fmt.Errorf("%w: %s: %d column names, %d encodings, %d sizes", format.ErrInvalid, where, n, len(c.encodings), len(c.sizes))
	}
	if n > lim.Fields {
		return nil, fmt.Errorf("%w: %s: %d columns, over the limit of %d", format.ErrInvalid, where, n, lim.Fields)
	}
	seen := make(map[string]bool)
	encs := make([]encoding, n)
	for i, name := range c.names {
		if seen[name] {
			return nil, fmt.Errorf("%w: %s: column %q twice", format.ErrInvalid, where, name)
		}
		seen[name] = true
		e, err := parseEncoding(c.encodings[i])
		if err != nil {
			return nil, fmt.Errorf("%w: %s: column %q: %v", format.ErrUnsupported, where, name, err)
		}
		switch {
		case e.size > 0 && (c.sizes[i] == nil || *c.sizes[i] != e.size):
			return nil, fmt.Errorf("%w: %s: column %q of %s has a size of %s; the encoding's is %d", format.ErrInvalid, where, name, c.encodings[i], sizeText(c.sizes[i]), e.size)
		case e.size == 0 && c.sizes[i] != nil:
			return nil, fmt.Errorf("%w: %s: column %q of %s has a fixed size of %d; its values vary", format.ErrInvalid, where, name, c.encodings[i], *c.sizes[i])
		}
		encs[i] = e
	}
	return encs, nil
}

func sizeText(p *int64) string {
	if p == nil {
		return "null"
	}
	return strconv.FormatInt(*p, 10)
}

// checkShard checks one shard of the index against the listing and the
// limits, and returns what decoding it needs and its object.
func checkShard(where, dir string, s shardJSON, encs []encoding, byKey map[string]format.Object, lim format.Limits) (shardMeta, format.Object, error) {
	bad := func(f string, a ...any) (shardMeta, format.Object, error) {
		return shardMeta{}, format.Object{}, fmt.Errorf("%w: %s: %s", format.ErrInvalid, where, fmt.Sprintf(f, a...))
	}
	if s.RawData == nil {
		return bad("no raw_data")
	}
	rawKey, ok := cleanRel(dir, s.RawData.Basename)
	if !ok {
		return bad("raw_data names %q, which is not a file of the source", s.RawData.Basename)
	}
	sh := shardMeta{Stem: strings.TrimSuffix(rawKey, ".mds"), Raw: s.RawData.Bytes}
	if s.Samples < 0 || s.Samples > int64(lim.ChunkSamples) {
		return bad("%d samples (the limit is %d)", s.Samples, lim.ChunkSamples)
	}
	sh.Samples = int(s.Samples)
	// The shard's offsets are u32, and it is decoded whole in memory.
	if sh.Raw < 0 || sh.Raw > math.MaxUint32 || sh.Raw > lim.ChunkBytes {
		return bad("raw_data of %d bytes (the limit is %d)", sh.Raw, min(lim.ChunkBytes, math.MaxUint32))
	}
	var fixed, vars int64
	for _, e := range encs {
		if e.size > 0 {
			fixed += e.size
		} else {
			vars++
		}
	}
	n := int64(sh.Samples)
	sh.VarBytes = sh.Raw - 4 - 4*(n+1) - n*(4*vars+fixed)
	if sh.VarBytes < 0 {
		return bad("raw_data of %d bytes cannot hold %d samples of its columns", sh.Raw, n)
	}
	if vars == 0 {
		sh.VarBytes = 0
	}
	want, obj := sh.Raw, format.Object{}
	if c := s.Compression; c != nil && *c != "" {
		kind, _, _ := strings.Cut(*c, ":")
		switch kind {
		case "zstd", "gz", "bz2":
		default:
			return shardMeta{}, format.Object{}, fmt.Errorf("%w: %s: compression %q (zstd, gz and bz2 are read)", format.ErrUnsupported, where, *c)
		}
		if s.ZipData == nil {
			return bad("compression %q without zip_data", *c)
		}
		zipKey, ok := cleanRel(dir, s.ZipData.Basename)
		if !ok {
			return bad("zip_data names %q, which is not a file of the source", s.ZipData.Basename)
		}
		if o, ok := byKey[zipKey]; ok {
			sh.Compression, sh.Zip, want, obj = kind, s.ZipData.Bytes, s.ZipData.Bytes, o
		}
		if obj.Key == "" {
			if _, ok := byKey[rawKey]; !ok {
				return bad("names the shard %s, which the source does not have", zipKey)
			}
		}
	}
	if obj.Key == "" {
		o, ok := byKey[rawKey]
		if !ok {
			return bad("names the shard %s, which the source does not have", rawKey)
		}
		obj = o
	}
	if obj.Size != want {
		return bad("%s is %d bytes; index.json says %d", obj.Key, obj.Size, want)
	}
	sh.Object = obj.Key
	return sh, obj, nil
}

// memberExts is each column's member extension: Options.Members', else
// its encoding's; an extension two columns would share is qualified by
// the column's name ("caption.txt"). pkl columns are served only when
// named in Options.Members: Brand never unpickles, and a reader that
// does runs the shard's code.
func memberExts(names []string, encs []encoding, members map[string]string) ([]string, error) {
	for n := range members {
		found := false
		for _, c := range names {
			found = found || c == n
		}
		if !found {
			return nil, fmt.Errorf("%w: a member is named for column %q, which the dataset does not have (it has %s)", format.ErrInvalid, n, strings.Join(names, ", "))
		}
	}
	exts := make([]string, len(names))
	count := make(map[string]int)
	for i, n := range names {
		ext, ok := members[n]
		if !ok {
			if encs[i].ext == "pkl" {
				return nil, fmt.Errorf("%w: column %q is pickled (pkl): Brand serves it only as raw bytes, when its member is named (Options.Members, e.g. %q: \"pkl\")", format.ErrUnsupported, n, n)
			}
			ext = encs[i].ext
		}
		exts[i] = ext
		count[ext]++
	}
	seen := make(map[string]string)
	for i, n := range names {
		if count[exts[i]] > 1 {
			exts[i] = n + "." + exts[i]
		}
		if !validExt(exts[i]) {
			return nil, fmt.Errorf("%w: column %q: %q cannot be a member's extension (name the column's member in Options.Members)", format.ErrInvalid, n, exts[i])
		}
		if o, ok := seen[exts[i]]; ok {
			return nil, fmt.Errorf("%w: columns %q and %q both become %q members", format.ErrInvalid, o, n, exts[i])
		}
		seen[exts[i]] = n
	}
	return exts, nil
}

// validExt reports whether ext can follow a key and a dot in a tar
// member's name, read back as that extension.
func validExt(ext string) bool {
	return ext != "" && ext[0] != '.' && !strings.ContainsAny(ext, "/\x00") && len(ext) <= 255
}

// keyWidth is the digits a sample's number in its shard is padded to.
const keyWidth = 6

// keyOf is sample i of the shard stem's key.
func keyOf(stem string, i int) string { return keys.One(stem, i, keyWidth) }

// Open returns the decoder of a dataset Index described in meta.
func (Format) Open(b []byte) (format.Decoder, error) {
	var m meta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: mds meta: %v", format.ErrInvalid, err)
	}
	d, err := newDecoder(&m)
	if err != nil || m.Tokens == nil {
		return d, err
	}
	return tokenDecoder{d}, nil
}
