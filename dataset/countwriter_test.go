package dataset

// countWriter counts the bytes written to it: what a ChunkWriter writes
// for a member (TestHeaderSize).
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) {
	*c += countWriter(len(p))
	return len(p), nil
}
