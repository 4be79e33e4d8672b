package chunkcache

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePageMin is the smallest buffer worth advising: a range shorter than
// two huge pages may not contain an aligned one.
const hugePageMin = 4 << 20

// adviseHugePages asks the kernel to back b with transparent huge pages
// (madvise MADV_HUGEPAGE), which matters where THP is enabled in "madvise"
// mode, the common default. Faulting in a chunk buffer then costs one
// fault per 2 MiB rather than 512; on virtual machines, where every fault
// is expensive, that is the difference between a cold epoch bound by the
// network and one bound by page faults (measured at fc7681a). The
// advice covers the page-aligned part of b; failure (THP disabled, an old
// kernel) leaves ordinary pages, which are correct, only slower.
func adviseHugePages(b []byte) {
	if len(b) < hugePageMin {
		return
	}
	page := uintptr(os.Getpagesize())
	p := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	start := int((page - p%page) % page)
	end := start + int(uintptr(len(b)-start)/page*page)
	_ = unix.Madvise(b[start:end], unix.MADV_HUGEPAGE)
}
