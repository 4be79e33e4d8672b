package bucket

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []Shape
		err  string
	}{
		{in: "512x768", want: []Shape{{H: 512, W: 768}}},
		{in: "512x768, 768x512,64x64", want: []Shape{{H: 512, W: 768}, {H: 768, W: 512}, {H: 64, W: 64}}},
		{in: "", err: "no buckets"},
		{in: "512", err: "not HxW"},
		{in: "512x", err: "not HxW"},
		{in: "0x512", err: "sides are 1..8192"},
		{in: "9000x512", err: "sides are 1..8192"},
		{in: "512x512,512x512", err: "listed twice"},
	} {
		got, err := Parse(tc.in)
		if tc.err != "" {
			if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q) = %v, want an ErrSpec saying %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if back, _ := Parse(Format(got)); !slices.Equal(back, got) {
			t.Errorf("Format(%v) does not parse back", got)
		}
	}
}

func TestPresets(t *testing.T) {
	for _, tc := range []struct {
		name     string
		n        int
		square   Shape
		multiple int
	}{
		{"sdxl", 41, Shape{H: 1024, W: 1024}, 64},
		{"sdxl-768", 41, Shape{H: 768, W: 768}, 48},
		{"sdxl-512", 41, Shape{H: 512, W: 512}, 32},
	} {
		s, err := Parse(tc.name)
		if err != nil || len(s) != tc.n || !slices.Contains(s, tc.square) {
			t.Fatalf("preset %s: %d buckets, %v; want %d holding %v", tc.name, len(s), err, tc.n, tc.square)
		}
		area := tc.square.Pixels()
		for _, b := range s {
			if b.H%tc.multiple != 0 || b.W%tc.multiple != 0 {
				t.Errorf("preset %s: bucket %v is not of multiples of %d", tc.name, b, tc.multiple)
			}
			// Every bucket is about the square's area (SDXL's are within
			// 6 % below and 10 % above 1024²).
			if r := float64(b.Pixels()) / float64(area); r < 0.9 || r > 1.1 {
				t.Errorf("preset %s: bucket %v is %.2f of %v's pixels", tc.name, b, r, tc.square)
			}
		}
	}
}

func TestNearest(t *testing.T) {
	s, _ := Parse("sdxl")
	idx := func(sh Shape) int { return slices.Index(s, sh) }
	for _, tc := range []struct {
		w, h int
		want Shape
	}{
		{1000, 1000, Shape{H: 1024, W: 1024}},
		{4000, 3000, Shape{H: 896, W: 1152}},
		{3000, 4000, Shape{H: 1152, W: 896}},
		{1920, 1080, Shape{H: 768, W: 1344}},
		{10000, 100, Shape{H: 512, W: 2048}},
		{100, 10000, Shape{H: 2048, W: 512}},
		{1024, 960, Shape{H: 960, W: 1024}},
		{2000, 1000, Shape{H: 704, W: 1408}},
	} {
		if got := Nearest(tc.w, tc.h, s); got != idx(tc.want) {
			t.Errorf("Nearest(%dx%d) = %v, want %v", tc.w, tc.h, s[got], tc.want)
		}
	}
	// Ties go to the first listed: 2:1 and 1:2 buckets are equally far
	// from a square.
	tie := []Shape{{H: 100, W: 200}, {H: 200, W: 100}}
	if got := Nearest(50, 50, tie); got != 0 {
		t.Errorf("a tie went to bucket %d, want the first", got)
	}
	if got := Nearest(50, 50, []Shape{tie[1], tie[0]}); got != 0 {
		t.Errorf("a tie went to bucket %d, want the first", got)
	}
}

// TestNearestExact holds the integer comparison to the log distance
// wherever the two are not within rounding of a tie.
func TestNearestExact(t *testing.T) {
	s, _ := Parse("sdxl-512")
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		w, h := 1+r.IntN(8000), 1+r.IntN(8000)
		got := Nearest(w, h, s)
		d := func(b Shape) float64 {
			return abs(log(float64(w)/float64(h)) - log(float64(b.W)/float64(b.H)))
		}
		for i, b := range s {
			if d(b) < d(s[got])-1e-12 {
				t.Fatalf("Nearest(%dx%d) = %v, but %v (bucket %d) is nearer", w, h, s[got], b, i)
			}
		}
	}
}

