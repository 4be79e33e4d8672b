//go:build !(cgo && brand_libav)

package video

import (
	"errors"
	"strings"
	"testing"
)

// TestNoDecoder: a build without libavcodec refuses video with an error
// naming the build that decodes it, after the checks that need no
// decoder.
func TestNoDecoder(t *testing.T) {
	dec := NewDecoder(Options{})
	defer dec.Close()
	run := Run{Stream: Stream{Codec: "avc1", Width: 64, Height: 64}, Packets: []Packet{{PTS: 0, Key: true, Data: []byte{1}}}, First: true}
	err := dec.Decode(t.Context(), run, []int64{0}, func(Frame) error { return nil })
	if !errors.Is(err, ErrNoDecoder) || !strings.Contains(err.Error(), "brand_libav") {
		t.Fatalf("%v", err)
	}
	if Available() || !strings.Contains(Build(), "brand_libav") {
		t.Fatalf("Build() = %q", Build())
	}
	if s := dec.Stats(); s.Live != 0 || s.Opened != 0 {
		t.Fatalf("%+v", s)
	}
}
