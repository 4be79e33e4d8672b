package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/s3backend"
)

// The S3 face benchmark (brand-bench s3face): the PyTorch map-style loader
// the field writes — a DataLoader whose Dataset calls boto3 get_object for
// each sample's file, a RandomSampler, 4 workers (python/bench/loaders.py,
// mode per-object) — run unchanged against MinIO and against Brand's S3
// face over the same MinIO, only the endpoint (and the keys) changed.
// Rounds alternate the two. Every request either makes to the store passes
// a counting proxy in front of MinIO, so "requests reaching the store" are
// counted the same way for both.

// S3FaceConfig describes an S3 face benchmark run. Zero fields take
// DefaultS3FaceConfig's values.
type S3FaceConfig struct {
	Samples   int   // in the dataset; every pass reads them all, shuffled
	MeanBytes int64 // mean image size
	ChunkSize int64 // Brand's packing target
	Workers   int   // DataLoader workers
	BatchSize int
	Rounds    int // alternations of MinIO direct and Brand

	Interpreter, Script string // loaders.py and a Python with torch and boto3; found when empty
	Harness
}

// DefaultS3FaceConfig: 2,048 samples of 100 KiB (200 MiB).
func DefaultS3FaceConfig() S3FaceConfig {
	return S3FaceConfig{Samples: 2048, MeanBytes: 100 << 10, ChunkSize: 64 << 20, Workers: 4, BatchSize: 32, Rounds: 2}
}

// SmallS3FaceConfig: 8,192 samples of 10 KiB (80 MiB).
func SmallS3FaceConfig() S3FaceConfig {
	c := DefaultS3FaceConfig()
	c.Samples, c.MeanBytes = 8192, 10<<10
	return c
}

// S3FaceReport is the benchmark's result: s3face.json.
type S3FaceReport struct {
	Header
	Samples   int          `json:"samples"`
	MeanBytes int64        `json:"mean_bytes"`
	Bytes     int64        `json:"dataset_bytes"`
	Chunks    int          `json:"chunks"`
	Workers   int          `json:"workers"`
	Rows      []S3FaceRow  `json:"rows"`
	Targets   []Target     `json:"targets"`
	Seconds   float64      `json:"seconds"`
	Python    string       `json:"python"`
	Versions  S3FaceClient `json:"versions"`
}

// S3FaceClient names the client library versions measured.
type S3FaceClient struct {
	Boto3 string `json:"boto3"`
	Torch string `json:"torch"`
}

// S3FaceRow is one pass of the loader over the whole dataset.
type S3FaceRow struct {
	Round         int     `json:"round"`
	Config        string  `json:"config"` // minio, brand-cold, brand-warm
	SamplesPerSec float64 `json:"samples_per_s"`
	StoreRequests int64   `json:"store_requests"`
	StoreBytes    int64   `json:"store_bytes"`
	LoaderCPU     float64 `json:"loader_cpu_s"` // the loader and its workers
	GatewayCPU    float64 `json:"gateway_cpu_s"`
	StoreCPU      float64 `json:"minio_cpu_s"`
}

// The rows' configurations.
const (
	s3FaceDirect = "minio"
	s3FaceCold   = "brand-cold"
	s3FaceWarm   = "brand-warm"
)

// countingProxy forwards to the store and counts what reaches it.
type countingProxy struct {
	requests, bytes atomic.Int64
	srv             *http.Server
	url             string
}