func TestFitOf(t *testing.T) {
	b := Shape{H: 1024, W: 1024}
	for _, tc := range []struct {
		w, h int
		up   float64
		want Fit
	}{
		{1024, 1024, 1, Fits},
		{512, 512, 2, Fits},
		{511, 512, 2, TooSmall},
		{4000, 100, 2, TooSmall}, // the short side binds
		{0, 0, 2, NoImage},
	} {
		if got := FitOf(tc.w, tc.h, b, tc.up); got != tc.want {
			t.Errorf("FitOf(%dx%d, up %g) = %v, want %v", tc.w, tc.h, tc.up, got, tc.want)
		}
	}
}

func TestBudgetSizes(t *testing.T) {
	shapes := []Shape{{H: 1024, W: 1024}, {H: 512, W: 2048}, {H: 1344, W: 768}, {H: 256, W: 256}}
	got, err := Budget{Pixels: 4 << 20}.Sizes(shapes)
	if err != nil || !slices.Equal(got, []int{4, 4, 4, 64}) {
		t.Errorf("pixel budget: %v, %v", got, err)
	}
	// 1024² is 64×64 = 4096 tokens at f = 16; 1344×768 is 84×48 = 4032.
	got, err = Budget{Tokens: 16384, VAE: 8, Patch: 2}.Sizes(shapes)
	if err != nil || !slices.Equal(got, []int{4, 4, 4, 64}) {
		t.Errorf("token budget: %v, %v", got, err)
	}
	for _, b := range []Budget{{Pixels: 1 << 19}, {}, {Tokens: 100}} {
		if _, err := b.Sizes(shapes); !errors.Is(err, ErrSpec) {
			t.Errorf("budget %+v: %v, want ErrSpec", b, err)
		}
	}
}

// TestSteps holds the interleaving to its promise over random epochs:
// every full batch once, each bucket's positions taken in order, every
// bucket within one batch of its share at every step, and the same steps
// for the same seed.
func TestSteps(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 300 {
		nb := 1 + r.IntN(45)
		avail, per := make([]int, nb), make([]int, nb)
		for b := range nb {
			avail[b] = r.IntN(2000)
			if r.IntN(4) == 0 {
				avail[b] = r.IntN(20)
			}
			per[b] = 1 + r.IntN(16)
		}
		world := 1 + r.IntN(8)
		steps := Steps(avail, per, world, uint64(trial), 7)
		if again := Steps(avail, per, world, uint64(trial), 7); !slices.Equal(steps, again) {
			t.Fatal("two calls gave two interleavings")
		}
		m := make([]int, nb)
		total := 0
		for b := range nb {
			m[b] = avail[b] / (per[b] * world)
			total += m[b]
		}
		if len(steps) != total {
			t.Fatalf("trial %d: %d steps, want %d", trial, len(steps), total)
		}
		count := make([]int, nb)
		for i, s := range steps {
			if s.First != count[s.Bucket]*per[s.Bucket]*world {
				t.Fatalf("trial %d step %d: bucket %d first %d, want %d", trial, i, s.Bucket, s.First, count[s.Bucket]*per[s.Bucket]*world)
			}
			count[s.Bucket]++
			for b := range nb {
				// After i+1 steps, |count_b − (i+1)·m_b/S| < 1.
				d := int64(count[b])*int64(total) - int64(i+1)*int64(m[b])
				if d <= -int64(total) || d >= int64(total) {
					t.Fatalf("trial %d: after %d steps bucket %d has %d of its %d batches, share %.2f", trial, i+1, b, count[b], m[b], float64(i+1)*float64(m[b])/float64(total))
				}
			}
		}
		if !slices.Equal(count, m) {
			t.Fatalf("trial %d: batches %v, want %v", trial, count, m)
		}
	}
}

