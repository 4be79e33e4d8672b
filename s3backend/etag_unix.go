//go:build unix

package s3backend

import (
	"fmt"
	"io/fs"
	"syscall"
)

// fileETag derives a local file's ETag from its size, modification time
// and inode. The inode makes a file replaced by rename (as Put does) differ
// even when size and the coarse kernel timestamp are unchanged.
func fileETag(fi fs.FileInfo) string {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("%x-%x-%x", fi.Size(), fi.ModTime().UnixNano(), uint64(st.Ino))
	}
	return fmt.Sprintf("%x-%x", fi.Size(), fi.ModTime().UnixNano())
}
