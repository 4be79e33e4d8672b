// Package recorded holds what a gateway serves of a fixed set of jobs to
// a recording, so that a change of how batches are laid out that moves
// any byte fails here. The jobs: samples as stored (world 1 and 3, an
// offset with drop_last, a transform, balance=bytes, columns), token jobs
// (both packs, balance=attention and tokens), vision jobs (alone,
// balanced, mixed with text), clip jobs (their manifests: decoding needs
// libavcodec), bucket jobs (images, with random crops and flips, and a
// tree of videos' clips by their manifests), mixtures and schedules of
// each unit, and named jobs with
// edits (an append, then an exclusion) or a stored schedule.
// testdata/epochs.golden has a line for each rank's /epoch/N and each
// rank's batch of one or two epochs: the status, the body's length and
// SHA-256, the ETag and the Brand-* headers. go test -update rewrites it.
//
// The datasets are indexed in a synctest bubble from files of a fixed
// modification time: an index served in place records its files' times
// and its own, which its ID, the ETags and the tar headers carry. Their
// bytes are Go's image encoders' and arrow-go's Parquet writer's: a
// toolchain or go.mod whose writers change needs -update at the commit
// before a change being checked. The recording is the build without
// tags: brand_turbojpeg decodes the transformed JPEGs otherwise.
package recorded

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/transform"
)

var update = flag.Bool("update", false, "rewrite testdata/epochs.golden from what this build serves")

const golden = "testdata/epochs.golden"

// A job is recorded over epochs epochs at every rank of its world.
// Manifest records each batch's manifest rather than its bytes: a clip
// job's frames are decoded with libavcodec, which the plain build lacks.
type job struct {
	name, query string
	epochs      int
	manifest    bool
}

func jobs(s *sources) []job {
	vis := "seq=256&vision=" + url.QueryEscape(s.rule) + "&seed=3&window=2&batch_size=2&world=2"
	lines := "dataset=lines&seed=7&window=4&batch_size=5&world=2&index=" + s.linesV
	return []job{
		{"samples", "dataset=web&seed=7&window=2&batch_size=8", 2, false},
		{"samples-world3", "dataset=web&seed=7&window=2&batch_size=5&world=3", 2, false},
		{"samples-offset-drop-last", "dataset=web&seed=9&window=3&batch_size=6&world=2&offset=10&drop_last=true", 1, false},
		{"samples-transform", "dataset=web&seed=7&window=2&batch_size=8&transform=tiny", 1, false},
		{"samples-balance-bytes", "dataset=web&seed=7&window=2&batch_size=5&world=2&balance=bytes", 1, false},
		{"samples-mix", "mix=web:0.5,code:0.3,books:0.2&seed=5&window=2&batch_size=8&world=2", 2, false},
		{"samples-mix-block", "mix=web:1,books:1&mix_block=4&mix_samples=40&seed=5&window=2&batch_size=4", 1, false},
		{"samples-mix-schedule", "mix_schedule=" + url.QueryEscape("0:web:1,code:1,books:0;2:web:1,code:0,books:2;4~6:web:1,code:1,books:1") + "&seed=5&window=2&batch_size=4&world=2", 1, false},
		{"samples-stored-schedule", "job=sched&schedule=latest&seed=5&window=2&batch_size=4&world=2", 1, false},
		{"lines-columns", "dataset=lines&columns=txt&seed=7&window=2&batch_size=8", 1, false},
		{"lines-edited", lines + "&job=edited", 2, false},
		{"tokens", "dataset=tok&seq=128&seed=7&window=2&batch_size=4&world=2", 2, false},
		{"tokens-concat", "dataset=tok&seq=128&pack=concat&eos=1&pad=2&seed=7&window=2&batch_size=4", 1, false},
		{"tokens-balance-attention", "dataset=tok&seq=256&pad=65535&seed=7&window=4&batch_size=3&world=2&balance=attention", 1, false},
		{"tokens-balance-tokens", "dataset=tok&seq=256&pad=65535&seed=7&window=4&batch_size=3&world=2&balance=tokens", 1, false},
		{"tokens-mix", "mix=tok:0.7,tok2:0.3&seq=128&seed=7&window=2&batch_size=4&world=2", 1, false},
		{"tokens-mix-schedule", "mix_schedule=" + url.QueryEscape("0:tok:1,tok2:1;3~5:tok:1,tok2:3") + "&seq=64&mix_block=8&seed=7&window=2&batch_size=4&world=2", 1, false},
		{"text", "dataset=txt&seq=64&seed=7&window=2&batch_size=4", 1, false},
		{"vision", "dataset=vis&" + vis, 2, false},
		{"vision-balance-vision", "dataset=vis&" + vis + "&pad=" + strconv.Itoa(s.vocab+10) + "&balance=vision", 1, false},
		{"vision-balance-attention", "dataset=vis&" + vis + "&pad=" + strconv.Itoa(s.vocab+10) + "&balance=attention", 1, false},
		{"vision-mix-text", "mix=vis:1,txt:1&mix_block=4&" + vis, 1, false},
		{"vision-schedule-text", "mix_schedule=" + url.QueryEscape("0:vis:1,txt:1;2:vis:1,txt:3") + "&mix_block=4&" + vis, 1, false},
		{"clips", "dataset=video&clip=4&stride=2&seed=7&window=2&batch_size=2&world=2", 2, true},
		{"buckets", "dataset=pics&buckets=32x48,48x32,40x40&budget=4800&seed=7&window=2&world=2", 2, false},
		{"buckets-crop-flip", "dataset=pics&buckets=32x32,32x48,48x32&budget=3072&crop=random&flip=0.5&seed=3&window=2", 1, false},
		{"buckets-clips", "dataset=video&buckets=16x16x3,32x32x2&budget=2048&seed=7&window=2", 1, true},
		{"clips-fps-first", "dataset=video&clip=3&fps=5&clip_start=first&clip_layout=cthw&seed=7&batch_size=3", 1, true},
	}
}