// TestTakenResume: an epoch begun at world 4 and resumed at world 3
// takes every remaining sample of each bucket exactly once, and no taken
// one again.
func TestTakenResume(t *testing.T) {
	n := []int{1000, 333, 57, 2, 640}
	per := []int{4, 2, 8, 1, 3}
	const seed, epoch = 11, 2
	full := Steps(n, per, 4, seed, epoch)
	for _, k := range []int{0, 1, 17, len(full) / 2, len(full)} {
		taken, err := Taken(n, per, []Leg{{4, k}}, seed, epoch)
		if err != nil {
			t.Fatal(err)
		}
		// What the first leg took, bucket by bucket, is a prefix.
		seen := make([][]bool, len(n))
		for b := range n {
			seen[b] = make([]bool, n[b])
		}
		mark := func(s Step, base, world int) {
			for i := range per[s.Bucket] * world {
				p := base + s.First + i
				if seen[s.Bucket][p] {
					t.Fatalf("k=%d: bucket %d position %d taken twice", k, s.Bucket, p)
				}
				seen[s.Bucket][p] = true
			}
		}
		for _, s := range full[:k] {
			mark(s, 0, 4)
		}
		avail := make([]int, len(n))
		for b := range n {
			avail[b] = n[b] - taken[b]
		}
		for _, s := range Steps(avail, per, 3, seed, epoch) {
			mark(s, taken[s.Bucket], 3)
		}
		for b := range n {
			left := 0
			for _, ok := range seen[b] {
				if !ok {
					left++
				}
			}
			// Only a partial batch of world 3's is left of each bucket.
			if left >= per[b]*3 {
				t.Errorf("k=%d: bucket %d leaves %d samples unserved, a full batch of %d", k, b, left, per[b]*3)
			}
		}
	}
	if _, err := Taken(n, per, []Leg{{4, len(full) + 1}}, seed, epoch); !errors.Is(err, ErrSpec) {
		t.Errorf("a leg past the epoch: %v", err)
	}
}

func TestParseResume(t *testing.T) {
	legs, err := ParseResume("4:120,3:40")
	if err != nil || !slices.Equal(legs, []Leg{{4, 120}, {3, 40}}) || FormatResume(legs) != "4:120,3:40" {
		t.Errorf("ParseResume: %v, %v", legs, err)
	}
	for _, bad := range []string{"4", "0:3", "4:-1", "a:b", "4:1,"} {
		if _, err := ParseResume(bad); !errors.Is(err, ErrSpec) {
			t.Errorf("ParseResume(%q) = %v", bad, err)
		}
	}
}

func TestParseClips(t *testing.T) {
	got, err := Parse("480x848x49, 848x480x17")
	if err != nil || !slices.Equal(got, []Shape{{H: 480, W: 848, T: 49}, {H: 848, W: 480, T: 17}}) || !Clips(got) {
		t.Fatalf("Parse of clip buckets: %v, %v", got, err)
	}
	if Format(got) != "480x848x49,848x480x17" {
		t.Errorf("Format: %s", Format(got))
	}
	for in, says := range map[string]string{
		"480x848x49,480x848":    "not both",
		"480x848x0":             "frames are 1..4096",
		"480x848x5000":          "frames are 1..4096",
		"480x848x49x2":          "not HxW or HxWxT",
		"480x848x49,480x848x49": "listed twice",
	} {
		if _, err := Parse(in); !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), says) {
			t.Errorf("Parse(%q) = %v, want an ErrSpec saying %q", in, err, says)
		}
	}
	for _, tc := range []struct {
		name   string
		frames []int
		area   int64
	}{{"video-480", []int{49, 33, 17}, 480 * 848}, {"video-720", []int{129, 65, 33}, 720 * 1280}} {
		s, err := Parse(tc.name)
		if err != nil || len(s) != 15 || !Clips(s) {
			t.Fatalf("preset %s: %v, %v", tc.name, s, err)
		}
		for _, b := range s {
			if b.H%16 != 0 || b.W%16 != 0 || (b.T-1)%4 != 0 || !slices.Contains(tc.frames, b.T) {
				t.Errorf("preset %s: bucket %v: sides not of 16, or frames not 4k+1 of %v", tc.name, b, tc.frames)
			}
			if r := float64(b.Pixels()) / float64(tc.area); r < 0.9 || r > 1.1 {
				t.Errorf("preset %s: bucket %v is %.2f of the preset's area", tc.name, b, r)
			}
		}
	}
}

