package bench

import (
	"archive/tar"
	"bytes"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		name string
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", ms(7), 99, 7 * time.Millisecond},
		{"median odd", ms(5, 1, 3), 50, 3 * time.Millisecond},
		{"median even", ms(4, 1, 3, 2), 50, 2 * time.Millisecond},
		{"p99 of ten is the max", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 100), 99, 100 * time.Millisecond},
		{"p90 of ten", ms(10, 9, 8, 7, 6, 5, 4, 3, 2, 1), 90, 9 * time.Millisecond},
		{"p100", ms(3, 1, 2), 100, 3 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orig := slices.Clone(tt.in)
			if got := percentile(tt.in, tt.p); got != tt.want {
				t.Errorf("percentile(%v, %g) = %v, want %v", tt.in, tt.p, got, tt.want)
			}
			if !slices.Equal(orig, tt.in) {
				t.Errorf("percentile reordered its input")
			}
		})
	}
}

func TestMeterCutsBatches(t *testing.T) {
	m := newMeter(3)
	for range 7 {
		m.samplesArrived(1)
	}
	if len(m.waits) != 2 {
		t.Fatalf("%d batches after 7 samples of batch 3, want 2", len(m.waits))
	}
	m.batchArrived(5)
	if elapsed := m.stop(); elapsed <= 0 {
		t.Errorf("elapsed %v", elapsed)
	}
	// 7 samples: two full batches, the whole batch of 5, then the partial
	// one closed by stop.
	if m.samples != 12 || len(m.waits) != 4 {
		t.Errorf("%d samples in %d batches, want 12 in 4", m.samples, len(m.waits))
	}
}

func TestDecodeBody(t *testing.T) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, typ byte, body string) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: typ, Size: int64(len(body)), Mode: 0o644}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	add("n1/", tar.TypeDir, "")
	add("n1/a.jpg", tar.TypeReg, "AAAA")
	add("n1/a.cls", tar.TypeReg, "1")
	add("n1/b.jpg", tar.TypeReg, "BB")
	add("n1/b.jpg", tar.TypeReg, "bb") // the same key and extension again: a new sample
	add("n2/c.seg.png", tar.TypeReg, "C")
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	render := func(s *client.Sample) string {
		var parts []string
		for _, ext := range slices.Sorted(maps.Keys(s.Files)) {
			parts = append(parts, ext+"="+string(s.Files[ext]))
		}
		return s.Key + ":" + strings.Join(parts, ",")
	}
	want := []string{"n1/a:cls=1,jpg=AAAA", "n1/b:jpg=BB", "n1/b:jpg=bb", "n2/c:seg.png=C"}
	// The size is a hint: exact, too small or unknown, the whole body is read.
	var pool bodyPool
	for _, size := range []int64{int64(buf.Len()), 10, -1} {
		var got []string
		var items []item
		err := decodeBody(bytes.NewReader(buf.Bytes()), size, &pool, func(it item) error {
			got = append(got, render(it.s))
			items = append(items, it)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("size %d: samples %q, want %q", size, got, want)
		}
		// The samples share one body buffer, handed back after the last.
		body := items[0].body
		for i, it := range items {
			if it.body != body {
				t.Fatalf("size %d: sample %d has its own body", size, i)
			}
			if left := body.left.Load(); left != int64(len(items)-i) {
				t.Fatalf("size %d: %d samples not done before sample %d's done; want %d", size, left, i, len(items)-i)
			}
			it.done()
		}
		if left := body.left.Load(); left != 0 {
			t.Errorf("size %d: %d samples left after all are done", size, left)
		}
	}

	stop := errors.New("stop")
	if err := decodeBody(bytes.NewReader(buf.Bytes()), -1, &pool, func(item) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("an emit error came back as %v", err)
	}
	if err := decodeBody(strings.NewReader(strings.Repeat("x", 700)), -1, &pool, func(item) error { return nil }); err == nil {
		t.Error("garbage decoded without an error")
	}
}

func TestShuffleBufferDeliversEverySampleOnce(t *testing.T) {
	b := newShuffleBuffer(4, 1)
	var out []string
	keys := []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}
	for i, k := range keys {
		s, ok := b.push(item{s: &client.Sample{Key: k}})
		if ok != (i >= 4) {
			t.Fatalf("push %d let out %v; want none only while the buffer fills", i, s.s)
		}
		if ok {
			out = append(out, s.s.Key)
		}
	}
	for s, ok := b.pop(); ok; s, ok = b.pop() {
		out = append(out, s.s.Key)
	}
	if slices.Equal(out, keys) {
		t.Errorf("the buffer did not shuffle: %v", out)
	}
	slices.Sort(out)
	if !slices.Equal(out, keys) {
		t.Errorf("delivered %v, want each of %v once", out, keys)
	}
}

