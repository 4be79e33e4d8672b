package s3backend_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/brandgw/brand/s3backend"
)

// Open a dataset root, store an object, and read part of it back pinned to
// the version that was stored.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "brand-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	ctx := context.Background()
	// "s3://bucket/prefix" works the same way, configured by
	// s3backend.ConfigFromEnv().
	st, err := s3backend.Open(ctx, dir, s3backend.Config{})
	if err != nil {
		log.Fatal(err)
	}
	data := "sample bytes in a chunk"
	info, err := st.Put(ctx, "chunks/000000.tar", strings.NewReader(data), int64(len(data)))
	if err != nil {
		log.Fatal(err)
	}

	p := make([]byte, 5)
	if err := st.ReadRange(ctx, info.Key, info.ETag, 7, p); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s (%d bytes stored)\n", p, info.Size)

	// Once the object is replaced, a read pinned to the old ETag fails.
	if _, err := st.Put(ctx, "chunks/000000.tar", strings.NewReader("rewritten"), 9); err != nil {
		log.Fatal(err)
	}
	err = st.ReadRange(ctx, info.Key, info.ETag, 0, p)
	fmt.Println(errors.Is(err, s3backend.ErrChanged))
	// Output:
	// bytes (23 bytes stored)
	// true
}