func TestNearestClip(t *testing.T) {
	s, _ := Parse("video-480")
	for _, tc := range []struct {
		w, h, frames, stride int
		want                 Shape
		ok                   bool
	}{
		{1920, 1080, 300, 1, Shape{H: 480, W: 848, T: 49}, true}, // 16:9, long: the longest
		{1920, 1080, 40, 1, Shape{H: 480, W: 848, T: 33}, true},  // 40 frames: 33 fits, 49 does not
		{1920, 1080, 33, 1, Shape{H: 480, W: 848, T: 33}, true},  // exactly
		{1920, 1080, 33, 2, Shape{H: 480, W: 848, T: 17}, true},  // a span of 65 at stride 2
		{640, 480, 49, 1, Shape{H: 528, W: 704, T: 49}, true},    // 4:3
		{480, 480, 17, 1, Shape{H: 640, W: 640, T: 17}, true},
		{1920, 1080, 16, 1, Shape{}, false}, // too short for every bucket
	} {
		b, ok := NearestClip(tc.w, tc.h, tc.frames, tc.stride, s)
		if ok != tc.ok || ok && s[b] != tc.want {
			t.Errorf("NearestClip(%dx%d, %d frames, stride %d) = %d %v, want %v %v", tc.w, tc.h, tc.frames, tc.stride, b, ok, tc.want, tc.ok)
		}
	}
	// Aspect first: a square video long enough for 49 frames only in a
	// 16:9 bucket goes to the square one of 17.
	list := []Shape{{H: 480, W: 848, T: 49}, {H: 640, W: 640, T: 17}}
	if b, _ := NearestClip(500, 500, 100, 1, list); b != 1 {
		t.Errorf("a square video went to bucket %v", list[b])
	}
	// Of equally near, the longest; of those, the first listed.
	list = []Shape{{H: 100, W: 200, T: 9}, {H: 200, W: 100, T: 9}, {H: 200, W: 100, T: 17}, {H: 100, W: 200, T: 17}}
	if b, _ := NearestClip(50, 50, 100, 1, list); b != 2 {
		t.Errorf("a tie went to bucket %d, want 2 (the longest, first listed)", b)
	}
}

// TestNearestClipExact holds NearestClip to its statement, by brute force
// over the log distance, wherever two buckets are not within rounding of
// a tie.
func TestNearestClipExact(t *testing.T) {
	s, _ := Parse("video-720")
	s = append(s, Shape{H: 256, W: 256, T: 5}, Shape{H: 256, W: 512, T: 200})
	r := rand.New(rand.NewPCG(7, 8))
	for range 20000 {
		w, h, n, st := 1+r.IntN(4000), 1+r.IntN(4000), 1+r.IntN(400), 1+r.IntN(3)
		got, ok := NearestClip(w, h, n, st, s)
		want, wd := -1, 0.0
		for i, b := range s {
			if (b.T-1)*st+1 > n {
				continue
			}
			d := abs(log(float64(w)/float64(h)) - log(float64(b.W)/float64(b.H)))
			if want < 0 || d < wd-1e-12 || abs(d-wd) <= 1e-12 && b.T > s[want].T {
				want, wd = i, d
			}
		}
		if ok != (want >= 0) || ok && got != want {
			t.Fatalf("NearestClip(%dx%d, %d frames, stride %d) = %v %v, the rule says %d", w, h, n, st, got, ok, want)
		}
	}
}

