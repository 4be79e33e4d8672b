package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"golang.org/x/sync/errgroup"
)

// The store alone. On this machine MinIO shares the two cores with the
// gateway and the client, so a format whose cold epoch costs the store
// more reads slower, whatever the gateway does. replayGets separates the
// two: it sends MinIO, with nobody else running, the GETs the gateway sent
// in each format's first cold epoch (the same objects and ranges, recorded
// by the proxy), and measures MinIO's CPU for them.

// storeGet is one object GET the proxy forwarded: its key in the bucket
// and its Range header ("" for the whole object).
type storeGet struct {
	Key   string
	Range string
}

// StoreReplay is one format's recorded GETs, replayed against MinIO.
type StoreReplay struct {
	Format string `json:"format"`
	GETs   int    `json:"gets"`
	Bytes  int64  `json:"bytes"`
	// MinIOCPU is MinIO's CPU seconds for each replay.
	MinIOCPU []float64 `json:"minio_cpu_s"`
}

// replayParallel is how many GETs a replay has in flight: about what a
// cold epoch's loads have (its shuffle window and what is fetched ahead).
const replayParallel = 4

// startGets starts recording the object GETs forwarded.
func (p *storeProxy) startGets() {
	p.mu.Lock()
	p.gets = []storeGet{}
	p.mu.Unlock()
}

// stopGets stops recording and returns what was recorded.
func (p *storeProxy) stopGets() []storeGet {
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.gets
	p.gets = nil
	return g
}

// noteGet records r if it is an object GET and recording is on.
func (p *storeProxy) noteGet(kind string, r *http.Request) {
	if !strings.HasPrefix(kind, http.MethodGet+" ") {
		return
	}
	_, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/") // the bucket, the key
	p.mu.Lock()
	if p.gets != nil {
		p.gets = append(p.gets, storeGet{Key: key, Range: r.Header.Get("Range")})
	}
	p.mu.Unlock()
}

// parseRange reads "bytes=a-b".
func parseRange(h string) (start, end int64, err error) {
	a, b, ok := strings.Cut(strings.TrimPrefix(h, "bytes="), "-")
	if !ok || !strings.HasPrefix(h, "bytes=") {
		return 0, 0, fmt.Errorf("bench: a Range header %q not of the form bytes=a-b", h)
	}
	if start, err = strconv.ParseInt(a, 10, 64); err == nil {
		end, err = strconv.ParseInt(b, 10, 64)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("bench: a Range header %q: %w", h, err)
	}
	return start, end, nil
}

// replayGets replays each format's recorded GETs StoreReplays times,
// the formats alternating, straight to MinIO, and adds what it cost MinIO
// to the report.
func (r *formatsRun) replayGets(ctx context.Context) error {
	mc, err := minio.New(r.srv.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(r.srv.AccessKey, r.srv.SecretKey, ""),
		Region: "us-east-1", BucketLookup: minio.BucketLookupPath, Transport: newTransport(replayParallel)})
	if err != nil {
		return err
	}
	var reps []*StoreReplay
	for _, f := range formatOrder {
		if gets := r.replay[f]; len(gets) > 0 {
			reps = append(reps, &StoreReplay{Format: f, GETs: len(gets)})
		}
	}
	for i := range r.cfg.StoreReplays {
		for _, rep := range reps {
			cpu0 := processCPU(r.srv.Pid())
			t0 := time.Now()
			n, err := r.replayOnce(ctx, mc, r.replay[rep.Format])
			if err != nil {
				return fmt.Errorf("bench: replaying %s's GETs: %w", rep.Format, err)
			}
			rep.Bytes = n
			rep.MinIOCPU = append(rep.MinIOCPU, (processCPU(r.srv.Pid()) - cpu0).Seconds())
			logf(r.cfg.Log, "replay %d, %s: %d GETs, %s in %s; MinIO %.2f s of CPU", i, rep.Format, rep.GETs, sizeString(n),
				time.Since(t0).Round(time.Millisecond), rep.MinIOCPU[i])
		}
	}
	for _, rep := range reps {
		r.rep.Replays = append(r.rep.Replays, *rep)
	}
	return nil
}

// replayOnce sends gets to MinIO, replayParallel at a time, each body
// read to its end, and returns the bytes read.
func (r *formatsRun) replayOnce(ctx context.Context, mc *minio.Client, gets []storeGet) (int64, error) {
	sizes := make([]int64, len(gets))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(replayParallel)
	for i, get := range gets {
		g.Go(func() error {
			var opts minio.GetObjectOptions
			if get.Range != "" {
				start, end, err := parseRange(get.Range)
				if err != nil {
					return err
				}
				if err := opts.SetRange(start, end); err != nil {
					return err
				}
			}
			obj, err := mc.GetObject(gctx, formatsBucket, get.Key, opts)
			if err != nil {
				return err
			}
			defer obj.Close()
			n, err := io.Copy(io.Discard, obj)
			if err != nil {
				return fmt.Errorf("%s (%s): %w", get.Key, get.Range, err)
			}
			sizes[i] = n
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	var n int64
	for _, s := range sizes {
		n += s
	}
	return n, nil
}