func TestShuffledIsASeededPermutation(t *testing.T) {
	a, b, c := shuffled(100, 1, 7), shuffled(100, 1, 7), shuffled(100, 2, 7)
	if !slices.Equal(a, b) {
		t.Error("the same seed gave different orders")
	}
	if slices.Equal(a, c) {
		t.Error("different seeds gave the same order")
	}
	s := slices.Clone(a)
	slices.Sort(s)
	for i, v := range s {
		if v != i {
			t.Fatalf("not a permutation of 0..99: %v", a)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	valid := func() Config {
		c := SmokeConfig()
		c.WorkDir = t.TempDir()
		c.Processes = Processes{GatewayBinary: "/bin/true", LimitBinary: "/bin/true"}
		return c
	}
	tests := []struct {
		name   string
		change func(*Config)
		ok     bool
	}{
		{"smoke", func(*Config) {}, true},
		{"zero fields take defaults", func(c *Config) { *c = Config{WorkDir: c.WorkDir, Processes: c.Processes} }, true},
		{"no work dir", func(c *Config) { c.WorkDir = "" }, false},
		{"one epoch", func(c *Config) { c.Brand.Epochs = 1 }, false},
		{"cache over 100 %", func(c *Config) { c.Brand.CacheFractions = []float64{0.5, 1.5} }, false},
		{"policy cache over 100 %", func(c *Config) { c.Policy.Cache = 1.5 }, false},
		{"negative concurrency", func(c *Config) { c.Concurrency.ObjectReaders = []int{4, -1} }, false},
		{"empty concurrency list", func(c *Config) { c.Concurrency.ShardReaders = []int{} }, false},
		{"empty ahead levels", func(c *Config) { c.Brand.AheadLevels = []int{} }, false},
		{"negative window", func(c *Config) { c.Job.Window = -1 }, false},
		{"two ranks", func(c *Config) { c.Job.World, c.Job.Rank = 2, 1 }, false},
		{"an offset", func(c *Config) { c.Job.Offset = 10 }, false},
		{"drop last", func(c *Config) { c.Job.DropLast = true }, false},
		{"unknown group", func(c *Config) { c.Groups = []string{"limits", "speed"} }, false},
		{"brand without a binary", func(c *Config) { c.Processes.GatewayBinary = "" }, false},
		{"limits without a binary", func(c *Config) { c.Processes.LimitBinary = ""; c.Groups = []string{GroupLimits} }, false},
		{"limits need no gateway", func(c *Config) { c.Processes.GatewayBinary = ""; c.Groups = []string{GroupLimits} }, true},
		{"baselines need no binary", func(c *Config) { c.Processes = Processes{}; c.Groups = []string{GroupBaselines} }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.change(&c)
			got, err := c.withDefaults()
			if (err == nil) != tt.ok {
				t.Fatalf("withDefaults() error = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrConfig) {
				t.Errorf("error %v does not wrap ErrConfig", err)
			}
			if err == nil && (got.Dataset.Samples <= 0 || got.Job.BatchSize <= 0 || got.Job.World != 1 || got.Job.Dataset != gatewayDataset || got.Log == nil || len(got.Groups) == 0) {
				t.Errorf("defaults not applied: %+v", got)
			}
		})
	}
}

// fakeRun builds a runner holding figures as a run would have measured
// them, for the target and report tests.
func fakeRun(cold, warm float64, cacheFraction float64, rss int64, amp float64) *runner {
	cfg, _ := Config{WorkDir: "x", Processes: Processes{GatewayBinary: "x", LimitBinary: "x"}, Brand: Brand{CacheFractions: []float64{cacheFraction}, Epochs: 3},
		Groups: []string{GroupLimits, GroupBaselines, GroupBrand}}.withDefaults()
	r := &runner{cfg: cfg, runs: map[runKey]*brandRun{}, rep: &Report{Dataset: DatasetInfo{Samples: 1000, Chunks: 10, Bytes: 1000e6, WorkingSetBytes: 300e6}}}
	row := func(config, group, label string, sps float64) Row {
		return newRow(config, group, label, pass{samples: 1000, bytes: 100e6, backendBytes: 100e6, elapsed: time.Duration(1000 / sps * float64(time.Second)), waits: []time.Duration{time.Millisecond}})
	}
	r.add(row(ConfigProxy, GroupLimits, "(a)", 1000))
	r.add(row(ConfigMemory, GroupLimits, "(b)", 2000))
	r.add(row(ConfigObjects, GroupBaselines, "(c)", 100))
	r.add(row(ConfigWebDataset, GroupBaselines, "(d)", 800))
	run := &brandRun{fraction: cacheFraction, cacheBytes: int64(cacheFraction * 1000e6), policy: "next-use"}
	for e, sps := range []float64{cold, warm, warm} {
		run.epochs = append(run.epochs, brandEpoch{samples: 1000, bytes: 100e6, elapsed: time.Duration(1000 / sps * float64(time.Second)),
			waits: []time.Duration{time.Millisecond}, hits: 9, misses: 1, peakRSS: rss})
		run.stats.Epochs = append(run.stats.Epochs, statFor(e, int64(amp*100e6)))
	}
	r.runs[runKey{cacheFraction, "next-use"}] = run
	for _, row := range run.rows(GroupBrand) {
		r.add(row)
	}
	return r
}

func TestTargets(t *testing.T) {
	byName := func(ts []Target) map[string]Target {
		m := map[string]Target{}
		for _, t := range ts {
			m[strings.SplitN(t.Name, ",", 2)[0]] = t
		}
		return m
	}
	tests := []struct {
		name       string
		r          *runner
		want       map[string]string // target name → status
		wantRatios map[string]float64
	}{
		{
			name: "all met",
			r:    fakeRun(950, 1800, 1, 1200<<20, 1.0),
			want: map[string]string{
				"cold epoch ÷ limit (a) reverse proxy":        Pass,
				"warm epochs ÷ limit (b) memory server":       Pass,
				"cold epoch ÷ per-object (c)":                 Pass,
				"warm epochs ÷ per-object (c)":                Pass,
				"warm epochs ÷ WebDataset (d)":                Pass,
				"cold epoch ÷ WebDataset (d)":                 Pass,
				"read amplification":                          Pass,
				"gateway peak RSS ÷ (1.25 × cache + 200 MiB)": Pass,
			},
			wantRatios: map[string]float64{"cold epoch ÷ limit (a) reverse proxy": 0.95, "warm epochs ÷ limit (b) memory server": 0.9, "warm epochs ÷ per-object (c)": 18},
		},
		{
			name: "all missed",
			r:    fakeRun(500, 700, 1, 2000<<20, 1.2),
			want: map[string]string{
				"cold epoch ÷ limit (a) reverse proxy":        Miss,
				"warm epochs ÷ limit (b) memory server":       Miss,
				"cold epoch ÷ per-object (c)":                 Pass,
				"warm epochs ÷ WebDataset (d)":                Miss,
				"cold epoch ÷ WebDataset (d)":                 Miss,
				"read amplification":                          Miss,
				"gateway peak RSS ÷ (1.25 × cache + 200 MiB)": Miss,
			},
		},
		{
			name: "cache below the working set",
			r:    fakeRun(950, 1800, 0.25, 100<<20, 1.5),
			want: map[string]string{
				"read amplification":                    NA,
				"warm epochs ÷ limit (b) memory server": "", // only at 100 %
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := byName(tt.r.targets())
			for name, status := range tt.want {
				tg, ok := got[name]
				if status == "" {
					if ok {
						t.Errorf("%s evaluated, want it left out", name)
					}
					continue
				}
				if !ok || tg.Status != status {
					t.Errorf("%s: %+v, want %s", name, tg, status)
				}
			}
			for name, want := range tt.wantRatios {
				if r := got[name].Ratio; r < want*0.999 || r > want*1.001 {
					t.Errorf("%s: ratio %.4f, want %.4f", name, r, want)
				}
			}
		})
	}
}

func TestReportOutputs(t *testing.T) {
	r := fakeRun(950, 1800, 1, 1200<<20, 1.0)
	r.rep.Targets = r.targets()
	var text bytes.Buffer
	if err := r.rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"configuration", "(a)", "Brand, cache 100 %, epoch 2", "PASS", "cold epoch ÷ limit (a) reverse proxy, cache 100 %", "0 MISS"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text report lacks %q:\n%s", want, text.String())
		}
	}
	c, err := r.rep.Chart()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Categories) != len(r.rep.Rows) {
		t.Errorf("the chart has %d bars for %d rows", len(c.Categories), len(r.rep.Rows))
	}
	if _, err := (&Report{}).Chart(); err == nil {
		t.Error("an empty report charted")
	}
}

