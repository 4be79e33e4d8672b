package video_test

import (
	"context"
	"fmt"

	"github.com/brandgw/brand/transform"
	"github.com/brandgw/brand/transform/video"
)

// An index entry's packets (as format/video/mp4 gives them) and the
// bytes of the runs Cover plans are what a caller has; this is how the
// transform stage turns a window's clips of one video into tensors.
func Example() {
	var (
		stream  video.Stream       // codec, size, avcC/hvcC/av1C, rotation
		index   []video.PacketInfo // every packet's pts, dts, keyframe flag
		packets func(video.Span) []video.Packet
		budget  video.Budget // memory.Manager.Decodes
	)
	pipeline, _ := transform.New("clip-train", transform.Builtins()[transform.ImagenetTrain], transform.Options{})
	dec := video.NewDecoder(video.Options{Budget: budget})
	defer dec.Close()

	// Two overlapping clips of 4 frames, each drawn its own crop and flip.
	clips := []video.Clip{
		{Frames: []int64{0, 512, 1024, 1536}, Key: transform.SampleKey(7, "episodes", 0, 10)},
		{Frames: []int64{1024, 1536, 2048, 2560}, Key: transform.SampleKey(7, "episodes", 0, 11)},
	}
	c, err := video.NewClips(pipeline, stream, clips, video.THWC, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	spans, err := video.Cover(index, c.Want())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, sp := range spans {
		run := video.Run{Stream: stream, Packets: packets(sp), First: sp.First}
		// Every packet is decoded (they are references); only the frames
		// the clips name are converted and handed to Put.
		if err := dec.Decode(context.Background(), run, c.WantIn(run), c.Put); err != nil {
			fmt.Println(err)
			return
		}
	}
	npys, err := c.Out() // one (4, 224, 224, 3) uint8 .npy per clip
	fmt.Println(len(npys), err)
}
