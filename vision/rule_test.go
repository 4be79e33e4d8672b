package vision

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/testsupport/pythontest"
)

// TestParseRule: the spellings a job may give, and each refusal a bad
// request (errkind.Invalid) naming vision= and the part at fault.
func TestParseRule(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Rule
		err  string // a part of the error; "" for none
	}{
		{in: "size:448x448,patch:14,image:32000", want: Rule{Width: 448, Height: 448, Patch: 14, Merge: 1, Image: 32000, Start: -1, End: -1}},
		{in: "min:3136,max:1003520,patch:14,merge:2,image:151655,start:151652,end:151653,images:8",
			want: Rule{MinPixels: 3136, MaxPixels: 1003520, Patch: 14, Merge: 2, Image: 151655, Start: 151652, End: 151653, MaxImages: 8}},
		{in: "size:448x448,patch:14", err: "image: the placeholder token ID must be given"},
		{in: "size:448x448,image:1", err: "patch and merge must be given"},
		{in: "size:450x448,patch:14,image:1", err: "a multiple of patch×merge (14)"},
		{in: "size:448x448,min:1,max:9,patch:14,image:1", err: "not both or neither"},
		{in: "patch:14,image:1", err: "not both or neither"},
		{in: "min:900,max:800,patch:14,image:1", err: "1 ≤ min ≤ max"},
		{in: "min:1,max:100,patch:14,image:1", err: "less than one token's pixels"},
		{in: "size:448x448,patch:14,image:1,start:5", err: "start and end are given together"},
		{in: "size:448,patch:14,image:1", err: `size "448": WxH`},
		{in: "size:448x448,patch:14,image:1,colour:3", err: `unknown key "colour"`},
		{in: "size:448x448,patch:14,image:1,image:2", err: "image given twice"},
		{in: "size:448x448,patch:-1,image:1", err: "a non-negative integer"},
		{in: "size:448x448,patch:14,image:4294967296", err: "a token ID"},
		{in: "size:448x448,patch", err: `"patch" is not key:value`},
		{in: "", err: `"" is not key:value`},
	} {
		got, err := ParseRule(tc.in)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.in, err)
		case tc.err == "" && got != tc.want:
			t.Errorf("%q: %+v; want %+v", tc.in, got, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: %v; want an error with %q", tc.in, err, tc.err)
		case tc.err != "" && (!errors.Is(err, ErrRule) || !errkind.Has(err, errkind.Invalid) || !strings.Contains(err.Error(), "vision=")):
			t.Errorf("%q: %v: not ErrRule, a bad request naming vision=", tc.in, err)
		}
	}
}

// TestTokens: a fixed rule's images are all one count; the count is
// patches over merge².
func TestTokens(t *testing.T) {
	r, err := ParseRule("size:448x448,patch:14,merge:2,image:9")
	if err != nil {
		t.Fatal(err)
	}
	for _, wh := range [][2]int{{1, 1}, {640, 480}, {5000, 20}} {
		w, h, err := r.Size(wh[0], wh[1])
		if err != nil || w != 448 || h != 448 || r.Tokens(w, h) != 256 {
			t.Errorf("%v: %d×%d, %d tokens, %v; want 448×448, 256", wh, w, h, r.Tokens(w, h), err)
		}
	}
	if r.span(256) != 256 {
		t.Errorf("span without start and end: %d", r.span(256))
	}
}

// TestSizeIsSmartResize: a dynamic rule's sizes are Qwen2-VL's
// smart_resize's, run in Python (testdata/smart_resize.py), over sizes
// that round half way, clamp at both bounds, sit under one patch and
// past the aspect bound.
func TestSizeIsSmartResize(t *testing.T) {
	python := pythontest.Need(t, "scripts/ensure-pil.sh")
	type rule struct{ patch, merge, lo, hi int }
	rules := []rule{{14, 2, 56 * 56, 28 * 28 * 1280}, {14, 2, 4 * 28 * 28, 16 * 28 * 28}, {16, 1, 16 * 16, 64 * 64}, {14, 1, 1, 14 * 14 * 4}}
	sides := []int{1, 13, 14, 15, 27, 28, 29, 41, 42, 43, 56, 70, 99, 224, 300, 333, 448, 640, 1000, 1023, 2048, 3000, 4097}
	var cases [][5]int
	for _, r := range rules {
		for _, h := range sides {
			for _, w := range sides {
				cases = append(cases, [5]int{h, w, r.patch * r.merge, r.lo, r.hi})
			}
		}
	}
	cases = append(cases, [5]int{28, 28 * 201, 28, 784, 1 << 30}, [5]int{28, 28 * 200, 28, 784, 1 << 30})
	dir := t.TempDir()
	b, _ := json.Marshal(cases)
	if err := os.WriteFile(filepath.Join(dir, "cases.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, python, "testdata/smart_resize.py", filepath.Join(dir, "cases.json")).Output()
	if err != nil {
		t.Fatalf("smart_resize.py: %v", err)
	}
	var want []*[2]int
	if err := json.Unmarshal(out, &want); err != nil || len(want) != len(cases) {
		t.Fatalf("smart_resize.py gave %d answers (%v) for %d cases", len(want), err, len(cases))
	}
	for i, c := range cases {
		r := Rule{Patch: c[2], Merge: 1, MinPixels: c[3], MaxPixels: c[4], Image: 1, Start: -1, End: -1}
		w, h, err := r.Size(c[1], c[0])
		switch {
		case want[i] == nil && !errors.Is(err, ErrImageBounds):
			t.Errorf("%d×%d, factor %d, pixels [%d, %d]: %d×%d, %v; the reference refuses it", c[1], c[0], c[2], c[3], c[4], w, h, err)
		case want[i] != nil && (err != nil || h != want[i][0] || w != want[i][1]):
			t.Errorf("%d×%d, factor %d, pixels [%d, %d]: %d×%d, %v; want %d×%d", c[1], c[0], c[2], c[3], c[4], w, h, err, want[i][1], want[i][0])
		}
	}
}
