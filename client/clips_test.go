package client

import (
	"archive/tar"
	"bytes"
	"fmt"
	"testing"
	"unsafe"

	"github.com/brandgw/brand/transform"
)

// clipTar is a clip batch as the gateway writes it: per clip a
// frames.npy of (t, h, w, 3), its label and a JSON member of one length.
func clipTar(t *testing.T, n, frames, h, w int) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	put := func(name string, b []byte) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(b)), Mode: 0o644}); err != nil {
			t.Fatal(err)
		}
		tw.Write(b)
	}
	for i := range n {
		key := fmt.Sprintf("cls%d/video/seg%06d", i%2, i)
		arr := append([]byte(nil), transform.NPYHeader(frames, h, w, 3)...)
		for j := range frames * h * w * 3 {
			arr = append(arr, byte(i*7+j))
		}
		put(key+".frames.npy", arr)
		put(key+".cls", []byte(fmt.Sprint(i%2)))
		put(key+".json", []byte(fmt.Sprintf(`{"sample":%d}   `, i)))
	}
	tw.Close()
	return buf.Bytes()
}

// A clip batch's frames are one (B, T, H, W, 3) array on the batch's
// buffer, each clip's where its member is: no copy.
func TestClipsViewTheBuffer(t *testing.T) {
	body := clipTar(t, 3, 4, 6, 8)
	samples, err := DecodeTar(body)
	if err != nil {
		t.Fatal(err)
	}
	b := &Batch{Samples: samples, buf: body}
	c, err := b.Clips()
	if err != nil {
		t.Fatal(err)
	}
	f := c.Arrays["frames"]
	if f.DType != "|u1" || fmt.Sprint(f.Shape) != "[3 4 6 8 3]" || f.Size != 4*6*8*3 || f.Stride < f.Size {
		t.Fatalf("frames: %s %v size %d stride %d", f.DType, f.Shape, f.Size, f.Stride)
	}
	if uintptr(unsafe.Pointer(&f.Data[0])) < uintptr(unsafe.Pointer(&body[0])) ||
		uintptr(unsafe.Pointer(&f.Data[len(f.Data)-1])) > uintptr(unsafe.Pointer(&body[len(body)-1])) {
		t.Fatal("the frames are a copy, not a view of the batch's buffer")
	}
	for i, s := range samples {
		npy, _ := ParseNPY(s.Files[Frames])
		if !bytes.Equal(f.Clip(i), npy.Data) {
			t.Fatalf("clip %d differs from its member", i)
		}
		if c.Labels[i] != i%2 || c.Keys[i] != s.Key || !bytes.HasPrefix(c.JSON[i], []byte(fmt.Sprintf(`{"sample":%d}`, i))) {
			t.Fatalf("clip %d: label %d key %s json %s", i, c.Labels[i], c.Keys[i], c.JSON[i])
		}
	}
	// Without the buffer (a batch made otherwise), the arrays are copied.
	copied, err := (&Batch{Samples: samples}).Clips()
	if err != nil || copied.Arrays["frames"].Stride != f.Size || !bytes.Equal(copied.Arrays["frames"].Clip(2), f.Clip(2)) {
		t.Fatalf("copied: %v", err)
	}
	// A clip of other members is refused.
	delete(samples[1].Files, "cls")
	if _, err := (&Batch{Samples: samples, buf: body}).Clips(); err == nil {
		t.Fatal("a clip without its label was taken")
	}
}
