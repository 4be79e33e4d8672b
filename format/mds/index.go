package mds

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/brandgw/brand/format"
)

// indexJSON is an index.json, version 2, as the MDS writer writes it.
type indexJSON struct {
	Version *int        `json:"version"`
	Shards  []shardJSON `json:"shards"`
}

type shardJSON struct {
	Format          string    `json:"format"`
	Version         int       `json:"version"`
	Samples         int64     `json:"samples"`
	ColumnNames     []string  `json:"column_names"`
	ColumnEncodings []string  `json:"column_encodings"`
	ColumnSizes     []*int64  `json:"column_sizes"`
	Compression     *string   `json:"compression"`
	RawData         *fileJSON `json:"raw_data"`
	ZipData         *fileJSON `json:"zip_data"`
}

type fileJSON struct {
	Basename string `json:"basename"`
	Bytes    int64  `json:"bytes"`
}

// parseIndex reads the index.json b (named name in errors), whose shards
// are in dir.
func parseIndex(name string, b []byte) (*indexJSON, error) {
	var x indexJSON
	if err := json.Unmarshal(b, &x); err != nil {
		return nil, fmt.Errorf("%w: %s: not an MDS index: %v", format.ErrInvalid, name, err)
	}
	if x.Version == nil || *x.Version != 2 {
		v := "none"
		if x.Version != nil {
			v = fmt.Sprint(*x.Version)
		}
		return nil, fmt.Errorf("%w: %s: version %s; only 2 is read", format.ErrUnsupported, name, v)
	}
	return &x, nil
}

// columns are a shard's columns as the index names them.
type columns struct {
	names, encodings []string
	sizes            []*int64
}

func (c columns) equal(o columns) bool {
	if len(c.names) != len(o.names) || len(c.encodings) != len(o.encodings) || len(c.sizes) != len(o.sizes) {
		return false
	}
	for i := range c.names {
		if c.names[i] != o.names[i] || c.encodings[i] != o.encodings[i] || (c.sizes[i] == nil) != (o.sizes[i] == nil) ||
			(c.sizes[i] != nil && *c.sizes[i] != *o.sizes[i]) {
			return false
		}
	}
	return true
}

// cleanRel is the object key of basename in dir, or an error when the
// basename leaves the source (absolute, "..", empty parts).
func cleanRel(dir, basename string) (string, bool) {
	if basename == "" || strings.HasPrefix(basename, "/") || strings.Contains(basename, "\\") {
		return "", false
	}
	for _, p := range strings.Split(basename, "/") {
		if p == "" || p == "." || p == ".." {
			return "", false
		}
	}
	return path.Join(dir, basename), true
}
