package chunkcache

// newBuffer allocates a chunk buffer of length n and capacity c (at least
// n). Chunk buffers are large, live as long as the process and are reused
// for chunk after chunk, so the cost that matters is the first touch of
// their pages, which the store's reads pay as page faults. Where the
// platform offers it, the buffer is backed by huge pages: one fault per
// 2 MiB instead of one per 4 KiB.
func newBuffer(n, c int64) []byte {
	b := make([]byte, n, max(n, c))
	adviseHugePages(b[:cap(b)])
	return b
}
