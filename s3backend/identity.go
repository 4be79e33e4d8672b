package s3backend

import (
	"io/fs"
	"time"
)

// IdentityETags returns a view of the directory whose Stat and List
// report each file's identity ETag — its size and modification time
// (etag.go) — rather than its content ETag, reading nothing: what an
// index of files served in place records, so that a same-size edit of a
// file's middle, which no content ETag of its ends can see, fails every
// read pinned to it with ErrChanged (the receiver is unchanged). Reads
// are those of the plain view: a read pinned to an identity ETag checks
// the open file's identity before and after it reads, whichever view it
// goes through.
//
// A file modified less than its settle time before (SettleOf) is listed
// Unsettled: another write within the same timestamp tick would keep its
// identity, so a caller that records it waits for it to settle first.
func (l *Local) IdentityETags() *Local {
	v := *l
	v.live, v.identity = false, true
	return &v
}

// fineSettle is the settle time of a file whose modification time has a
// fraction of a second: the file systems that keep nanoseconds (ext4,
// XFS, btrfs, tmpfs, NFS from them) stamp writes from the kernel's coarse
// clock, which moves a tick (1 to 10 ms) at a time.
const fineSettle = 50 * time.Millisecond

// SettleOf is how long after a modification at mtime a file's identity
// is settled: any later write is stamped with a later time. A time of
// whole seconds is taken to come from a file system that keeps seconds
// (or two: FAT), and settles after DefaultSettle; a finer one after
// 50 ms. Both assume the file system's clock is this machine's, as a
// local disk's is and NTP keeps a file server's.
func SettleOf(mtime time.Time) time.Duration {
	if mtime.Nanosecond() == 0 {
		return DefaultSettle
	}
	return fineSettle
}

// identityInfo is an IdentityETags view's ObjectInfo of the file fi
// describes, as of now.
func identityInfo(key string, fi fs.FileInfo, now time.Time) ObjectInfo {
	mtime := fi.ModTime()
	return ObjectInfo{Key: key, Size: fi.Size(), ETag: identityETag(fi), ModTime: mtime.UTC(),
		Unsettled: now.Sub(mtime) < SettleOf(mtime)}
}
