package chunkindex

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Object keys of a dataset's metadata, relative to the dataset root.
const (
	IndexKey    = "_brand/index"
	ManifestKey = "_brand/manifest.json"

	// metaPrefix is reserved for metadata; no chunk key may start with it.
	metaPrefix = "_brand/"
)

// Manifest format identity.
const (
	ManifestFormat        = "brand-dataset"
	ManifestFormatVersion = 1
)

// Manifest is the human-readable description stored beside the index at
// ManifestKey. The index is the source of truth for serving; the manifest
// says what the dataset is and how it was built, and names the exact index
// (IndexID) it describes, so a reader can tell a stale manifest from a
// current one. Encode it with MarshalManifest and read it with ParseManifest.
type Manifest struct {
	Format        string    `json:"format"`         // always ManifestFormat
	FormatVersion int       `json:"format_version"` // ManifestFormatVersion
	Name          string    `json:"name"`
	Created       time.Time `json:"created"`  // RFC 3339, UTC, whole seconds
	IndexID       string    `json:"index_id"` // Index.ID of the index at IndexKey
	Chunks        int       `json:"chunks"`
	Samples       int       `json:"samples"`
	TotalBytes    int64     `json:"total_bytes"` // sum of chunk sizes
	// AvgSampleBytes is the mean sample range length (headers included),
	// rounded down; it sizes caches and batches.
	AvgSampleBytes   int64  `json:"avg_sample_bytes"`
	ChunkTargetBytes int64  `json:"chunk_target_bytes"` // packing target; 0 if indexed from existing shards
	Shuffled         bool   `json:"shuffled"`           // samples were shuffled across chunks when packed
	ShuffleSeed      uint64 `json:"shuffle_seed"`       // meaningful only if Shuffled
	Source           string `json:"source"`             // where the samples came from
	Tool             string `json:"tool"`               // "brand <version>"
	// InPlace describes a dataset served in place (package format): its
	// format, where its data is, its fields. Absent for a tar dataset.
	InPlace *ManifestInPlace `json:"in_place,omitempty"`
}

// ManifestInPlace is what a manifest says of a dataset served in place.
type ManifestInPlace struct {
	// Format is the format's name ("parquet", "mds", "megatron"), as the
	// index's in-place section names it.
	Format string `json:"format"`
	// Data is the URL of the root the chunks' objects are under when it
	// is not the dataset's root (an index written to another prefix or
	// bucket than read-only data); empty when they are under the root.
	Data string `json:"data,omitempty"`
	// Fields are what a job can select (columns=) and the member each
	// becomes.
	Fields []ManifestField `json:"fields"`
	// Skipped are the source's files the format took for its kind and
	// left out of the index, in key order, each with why: a video in a
	// container the index does not read, and with `brand index
	// --skip-bad-files` each file it could not index. A file named here
	// is in no chunk; what to do about it is its reason's.
	Skipped []ManifestSkipped `json:"skipped,omitempty"`
}

// ManifestSkipped is a file of a dataset served in place left out of its
// index, and why.
type ManifestSkipped struct {
	Key    string `json:"key"`
	Reason string `json:"reason"`
}

// ManifestField is one field of a dataset served in place.
type ManifestField struct {
	Name string `json:"name"`
	Ext  string `json:"ext,omitempty"` // empty: by each value (an image's magic bytes or path)
	Type string `json:"type,omitempty"`
}

// NewManifest returns a manifest whose format fields and index-derived fields
// (IndexID, Chunks, Samples, TotalBytes, AvgSampleBytes) describe ix. The
// caller fills in the rest.
func NewManifest(name string, ix *Index) Manifest {
	m := Manifest{
		Format:        ManifestFormat,
		FormatVersion: ManifestFormatVersion,
		Name:          name,
		IndexID:       ix.ID(),
		Chunks:        ix.NumChunks(),
		Samples:       ix.NumSamples(),
		TotalBytes:    ix.TotalBytes(),
	}
	if m.Samples > 0 {
		m.AvgSampleBytes = ix.SampleBytes() / int64(m.Samples)
		if ix.Deferred() {
			// Samples' sizes are known once decoded: the bound's mean.
			m.AvgSampleBytes = ix.TotalBytes() / int64(m.Samples)
		}
	}
	return m
}