func TestBudgetClips(t *testing.T) {
	shapes := []Shape{{H: 480, W: 848, T: 49}, {H: 480, W: 848, T: 17}, {H: 640, W: 640, T: 1}}
	got, err := Budget{Pixels: 480 * 848 * 100}.Sizes(shapes)
	if err != nil || !slices.Equal(got, []int{2, 5, 99}) {
		t.Errorf("pixel budget of clips: %v, %v", got, err)
	}
	// 480×848 at f = 16 is 30×53 = 1590 tokens a latent frame; 49 frames
	// are 13 latent frames (20,670 tokens), 17 are 5 (7,950).
	b := Budget{Tokens: 41340, VAE: 8, Patch: 2, VAET: 4}
	if c := b.Cost(shapes[0]); c != 20670 {
		t.Errorf("a 49-frame clip's tokens: %d", c)
	}
	got, err = b.Sizes(shapes)
	if err != nil || !slices.Equal(got, []int{2, 5, 25}) {
		t.Errorf("token budget of clips: %v, %v", got, err)
	}
	b.VAET = 0
	if _, err := b.Sizes(shapes); !errors.Is(err, ErrSpec) {
		t.Errorf("no temporal factor: %v", err)
	}
}

// TestPythonClipPresets holds the Python client's table of the clip
// presets' shortest frames (python/brand/_options.py, which derives a
// clip bucket job's clip= as the gateway does) to the presets.
func TestPythonClipPresets(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "python", "brand", "_options.py"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`_CLIP_PRESETS = \{([^}]*)\}`).FindSubmatch(src)
	if m == nil {
		t.Fatal("python/brand/_options.py has no _CLIP_PRESETS")
	}
	got := map[string]int{}
	for _, e := range regexp.MustCompile(`"([a-z0-9-]+)": ([0-9]+)`).FindAllStringSubmatch(string(m[1]), -1) {
		got[e[1]], _ = strconv.Atoi(e[2])
	}
	want := map[string]int{}
	for _, name := range Presets() {
		s, _ := Preset(name)
		if Clips(s) {
			want[name] = s[0].T
			for _, b := range s {
				want[name] = min(want[name], b.T)
			}
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("python/brand/_options.py's _CLIP_PRESETS %v, the presets' shortest frames %v", got, want)
	}
}

// TestResumeIsTheUninterruptedRun: a job stopped after s steps and
// resumed at the same world serves exactly the steps the uninterrupted
// run serves from s (each step's bucket and samples); resumed at another
// world, it serves every sample the legs left, once.
func TestResumeIsTheUninterruptedRun(t *testing.T) {
	n, per := []int{97, 40, 253, 8}, []int{3, 5, 2, 4}
	for _, world := range []int{1, 2, 3} {
		full := Steps(n, per, world, 11, 2)
		for s := 0; s <= len(full); s += 7 {
			// Stopped after s steps of an uninterrupted run at world.
			legs := []Leg{{World: world, Steps: s}}
			from, steps, taken, err := Resume(n, per, legs, world, 11, 2)
			if err != nil {
				t.Fatal(err)
			}
			if len(steps) != len(full)-s {
				t.Fatalf("world %d from step %d: %d steps, want %d", world, s, len(steps), len(full)-s)
			}
			for i, st := range steps {
				want := full[s+i]
				if st.Bucket != want.Bucket || from[st.Bucket]+st.First != want.First {
					t.Fatalf("world %d resumed at step %d: step %d is bucket %d from %d, the uninterrupted run's bucket %d from %d",
						world, s, s+i, st.Bucket, from[st.Bucket]+st.First, want.Bucket, want.First)
				}
			}
			for b := range n {
				used := 0
				for _, st := range full[:s] {
					if st.Bucket == b {
						used += per[b] * world
					}
				}
				if taken[b] != used {
					t.Fatalf("world %d after %d steps: taken %v, bucket %d used %d", world, s, taken, b, used)
				}
			}
		}
	}
}

// TestResumeTwice: a job stopped and resumed twice at one world serves the
// uninterrupted run's steps; its legs are one leg.
func TestResumeTwice(t *testing.T) {
	n, per := []int{97, 40, 253, 8}, []int{3, 5, 2, 4}
	full := Steps(n, per, 2, 5, 0)
	from, steps, _, err := Resume(n, per, []Leg{{2, 10}, {2, 7}}, 2, 5, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range steps {
		if want := full[17+i]; st.Bucket != want.Bucket || from[st.Bucket]+st.First != want.First {
			t.Fatalf("step %d: bucket %d from %d, want bucket %d from %d", 17+i, st.Bucket, from[st.Bucket]+st.First, want.Bucket, want.First)
		}
	}
}
