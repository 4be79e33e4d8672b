//go:build !linux

package s3backend

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

// fileIdentity is fi's times where the platform's are not read: the
// modification time stands for the change time.
func fileIdentity(fi fs.FileInfo) identity {
	return identity{modified: fi.ModTime(), changed: fi.ModTime()}
}

// openNoFollow opens key's file under dir if no component of its path is
// a symbolic link, looked at before the open: where openat with
// O_NOFOLLOW is not used, a link made in between is not seen.
func openNoFollow(dir, key string) (*os.File, error) {
	name := filepath.Join(dir, filepath.FromSlash(key))
	ok, err := linkFree(dir, path.Clean(key))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: a symbolic link is not followed", fs.ErrNotExist)}
	}
	return os.Open(name)
}
