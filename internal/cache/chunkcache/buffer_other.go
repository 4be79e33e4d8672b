//go:build !linux

package chunkcache

// adviseHugePages does nothing where madvise(MADV_HUGEPAGE) does not exist.
func adviseHugePages(b []byte) {}