// TestRecordedEpochs serves every job and holds what it serves to the
// golden file.
func TestRecordedEpochs(t *testing.T) {
	s := makeSources(t)
	tiny, err := transform.ParseConfig([]byte(`{"pipelines": {"tiny": {"ops": [{"op": "random_resized_crop", "size": [6, 8]}, {"op": "hflip"}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(gateway.Config{
		Datasets:         s.specs,
		CacheSize:        64 << 20,
		Defaults:         gateway.Defaults{BatchSize: 8, Window: 2, Seed: 42},
		Planner:          planner.ForGateway{},
		Transforms:       tiny,
		TransformWorkers: 2,
		// Clip jobs are recorded by their manifests, which the plain build
		// serves only when asked to (it refuses them by default).
		ClipsWithoutDecoder: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	if err := g.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	edit(t, srv.URL, s)

	var head, lines []string
	for _, j := range jobs(s) {
		head = append(head, "# "+j.name+" "+j.query)
		lines = append(lines, record(t, srv.URL, j)...)
	}
	slices.Sort(lines)
	got := strings.Join(append(head, lines...), "\n") + "\n"
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote %s: %d responses", golden, len(lines))
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -run TestRecordedEpochs -update writes it)", err)
	}
	if got == string(want) {
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	i := 0
	for i < min(len(gl), len(wl)) && gl[i] == wl[i] {
		i++
	}
	gl, wl = append(gl, "(none)"), append(wl, "(none)")
	t.Fatalf("%s:%d differs: what is served has changed\n got: %s\nwant: %s", golden, i+1, gl[i], wl[i])
}

// edit makes the named jobs' records: lines-edited's append (the file
// the lines dataset grew by, from step 3) and then its exclusion (from
// step 7, of old and new samples), and the stored schedule of
// samples-stored-schedule.
func edit(t *testing.T, base string, s *sources) {
	t.Helper()
	q := "dataset=lines&seed=7&window=4&batch_size=5&world=2&index=" + s.linesV
	var made struct{ Version string }
	post(t, http.MethodPost, base+"/jobs/edited/append?"+q, fmt.Sprintf(`{"from_step": 3, "index": %q}`, s.linesX), &made)
	post(t, http.MethodPost, base+"/jobs/edited/exclude?"+q,
		fmt.Sprintf(`{"previous": %q, "from_step": 7, "keys": ["data/f0/1", "data/f1/17", "data/f2/39", "data/f9/4"]}`, made.Version), nil)
	post(t, http.MethodPut, base+"/jobs/sched/schedule", `{"schedule": "0:web:1,code:1,books:0;3:web:1,code:0,books:1", "from_step": 0}`, nil)
}

func post(t *testing.T, method, u, body string, out any) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated || out != nil && json.Unmarshal(b, out) != nil {
		t.Fatalf("%s %s: %s %s", method, u, resp.Status, b)
	}
}

// record reads each epoch of j at every rank: /epoch/N, then every batch
// (or its manifest), a line each.
func record(t *testing.T, base string, j job) []string {
	t.Helper()
	q, err := url.ParseQuery(j.query)
	if err != nil {
		t.Fatal(err)
	}
	world := 1
	if w := q.Get("world"); w != "" {
		world, _ = strconv.Atoi(w)
	}
	var out []string
	for e := range j.epochs {
		for r := range world {
			line, body := fetch(t, fmt.Sprintf("%s/epoch/%d?%s&rank=%d", base, e, j.query, r))
			out = append(out, fmt.Sprintf("%s e%d epoch r%d %s", j.name, e, r, line))
			var info struct{ Batches int }
			if err := json.Unmarshal(body, &info); err != nil {
				t.Fatalf("%s: /epoch/%d: %v", j.name, e, err)
			}
			for m := range info.Batches {
				path := fmt.Sprintf("/epoch/%d/batch/%d", e, m)
				if j.manifest {
					path += "/manifest"
				}
				line, _ := fetch(t, fmt.Sprintf("%s%s?%s&rank=%d", base, path, j.query, r))
				out = append(out, fmt.Sprintf("%s e%d b%03d r%d %s", j.name, e, m, r, line))
			}
		}
	}
	return out
}

// fetch GETs u, which must answer 200, and describes the answer: the
// body's length and SHA-256, the ETag and every Brand-* header.
func fetch(t *testing.T, u string) (string, []byte) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %s", u, resp.Status, bytes.TrimSpace(body))
	}
	line := fmt.Sprintf("%d %d sha256:%x", resp.StatusCode, len(body), sha256.Sum256(body))
	if etag := resp.Header.Get("ETag"); etag != "" {
		line += " ETag:" + etag
	}
	var names []string
	for name := range resp.Header {
		if strings.HasPrefix(name, "Brand-") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		line += " " + name + ":" + strings.Join(resp.Header.Values(name), ",")
	}
	return line, body
}