func newCountingProxy(target string) (*countingProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &countingProxy{url: "http://" + ln.Addr().String()}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = newTransport(64)
	rp.ModifyResponse = func(r *http.Response) error {
		if r.ContentLength > 0 {
			p.bytes.Add(r.ContentLength)
		}
		return nil
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		// r.Host stays the proxy's: it is what the client signed.
		rp.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// RunS3Face runs the S3 face benchmark.
func RunS3Face(ctx context.Context, cfg S3FaceConfig) (*S3FaceReport, error) {
	fillZero(&cfg, DefaultS3FaceConfig())
	if err := cfg.check(); err != nil {
		return nil, err
	}
	pc := Config{Python: Python{Interpreter: cfg.Interpreter, Script: cfg.Script}}
	interp, script, err := pc.findPython(ctx)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	started := time.Now()
	rep := &S3FaceReport{Header: newHeader(started, cfg.Command),
		Samples: cfg.Samples, MeanBytes: cfg.MeanBytes, Workers: cfg.Workers, Python: interp}
	if out, err := exec.CommandContext(ctx, interp, "-c", "import boto3, torch; print(boto3.__version__, torch.__version__)").Output(); err == nil {
		if f := strings.Fields(string(out)); len(f) == 2 {
			rep.Versions = S3FaceClient{Boto3: f[0], Torch: f[1]}
		}
	}

	srv, err := miniotest.Start(ctx, filepath.Join(cfg.WorkDir, "s3face-minio"))
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	const bucket = "s3face"
	if err := srv.MakeBucket(ctx, bucket); err != nil {
		return nil, err
	}
	proxy, err := newCountingProxy(srv.URL())
	if err != nil {
		return nil, err
	}
	defer proxy.srv.Close()

	// The dataset, packed, and the same images as objects of their own.
	spec := synth.Spec{Samples: cfg.Samples, MeanBytes: cfg.MeanBytes, Classes: 100, Seed: 17}
	src := filepath.Join(cfg.WorkDir, "s3face-src")
	_ = os.RemoveAll(src)
	if err := spec.WriteTree(src); err != nil {
		return nil, err
	}
	defer os.RemoveAll(src)
	store, err := s3backend.Open(ctx, "s3://"+bucket+"/packed", srv.Config())
	if err != nil {
		return nil, err
	}
	res, err := dataset.Pack(ctx, src, store, dataset.PackOptions{ChunkSize: cfg.ChunkSize, Shuffle: true, Seed: 17, Parallel: 2, Name: "synthetic", Overwrite: true})
	if err != nil {
		return nil, err
	}
	rep.Bytes, rep.Chunks = res.Index.TotalBytes(), res.Index.NumChunks()
	objects, err := s3backend.Open(ctx, "s3://"+bucket+"/objects", srv.Config())
	if err != nil {
		return nil, err
	}
	var direct, viaBrand strings.Builder
	for i := range cfg.Samples {
		s := spec.Sample(i)
		if _, err := objects.Put(ctx, s.Key+".jpg", bytes.NewReader(s.Image), int64(len(s.Image))); err != nil {
			return nil, err
		}
		direct.WriteString("objects/" + s.Key + ".jpg\n")
		viaBrand.WriteString(s.Key + ".jpg\n")
	}
	keys := map[string]string{s3FaceDirect: filepath.Join(cfg.WorkDir, "s3face-keys-direct.txt"), s3FaceCold: filepath.Join(cfg.WorkDir, "s3face-keys-brand.txt")}
	if err := os.WriteFile(keys[s3FaceDirect], []byte(direct.String()), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(keys[s3FaceCold], []byte(viaBrand.String()), 0o644); err != nil {
		return nil, err
	}
	logf(cfg.Log, "dataset: %d samples of mean %s in %d chunks (%s), and as %d objects", cfg.Samples, sizeString(cfg.MeanBytes), rep.Chunks, sizeString(rep.Bytes), cfg.Samples)

	credFile := filepath.Join(cfg.WorkDir, "s3face-credentials")
	const faceID, faceSecret = "s3face-bench", "s3face-bench-secret"
	if err := os.WriteFile(credFile, []byte(faceID+" "+faceSecret+"\n"), 0o600); err != nil {
		return nil, err
	}
	loader := func(endpoint, bucket, keysFile, id, secret string, gatewayPid int) (S3FaceRow, error) {
		reqs, byts := proxy.requests.Load(), proxy.bytes.Load()
		store0, gw0 := processCPU(srv.Pid()), time.Duration(0)
		if gatewayPid != 0 {
			gw0 = processCPU(gatewayPid)
		}
		cmd := exec.CommandContext(ctx, interp, script, "per-object", "--endpoint", endpoint, "--bucket", bucket, "--keys-file", keysFile,
			"--batch-size", strconv.Itoa(cfg.BatchSize), "--seed", "3", "--workers", strconv.Itoa(cfg.Workers))
		cmd.Env = append(gatewayEnv(id, secret), "AWS_ACCESS_KEY_ID="+id, "AWS_SECRET_ACCESS_KEY="+secret)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return S3FaceRow{}, fmt.Errorf("bench: loaders.py per-object against %s: %w\n%s", endpoint, err, lastLines(stderr.String(), 20))
		}
		var out pyResult
		if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &out); err != nil {
			return S3FaceRow{}, fmt.Errorf("bench: loaders.py output: %w", err)
		}
		if out.Samples != int64(cfg.Samples) {
			return S3FaceRow{}, fmt.Errorf("bench: the loader read %d samples of %d", out.Samples, cfg.Samples)
		}
		row := S3FaceRow{SamplesPerSec: float64(out.Samples) / out.Seconds, LoaderCPU: out.CPUSeconds,
			StoreRequests: proxy.requests.Load() - reqs, StoreBytes: proxy.bytes.Load() - byts,
			StoreCPU: (processCPU(srv.Pid()) - store0).Seconds()}
		if gatewayPid != 0 {
			row.GatewayCPU = (processCPU(gatewayPid) - gw0).Seconds()
		}
		return row, nil
	}

	for round := range cfg.Rounds {
		row, err := loader(proxy.url, bucket, keys[s3FaceDirect], srv.AccessKey, srv.SecretKey, 0)
		if err != nil {
			return nil, err
		}
		row.Round, row.Config = round, s3FaceDirect
		logf(cfg.Log, "round %d, MinIO direct: %.0f samples/s, %d store requests", round, row.SamplesPerSec, row.StoreRequests)
		rep.Rows = append(rep.Rows, row)

		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		faceAddr := ln.Addr().String()
		ln.Close()
		args := []string{"serve", "--listen", "127.0.0.1:0", "--dataset", "synthetic=s3://" + bucket + "/packed",
			"--s3-endpoint", proxy.url, "--s3-region", "us-east-1", "--cache-size", strconv.FormatInt(2*rep.Bytes, 10),
			"--s3-face-listen", faceAddr, "--s3-face-credentials", credFile,
			"--log-format", "json", "--log-level", "info", "--shutdown-timeout", "10s"}
		g, err := startGateway(ctx, cfg.GatewayBinary, args, gatewayEnv(srv.AccessKey, srv.SecretKey), filepath.Join(cfg.WorkDir, fmt.Sprintf("gateway-s3face-%d.log", round)))
		if err != nil {
			return nil, err
		}
		for _, config := range []string{s3FaceCold, s3FaceWarm} {
			row, err := loader("http://"+faceAddr, "synthetic", keys[s3FaceCold], faceID, faceSecret, g.cmd.Process.Pid)
			if err != nil {
				g.kill()
				return nil, err
			}
			row.Round, row.Config = round, config
			logf(cfg.Log, "round %d, %s: %.0f samples/s, %d store requests", round, config, row.SamplesPerSec, row.StoreRequests)
			rep.Rows = append(rep.Rows, row)
		}
		if err := g.stop(10 * time.Second); err != nil {
			return nil, err
		}
	}
	rep.Targets = rep.targets()
	rep.Seconds = time.Since(started).Seconds()
	return rep, nil
}

// targets: Brand's samples/s over MinIO's in each round (cold and warm
// passes against the direct pass of the same round), and the store
// requests of a direct epoch over a cold Brand epoch's.
func (r *S3FaceReport) targets() []Target {
	var cold, warm, reqs []float64
	for i, row := range r.Rows {
		if row.Config != s3FaceDirect || i+2 >= len(r.Rows) {
			continue
		}
		c, w := r.Rows[i+1], r.Rows[i+2]
		cold = append(cold, ratio(c.SamplesPerSec, row.SamplesPerSec))
		warm = append(warm, ratio(w.SamplesPerSec, row.SamplesPerSec))
		reqs = append(reqs, ratio(float64(row.StoreRequests), float64(max(c.StoreRequests, 1))))
	}
	note := func(v []float64) string { return "rounds: " + joinFloats(v, 2) }
	minOf := func(v []float64) float64 {
		if len(v) == 0 {
			return 0
		}
		m := v[0]
		for _, x := range v {
			m = min(m, x)
		}
		return m
	}
	ts := []Target{atLeast("Brand ÷ MinIO samples/s, cold epoch (the same loader, endpoint changed)", minOf(cold), 1),
		atLeast("Brand ÷ MinIO samples/s, warm epoch", minOf(warm), 1),
		atLeast("store requests per epoch, MinIO ÷ Brand (cold)", minOf(reqs), 100)}
	ts[0].Note, ts[1].Note, ts[2].Note = note(cold), note(warm), note(reqs)
	return ts
}

// WriteJSON writes the report as JSON.
func (r *S3FaceReport) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// WriteText writes the report as a markdown table.
func (r *S3FaceReport) WriteText(w io.Writer) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "PyTorch DataLoader (map-style, boto3 get_object per sample, RandomSampler, %d workers; boto3 %s, torch %s) over %d samples of mean %s (%s in %d chunks), against MinIO and against Brand's S3 face over the same MinIO\n\n",
		r.Workers, r.Versions.Boto3, r.Versions.Torch, r.Samples, sizeString(r.MeanBytes), sizeString(r.Bytes), r.Chunks)
	sb.WriteString("| round | endpoint | samples/s | ÷ MinIO | store requests | store MB | loader CPU s | gateway CPU s | MinIO CPU s |\n")
	sb.WriteString("| --: | -- | --: | --: | --: | --: | --: | --: | --: |\n")
	var direct S3FaceRow
	for _, row := range r.Rows {
		vs := ""
		if row.Config == s3FaceDirect {
			direct = row
		} else {
			vs = fmt.Sprintf("%.2f", ratio(row.SamplesPerSec, direct.SamplesPerSec))
		}
		fmt.Fprintf(&sb, "| %d | %s | %.0f | %s | %d | %.1f | %.1f | %.1f | %.1f |\n", row.Round, row.Config, row.SamplesPerSec, vs,
			row.StoreRequests, float64(row.StoreBytes)/1e6, row.LoaderCPU, row.GatewayCPU, row.StoreCPU)
	}
	fmt.Fprintf(&sb, "\nStore requests and bytes are counted by a proxy in front of MinIO that every request of the loader (direct) or the gateway passes; CPU is each process's over the pass (the loader's includes its %d workers). %d CPUs.\n\nTargets:\n", r.Workers, runtime.NumCPU())
	for _, t := range r.Targets {
		fmt.Fprintf(&sb, "  %-4s %s: %.2f (want %s; %s)\n", t.Status, t.Name, t.Ratio, t.Want, t.Note)
	}
	fmt.Fprintf(&sb, "\n%s; %.0f s\n", r.Command, r.Seconds)
	_, err := io.WriteString(w, sb.String())
	return err
}
