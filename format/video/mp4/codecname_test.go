package mp4

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/testsupport/videotest"
)

// TestCodecNamed: a file of a codec Brand does not read is refused naming
// the codec it is, as the esds's object type states it where the sample
// entry alone does not say (FFmpeg writes MJPEG, MPEG-2 and PNG in MP4 as
// "mp4v" entries, MPEG-4 part 2 too), each written by the ffmpeg command.
func TestCodecNamed(t *testing.T) {
	ffmpeg, _ := videotest.Tools(t)
	dir := t.TempDir()
	cases := []struct {
		name string
		args []string
		says string
	}{
		{"mjpeg", []string{"-c:v", "mjpeg", "-pix_fmt", "yuvj420p"}, "Motion JPEG (sample entry \"mp4v\", object type 0x6c)"},
		{"mpeg4", []string{"-c:v", "mpeg4"}, "MPEG-4 part 2 (sample entry \"mp4v\", object type 0x20)"},
		{"mpeg2", []string{"-c:v", "mpeg2video"}, "MPEG-2 video (sample entry \"mp4v\", object type 0x61)"},
		{"mpeg1", []string{"-c:v", "mpeg1video", "-r", "25"}, "MPEG-1 video (sample entry \"mp4v\", object type 0x6a)"},
		{"png", []string{"-c:v", "png"}, "PNG (sample entry \"mp4v\", object type 0x6d)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".mp4")
			args := []string{"-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-f", "lavfi", "-i", "testsrc2=size=64x48:rate=25:duration=1"}
			videotest.Run(t, ffmpeg, append(append(args, tc.args...), path)...)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Index(context.Background(), Bytes(b), int64(len(b)), Limits{})
			if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("%v; want ErrUnsupported saying %q", err, tc.says)
			}
		})
	}
}

// TestObjectType: the esds's object type indication, read through the
// descriptors' variable-length sizes and the ES_Descriptor's optional
// fields; an entry whose esds is missing or damaged is named by its
// sample entry alone.
func TestObjectType(t *testing.T) {
	esds := func(flags byte, extra []byte, oti byte) []byte {
		dcd := []byte{0x04, 13, oti, 0x11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
		es := append(append([]byte{0, 1, flags}, extra...), dcd...)
		return mkbox("esds", fullbox(0, 0), []byte{0x03, 0x80, 0x80, 0x80, byte(len(es))}, es)
	}
	cases := []struct {
		name string
		body []byte
		oti  byte
		ok   bool
	}{
		{"plain", esds(0, nil, 0x6c), 0x6c, true},
		{"with every optional field", esds(0x80|0x40|0x20, []byte{0, 2, 3, 'a', 'b', 'c', 0, 4}, 0x20), 0x20, true},
		{"after another box", append(mkbox("btrt", make([]byte, 12)), esds(0, nil, 0x61)...), 0x61, true},
		{"no esds", mkbox("btrt", make([]byte, 12)), 0, false},
		{"cut off", esds(0, nil, 0x6c)[:18], 0, false},
		{"a URL past the end", esds(0x40, []byte{200}, 0x6c), 0, false},
		{"another descriptor first", mkbox("esds", fullbox(0, 0), []byte{0x05, 1, 0}), 0, false},
	}
	for _, tc := range cases {
		oti, ok := objectType(tc.body)
		if oti != tc.oti || ok != tc.ok {
			t.Errorf("%s: %#x %v, want %#x %v", tc.name, oti, ok, tc.oti, tc.ok)
		}
	}
}
