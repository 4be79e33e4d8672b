//go:build !unix

package s3backend

import (
	"fmt"
	"io/fs"
)

// fileETag derives a local file's ETag from its size and modification time.
func fileETag(fi fs.FileInfo) string {
	return fmt.Sprintf("%x-%x", fi.Size(), fi.ModTime().UnixNano())
}
