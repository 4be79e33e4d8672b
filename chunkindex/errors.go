package chunkindex

import "github.com/brandgw/brand/internal/errkind"

// Errors returned by this package. They are wrapped with detail (which field,
// which sample, how many bytes), so compare them with errors.Is.
var (
	// ErrCorrupt reports an encoded index or manifest that fails its checksum or
	// violates an invariant of the format.
	ErrCorrupt = errkind.New(errkind.Upstream, "chunkindex: corrupt")
	// ErrTruncated reports an encoded index shorter than its header says.
	ErrTruncated = errkind.New(errkind.Internal, "chunkindex: truncated")
	// ErrVersion reports an index or manifest written by a newer format version
	// (or with feature flags) this build does not understand.
	ErrVersion = errkind.New(errkind.Internal, "chunkindex: unsupported version")
	// ErrInvalid reports arguments to New (or a Manifest) that do not describe a
	// valid index.
	ErrInvalid = errkind.New(errkind.Internal, "chunkindex: invalid index")

	// ErrDuplicateKey reports a sample key that occurs twice: non-consecutively
	// in one tar, twice in one ChunkWriter, or in two samples of an index.
	ErrDuplicateKey = errkind.New(errkind.Internal, "duplicate sample key")
	// ErrUnsupportedMember reports a tar member that cannot be part of a sample
	// (links, devices, sparse files) or whose name has no sample key.
	ErrUnsupportedMember = errkind.New(errkind.Internal, "unsupported tar member")
	// ErrWriterClosed is returned by a ChunkWriter used after Close.
	ErrWriterClosed = errkind.New(errkind.Internal, "chunkindex: chunk writer closed")
)
