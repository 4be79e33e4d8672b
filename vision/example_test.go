package vision_test

import (
	"fmt"

	"github.com/brandgw/brand/vision"
)

// A Qwen2-VL-style rule: dynamic resolution, 14-pixel patches merged 2×2,
// its placeholder and the IDs around each image, at most 8 images a
// sequence.
func ExampleParseRule() {
	r, err := vision.ParseRule("min:3136,max:1003520,patch:14,merge:2,image:151655,start:151652,end:151653,images:8")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, wh := range [][2]int{{640, 480}, {1920, 1080}, {30, 30}} {
		w, h, err := r.Size(wh[0], wh[1])
		fmt.Printf("%d×%d → %d×%d, %d vision tokens, %v\n", wh[0], wh[1], w, h, r.Tokens(w, h), err)
	}
	_, err = vision.ParseRule("size:450x448,patch:14,image:1")
	fmt.Println(err)
	// Output:
	// 640×480 → 644×476, 391 vision tokens, <nil>
	// 1920×1080 → 1316×728, 1222 vision tokens, <nil>
	// 30×30 → 56×56, 4 vision tokens, <nil>
	// vision: invalid rule: size 450x448: each side a multiple of patch×merge (14) (vision="size:450x448,patch:14,image:1")
}