// Describes reports whether m describes ix: same index ID and the same
// counts. A mismatch means the manifest and the index were not written
// together.
func (m *Manifest) Describes(ix *Index) error {
	want := NewManifest(m.Name, ix)
	switch {
	case m.IndexID != want.IndexID:
		return fmt.Errorf("%w: manifest names index %s, index is %s", ErrCorrupt, m.IndexID, want.IndexID)
	case m.Chunks != want.Chunks || m.Samples != want.Samples || m.TotalBytes != want.TotalBytes:
		return fmt.Errorf("%w: manifest says %d chunks, %d samples, %d bytes; index has %d, %d, %d",
			ErrCorrupt, m.Chunks, m.Samples, m.TotalBytes, want.Chunks, want.Samples, want.TotalBytes)
	}
	return nil
}

// MarshalManifest validates m and encodes it as indented JSON ending in a
// newline. Created is written in UTC at whole seconds; an unset Format or
// FormatVersion is filled in.
func MarshalManifest(m Manifest) ([]byte, error) {
	if m.Format == "" {
		m.Format = ManifestFormat
	}
	if m.FormatVersion == 0 {
		m.FormatVersion = ManifestFormatVersion
	}
	m.Created = m.Created.UTC().Truncate(time.Second)
	if err := m.validate(ErrInvalid); err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("chunkindex: encoding manifest: %w", err)
	}
	return append(b, '\n'), nil
}

// ParseManifest decodes and validates a manifest. A manifest of a newer
// format version is an error wrapping ErrVersion; unknown fields are ignored,
// so later versions can add optional fields without breaking older readers.
func ParseManifest(b []byte) (Manifest, error) {
	var m Manifest
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("%w: manifest: %w", ErrCorrupt, err)
	}
	if d.More() {
		return Manifest{}, fmt.Errorf("%w: manifest: data after the JSON object", ErrCorrupt)
	}
	if m.Format != ManifestFormat {
		return Manifest{}, fmt.Errorf("%w: manifest format %q, want %q", ErrCorrupt, m.Format, ManifestFormat)
	}
	if m.FormatVersion > ManifestFormatVersion {
		return Manifest{}, fmt.Errorf("%w: manifest format version %d, this build reads version %d",
			ErrVersion, m.FormatVersion, ManifestFormatVersion)
	}
	if err := m.validate(ErrCorrupt); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

func (m *Manifest) validate(kind error) error {
	switch {
	case m.Format != ManifestFormat:
		return fmt.Errorf("%w: manifest format %q, want %q", kind, m.Format, ManifestFormat)
	case m.FormatVersion < 1 || m.FormatVersion > ManifestFormatVersion:
		return fmt.Errorf("%w: manifest format version %d", kind, m.FormatVersion)
	case !isIndexID(m.IndexID):
		return fmt.Errorf("%w: manifest index_id %q is not 16 lower-case hex digits", kind, m.IndexID)
	case m.Chunks < 0 || m.Samples < 0 || m.TotalBytes < 0 || m.AvgSampleBytes < 0 || m.ChunkTargetBytes < 0:
		return fmt.Errorf("%w: manifest has a negative count or size", kind)
	case m.Samples > 0 && m.Chunks == 0:
		return fmt.Errorf("%w: manifest has %d samples in no chunks", kind, m.Samples)
	case m.InPlace != nil && m.InPlace.Format == "":
		return fmt.Errorf("%w: manifest in_place names no format", kind)
	}
	return nil
}

// FormatKey is where the description of a dataset served in place
// (format.Layout.Meta) is stored for the index whose ID is id: one object
// per index version, never overwritten, so a gateway reading the current
// index never finds another version's description. The index holds its
// SHA-256 (InPlace.Meta).
func FormatKey(id string) string { return metaPrefix + "format/" + id }

func isIndexID(s string) bool {
	if len(s) != 16 {
		return false
	}
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
