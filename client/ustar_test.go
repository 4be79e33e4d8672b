package client

import (
	"archive/tar"
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestChecksums: the word-at-a-time sums equal archive/tar's byte-wise ones
// (format.go, computeChecksum) on random blocks, all-0xff blocks and zeros.
func TestChecksums(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	blocks := make([]*[blockSize]byte, 0, 102)
	var zero, ones [blockSize]byte
	for i := range ones {
		ones[i] = 0xff
	}
	blocks = append(blocks, &zero, &ones)
	for range 100 {
		var b [blockSize]byte
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		blocks = append(blocks, &b)
	}
	for n, b := range blocks {
		var wantU, wantS int64
		for i, c := range b {
			if i >= offChksum && i < endChksum {
				c = ' '
			}
			wantU += int64(c)
			wantS += int64(int8(c))
		}
		if u, s := checksums(b); u != wantU || s != wantS {
			t.Errorf("block %d: checksums %d, %d; want %d, %d", n, u, s, wantU, wantS)
		}
	}
}

// FuzzPlainHeader: whatever header block plainHeader reads, archive/tar
// reads as a regular file with the same name and size, without error. With
// fix set the block's checksum is made valid first, so that the fuzzer
// explores the fields behind it.
func FuzzPlainHeader(f *testing.F) {
	for _, h := range []tar.Header{
		{Name: "train/n01/x.jpg", Size: 1234, Mode: 0o644, Format: tar.FormatUSTAR},
		{Name: strings.Repeat("p/", 60) + "y.cls", Size: 1, Mode: 0o600, Format: tar.FormatUSTAR},
		{Name: "g.jpg", Size: 99, Mode: 0o644, Format: tar.FormatGNU},
		{Name: "u.jpg", Size: 7, Mode: 0o644, Uname: "u", Gname: "g", Format: tar.FormatPAX},
	} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		h.Typeflag = tar.TypeReg
		if err := tw.WriteHeader(&h); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes()[:blockSize], false)
		f.Add(buf.Bytes()[:blockSize], true)
	}
	f.Fuzz(func(t *testing.T, b []byte, fix bool) {
		var blk [blockSize]byte
		copy(blk[:], b)
		if fix {
			sum, _ := checksums(&blk)
			copy(blk[offChksum:endChksum], fmt.Sprintf("%06o\x00 ", sum))
		}
		name, size, ok := plainHeader(&blk)
		if !ok {
			return
		}
		h, err := tar.NewReader(bytes.NewReader(blk[:])).Next()
		if err != nil {
			t.Fatalf("plainHeader read %q, %d bytes; archive/tar: %v", name, size, err)
		}
		if h.Typeflag != tar.TypeReg || h.Name != name || h.Size != size {
			t.Fatalf("plainHeader read %q, %d bytes; archive/tar type %q, %q, %d bytes", name, size, h.Typeflag, h.Name, h.Size)
		}
	})
}
