package dataset

import "github.com/brandgw/brand/internal/errkind"

var (
	// ErrEmpty reports a source with nothing to pack or index: no files
	// under the directory, or no .tar objects under the prefix.
	ErrEmpty = errkind.New(errkind.Internal, "dataset: nothing to pack or index")

	// ErrExists reports a Pack into a store that already holds a dataset
	// index, refused unless PackOptions.Overwrite is set: rewriting the
	// chunks under a published index would break whoever serves it.
	ErrExists = errkind.New(errkind.Internal, "dataset: the destination already holds a dataset")
)
