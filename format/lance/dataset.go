package lance

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/brandgw/brand/format"
)

// A Version is one manifest of a dataset's listing.
type Version struct {
	Version uint64
	Key     string // relative to the dataset's root: "_versions/…manifest"
	Size    int64
	ETag    string
}

// Versions finds the manifests in a dataset's listing (keys relative to
// its root), oldest first. Both naming schemes are read: V2, whose name
// is 2^64-1 minus the version in 20 digits (the default since LanceDB
// 0.10), and V1, the version itself. latest_version_hint.json is only a
// hint for a store that cannot list, and a listing makes it unneeded.
// Detached versions (a "d" prefix) are no version of the dataset's and
// are passed over; a version named twice is an error.
func Versions(objs []format.Object) ([]Version, error) {
	var vs []Version
	seen := map[uint64]string{}
	for _, o := range objs {
		name, ok := strings.CutPrefix(o.Key, "_versions/")
		if !ok || strings.Contains(name, "/") || strings.HasPrefix(name, "d") {
			continue
		}
		stem, ok := strings.CutSuffix(name, ".manifest")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(stem, 10, 64)
		if err != nil {
			continue
		}
		v := n
		if len(stem) == 20 {
			v = math.MaxUint64 - n
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("%w: lance: version %d is named twice (%s, %s)", format.ErrInvalid, v, prev, o.Key)
		}
		seen[v] = o.Key
		vs = append(vs, Version{Version: v, Key: o.Key, Size: o.Size, ETag: o.ETag})
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i].Version < vs[j].Version })
	return vs, nil
}

// ReadManifest reads and parses the manifest of v, whose size the
// listing gave and is bounded (by MaxManifestBytes and limit) before it
// is read. The manifest must be of the version its name says.
func ReadManifest(ctx context.Context, st format.Store, v Version, limit int64) (*Manifest, error) {
	if v.Size < manifestTail+4 || v.Size > MaxManifestBytes {
		return nil, fmt.Errorf("%w: lance manifest %s: %d bytes (a manifest is %d to %d)", format.ErrInvalid, v.Key, v.Size, manifestTail+4, MaxManifestBytes)
	}
	if v.Size > limit {
		return nil, overLimit("lance manifest "+v.Key, uint64(v.Size), limit)
	}
	b := make([]byte, v.Size)
	if err := st.ReadRange(ctx, v.Key, v.ETag, 0, b); err != nil {
		return nil, fmt.Errorf("lance manifest %s: %w", v.Key, err)
	}
	m, err := ParseManifest(v.Key, b)
	if err != nil {
		return nil, err
	}
	if m.Version != v.Version {
		return nil, fmt.Errorf("%w: lance manifest %s: of version %d, named %d", format.ErrInvalid, v.Key, m.Version, v.Version)
	}
	return m, nil
}
