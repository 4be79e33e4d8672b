package s3backend

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// fileIdentity is fi's device, inode and times, the change time included.
func fileIdentity(fi fs.FileInfo) identity {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return identity{modified: fi.ModTime(), changed: fi.ModTime()}
	}
	return identity{dev: st.Dev, ino: st.Ino, modified: fi.ModTime(), changed: time.Unix(st.Ctim.Unix())}
}

// openNoFollow opens the file key names under dir one path component at a
// time, each relative to the directory opened before it and none through
// a symbolic link, so that the file opened is inside dir whatever renames
// happen meanwhile. The last component is opened without blocking (a
// FIFO would wait for a writer); the caller checks it is a regular file.
// A symbolic link anywhere on the path is fs.ErrNotExist.
func openNoFollow(dir, key string) (*os.File, error) {
	name := filepath.Join(dir, filepath.FromSlash(key))
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	parts := strings.Split(key, "/")
	for i, part := range parts {
		flags := unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW
		if i < len(parts)-1 {
			flags |= unix.O_DIRECTORY
		} else {
			flags |= unix.O_NONBLOCK
		}
		next, err := unix.Openat(fd, part, flags, 0)
		unix.Close(fd)
		if errors.Is(err, unix.ELOOP) || (errors.Is(err, unix.ENOTDIR) && i < len(parts)-1) {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: a symbolic link is not followed", fs.ErrNotExist)}
		}
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: name, Err: err}
		}
		fd = next
	}
	return os.NewFile(uintptr(fd), name), nil
}