func statFor(epoch int, backendBytes int64) api.EpochStat {
	return api.EpochStat{Epoch: uint64(epoch), BackendBytes: backendBytes}
}

func TestBatchOf(t *testing.T) {
	tests := []struct {
		path         string
		epoch, batch int
		ok           bool
	}{
		{"/epoch/3/batch/17", 3, 17, true},
		{"/brand/epoch/0/batch/0", 0, 0, true},
		{"/epoch/3", 0, 0, false},
		{"/epoch/x/batch/1", 0, 0, false},
		{"/epoch/1/batch/2/manifest", 0, 0, false},
	}
	for _, tt := range tests {
		e, b, ok := batchOf(tt.path)
		if ok != tt.ok || (ok && (e != tt.epoch || b != tt.batch)) {
			t.Errorf("batchOf(%q) = %d, %d, %t; want %d, %d, %t", tt.path, e, b, ok, tt.epoch, tt.batch, tt.ok)
		}
	}
}

func TestBoundaryRatio(t *testing.T) {
	d := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	prev := d(10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10)
	// A stall on the first batch of the new epoch, steady 10 ms otherwise.
	cur := d(50, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10)
	p99, median, r, control, around := boundaryRatio(prev, cur)
	if p99 != 50 || median != 10 || r != 5 || control != 1 || len(around) != 10 || around[5] != 50*time.Millisecond {
		t.Errorf("boundaryRatio = p99 %v, median %v, ratio %v, control %v, around %v; want 50, 10, 5, 1 and the stall sixth", p99, median, r, control, around)
	}
	// Too few batches for a mid-epoch run: no control.
	if _, _, _, control, _ := boundaryRatio(d(1, 2), d(3, 4, 5)); control != 0 {
		t.Errorf("control %v for a 3-batch epoch, want 0", control)
	}
}
