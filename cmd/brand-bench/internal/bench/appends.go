package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pq "github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"golang.org/x/sync/errgroup"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// The appends benchmark (brand-bench appends): issue 56's figure for
// files a writer adds beside a Parquet dataset while a job trains on it —
// the seconds from the last new file written to the first batch that
// holds one of its rows, through the processes a user runs, on one MinIO
// every request to which passes the counting proxy of the formats
// benchmark:
//
//	a Parquet dataset of Files files, indexed in place by `brand index`
//	and served by a `brand serve` process; a named job reading it with
//	the Go client, a training step of StepTime a batch. After WarmSteps
//	steps NewFiles files are written beside the dataset (setup, not
//	timed), and then, timed one after another:
//	  (1) `brand index --append`: the process, start to exit, and what
//	      the proxy saw it read (listings, the new files' footers, the
//	      stored index);
//	  (2) the gateway's reload of the new version (its --index-poll);
//	  (3) POST /jobs/{job}/append (Client.Append) from the first step the
//	      gateway has not served of the job, which a first POST from step
//	      0 is told (409, first_editable_step);
//	  (4) the job's loop until a batch holding a new row reaches it.
//
// Each round appends NewFiles more files to the dataset the last round
// left, under a job of its own that starts reading at epoch 0. Then (5):
// the grown dataset's epoch 0, read whole by a fresh gateway without an
// exclusion list and by another under a list that names every row of
// ExcludeFiles files and ExcludeRows rows of others, one a file: the
// store bytes each reads, beside /plan's prediction for each.

// AppendsConfig describes an appends benchmark run. Zero fields take
// DefaultAppendsConfig's values.
type AppendsConfig struct {
	Files       int // Parquet files of the dataset the first round's job starts on
	NewFiles    int // Parquet files appended each round
	RowsPerFile int // rows (samples) a file, in one row group
	RowBytes    int // bytes of a row's text column
	BatchSize   int
	Window      int // the job's shuffle window, in chunks
	// StepTime is the job's training step: its loop holds each batch
	// this long before it takes the next, as a trainer does.
	StepTime time.Duration
	// WarmSteps are the steps the job reads before the round's files are
	// written.
	WarmSteps int
	// IndexPoll is the gateway's --index-poll: how soon it loads the
	// version `brand index --append` stored.
	IndexPoll time.Duration
	Rounds    int
	// ExcludeFiles are files every row of which an exclusion list names
	// (so that it empties their chunks), ExcludeRows rows it names one a
	// file of as many other files (chunks it leaves read): part (5),
	// left out when both are 0.
	ExcludeFiles int `zero:"kept"`
	ExcludeRows  int `zero:"kept"`
	Harness
}

// DefaultAppendsConfig: 1,000 files of 64 rows of 1 KiB to start with,
// 1,000 appended a round, batches of 64, a 100 ms step, the gateway
// polling its index every second; three rounds; then a list emptying 100
// files and naming 1,000 rows of others.
func DefaultAppendsConfig() AppendsConfig {
	return AppendsConfig{Files: 1000, NewFiles: 1000, RowsPerFile: 64, RowBytes: 1 << 10, BatchSize: 64, Window: 4,
		StepTime: 100 * time.Millisecond, WarmSteps: 20, IndexPoll: time.Second, Rounds: 3, ExcludeFiles: 100, ExcludeRows: 1000}
}

func (c AppendsConfig) check() error {
	if err := c.Harness.check(); err != nil {
		return err
	}
	if c.Files < 1 || c.NewFiles < 1 || c.RowsPerFile < 1 || c.RowBytes < 1 || c.BatchSize < 1 || c.Window < 1 || c.Rounds < 1 || c.WarmSteps < 1 {
		return fmt.Errorf("%w: appends: files, new files, rows a file, row bytes, batch size, window, warm steps and rounds must be positive", ErrConfig)
	}
	if c.ExcludeFiles < 0 || c.ExcludeRows < 0 || c.ExcludeFiles+c.ExcludeRows > c.Files+c.Rounds*c.NewFiles {
		return fmt.Errorf("%w: appends: the files an exclusion list empties and the rows it names, one a file, must be at least 0 and at most the files", ErrConfig)
	}
	if c.StepTime < 0 || c.IndexPoll <= 0 {
		return fmt.Errorf("%w: appends: a step time below 0 or an index poll not above it", ErrConfig)
	}
	return nil
}

// AppendsReport is the benchmark's result: appends.json.
type AppendsReport struct {
	Header
	Config AppendsConfig  `json:"config"`
	Base   IndexRun       `json:"base_index"` // the first `brand index`, of Files files
	Rounds []AppendsRound `json:"rounds"`
	// Total is the rounds' TotalSeconds: median, min, max.
	Total [3]float64 `json:"total_seconds"`
	// Exclusion is (5), when asked for (ExcludeFiles or ExcludeRows).
	Exclusion *ExclusionRun `json:"exclusion,omitempty"`
	Load      []float64     `json:"load_average"` // the 1-minute load average before each round
	Seconds   float64       `json:"seconds"`
}

// AppendsRound is one round: NewFiles files appended under a running job.
type AppendsRound struct {
	Round       int    `json:"round"`
	Job         string `json:"job"`
	FilesBefore int    `json:"files_before"`
	NewFiles    int    `json:"new_files"`
	NewSamples  int    `json:"new_samples"`
	NewBytes    int64  `json:"new_bytes"` // the new files' bytes in the store
	// WriteSeconds is the writing of the new files: setup, in no figure.
	WriteSeconds float64 `json:"write_seconds"`
	// Index is `brand index --append`; IndexGets and IndexGetBytes what
	// it read of the stored index (the version it extends).
	Index         IndexRun `json:"index_append"`
	IndexGets     int64    `json:"index_gets"`
	IndexGetBytes int64    `json:"index_get_bytes"`
	From          string   `json:"index_extended"` // the version the job reads
	To            string   `json:"index_made"`     // the version brand index --append stored
	// ReloadSeconds is from brand index's exit to the gateway naming the
	// new version in /datasets.
	ReloadSeconds float64 `json:"reload_seconds"`
	// PostSeconds is from the first POST to the record made (201);
	// Posts counts them (the first, from step 0, is told the first step
	// it could start at).
	PostSeconds float64 `json:"post_seconds"`
	Posts       int     `json:"posts"`
	// StepAtPost is the steps the job's loop had taken when the record
	// was made; Record what the gateway answered.
	StepAtPost int              `json:"step_at_post"`
	Record     api.StoredAppend `json:"record"`
	// FirstStep is the job's step whose batch first held a new row,
	// FirstRows how many it held, FirstSeconds the wait from the record
	// made to its reaching the loop.
	FirstStep    int     `json:"first_step"`
	FirstRows    int     `json:"first_rows"`
	FirstSeconds float64 `json:"first_seconds"`
	// Replans counts the Go client's epoch plans the loop fetched again
	// because the epoch grew under it (client.ErrBadResponse), Replan
	// the client's error the first time.
	Replans int    `json:"replans"`
	Replan  string `json:"replan_error,omitempty"`
	// TotalSeconds is from the last new file written to that batch.
	TotalSeconds float64 `json:"total_seconds"`
}

const appendsBucket = formatsBucket // startCountedStore's

// appendsSchema is the dataset's rows: a text and a label.
var appendsSchema = arrow.NewSchema([]arrow.Field{
	{Name: "text", Type: arrow.BinaryTypes.String},
	{Name: "label", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// appendsFile is a Parquet file of rows rows in one row group: row i's
// text names the file and the row, then pseudo-random letters to
// rowBytes.
func appendsFile(name string, rows, rowBytes int) ([]byte, error) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, appendsSchema)
	defer b.Release()
	rnd := rand.New(rand.NewPCG(uint64(len(name)), uint64(rows)))
	text := make([]byte, rowBytes)
	for i := range rows {
		n := copy(text, fmt.Sprintf("%s/%d ", name, i))
		for j := n; j < len(text); j++ {
			text[j] = 'a' + byte(rnd.IntN(26))
		}
		b.Field(0).(*array.StringBuilder).Append(string(text))
		b.Field(1).(*array.Int64Builder).Append(int64(i % 10))
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(appendsSchema, &buf, pq.NewWriterProperties(), pqarrow.DefaultWriterProps())
	if err != nil {
		return nil, err
	}
	if err := w.Write(rec); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeAppendsFiles writes files data/NAME-00000.parquet … beside the
// dataset, 4 at a time, and returns their bytes.
func writeAppendsFiles(ctx context.Context, st s3backend.Store, name string, files, rows, rowBytes int) (int64, error) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	var total atomic.Int64
	for f := range files {
		g.Go(func() error {
			stem := fmt.Sprintf("%s-%05d", name, f)
			b, err := appendsFile(stem, rows, rowBytes)
			if err != nil {
				return fmt.Errorf("bench: writing %s: %w", stem, err)
			}
			if _, err := st.Put(gctx, "data/"+stem+".parquet", bytes.NewReader(b), int64(len(b))); err != nil {
				return fmt.Errorf("bench: uploading %s: %w", stem, err)
			}
			total.Add(int64(len(b)))
			return nil
		})
	}
	err := g.Wait()
	return total.Load(), err
}

// indexProcess runs the brand binary's `index --src s3://formats/SRC
// --dst s3://formats/SRC-index` (and extra) through cs's proxy and
// measures it: the process's wall and CPU time, and what the proxy saw
// it list and read of SRC and write under SRC-index. It returns what the
// process printed too.
func indexProcess(ctx context.Context, bin string, cs *countedStore, src string, extra ...string) (IndexRun, string, error) {
	args := append([]string{"index", "--src", "s3://" + formatsBucket + "/" + src, "--dst", "s3://" + formatsBucket + "/" + src + "-index",
		"--s3-endpoint", cs.proxy.url, "--s3-region", "us-east-1"}, extra...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = gatewayEnv(cs.srv.AccessKey, cs.srv.SecretKey)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	setProcAttr(cmd)
	before := cs.proxy.snapshot()
	start := time.Now()
	err := cmd.Run()
	elapsed := time.Since(start)
	if err != nil {
		return IndexRun{}, out.String(), fmt.Errorf("bench: brand %s: %w\n%s", strings.Join(args, " "), err, lastLines(out.String(), 20))
	}
	list, get, put := cs.proxy.since(before, "LIST"), cs.proxy.since(before, "GET "+src), cs.proxy.since(before, "PUT "+src+"-index")
	run := IndexRun{Name: src, Seconds: elapsed.Seconds(), ListRequests: list.Requests, ListBytes: list.Bytes,
		GetRequests: get.Requests, GetBytes: get.Bytes, Written: put.Bytes}
	if cmd.ProcessState != nil {
		run.CPU = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	}
	return run, out.String(), nil
}

// appendedRe finds the versions in `brand index --append`'s line.
var appendedRe = regexp.MustCompile(`index ([0-9a-f]{16}) extends ([0-9a-f]{16})`)

const appendsPrefix = "appends" // the dataset's prefix in the bucket

// RunAppends runs the appends benchmark.
func RunAppends(ctx context.Context, cfg AppendsConfig) (*AppendsReport, error) {
	fillZero(&cfg, DefaultAppendsConfig())
	if err := cfg.check(); err != nil {
		return nil, err
	}
	started := time.Now()
	rep := &AppendsReport{Header: newHeader(started, cfg.Command), Config: cfg}
	rep.Config.Log = nil
	cs, err := startCountedStore(ctx, filepath.Join(cfg.WorkDir, "appends-minio"))
	if err != nil {
		return nil, err
	}
	defer cs.close()
	// brand index's requests pass a proxy of their own: the gateway's
	// loads of the job's chunks, through cs's, are not its reads.
	ixp, err := newStoreProxy(cs.srv.URL())
	if err != nil {
		return nil, err
	}
	defer ixp.srv.Close()
	ixs := &countedStore{srv: cs.srv, proxy: ixp}
	st, err := cs.open(ctx, appendsPrefix)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	total, err := writeAppendsFiles(ctx, st, "base", cfg.Files, cfg.RowsPerFile, cfg.RowBytes)
	if err != nil {
		return nil, err
	}
	logf(cfg.Log, "%d Parquet files of %d rows, %s, written in %s", cfg.Files, cfg.RowsPerFile, sizeString(total), time.Since(t0).Round(time.Millisecond))
	if rep.Base, _, err = indexProcess(ctx, cfg.GatewayBinary, ixs, appendsPrefix); err != nil {
		return nil, err
	}
	rep.Base.Files, rep.Base.Rows, rep.Base.Bytes = cfg.Files, cfg.Files*cfg.RowsPerFile, total
	logf(cfg.Log, "brand index of %d files: %.2f s, %d GETs (%s)", cfg.Files, rep.Base.Seconds, rep.Base.GetRequests, sizeString(rep.Base.GetBytes))

	grown := total + int64(cfg.Rounds)*int64(cfg.NewFiles)*int64(cfg.RowsPerFile*cfg.RowBytes)
	args := []string{"serve", "--listen", "127.0.0.1:0", "--dataset", "events=s3://" + appendsBucket + "/" + appendsPrefix + "-index",
		"--s3-endpoint", cs.proxy.url, "--s3-region", "us-east-1", "--cache-size", strconv.FormatInt(max(32<<20, 2*grown), 10),
		"--index-poll", cfg.IndexPoll.String(), "--log-format", "json", "--log-level", "info", "--shutdown-timeout", "10s"}
	g, err := startGateway(ctx, cfg.GatewayBinary, args, gatewayEnv(cs.srv.AccessKey, cs.srv.SecretKey), filepath.Join(cfg.WorkDir, "gateway-appends.log"))
	if err != nil {
		return nil, err
	}
	defer g.kill()
	files := cfg.Files
	for round := range cfg.Rounds {
		rep.Load = append(rep.Load, loadAverage())
		r, err := appendRound(ctx, cfg, ixs, st, g, round, files)
		if err != nil {
			return nil, fmt.Errorf("bench: appends, round %d: %w", round, err)
		}
		files += cfg.NewFiles
		logf(cfg.Log, "round %d: brand index --append %.2f s (%d GETs, %s), reload %.2f s, POST %.3f s, first new batch %.2f s after (step %d, record from %d, %d plans fetched again): %.2f s in all",
			round, r.Index.Seconds, r.Index.GetRequests, sizeString(r.Index.GetBytes), r.ReloadSeconds, r.PostSeconds, r.FirstSeconds, r.FirstStep, r.Record.FromStep, r.Replans, r.TotalSeconds)
		rep.Rounds = append(rep.Rounds, r)
	}
	if err := g.stop(15 * time.Second); err != nil {
		return nil, err
	}
	if cfg.ExcludeFiles+cfg.ExcludeRows > 0 {
		last := rep.Rounds[len(rep.Rounds)-1]
		x, err := exclusionRun(ctx, cfg, cs, last.To, grown)
		if err != nil {
			return nil, fmt.Errorf("bench: appends, (5): %w", err)
		}
		logf(cfg.Log, "(5) epoch 0 of %d samples: %s from the store without a list, %s under a list of %d keys (%d chunks emptied); /plan: %s and %s",
			x.Plain.Samples, sizeString(x.Plain.StoreBytes), sizeString(x.Listed.StoreBytes), x.Keys, x.Record.EmptyChunks,
			sizeString(x.Plain.PlanBytes), sizeString(x.Listed.PlanBytes))
		rep.Exclusion = &x
	}
	var totals []float64
	for _, r := range rep.Rounds {
		totals = append(totals, r.TotalSeconds)
	}
	rep.Total = spread(totals)
	rep.Seconds = time.Since(started).Seconds()
	return rep, nil
}

// appendRound runs a round: a job reading the dataset of files files,
// NewFiles more written beside it and appended under it by brand index
// through ixs.
func appendRound(ctx context.Context, cfg AppendsConfig, ixs *countedStore, st s3backend.Store, g *gatewayProc, round, files int) (AppendsRound, error) {
	res := AppendsRound{Round: round, Job: "run-" + strconv.Itoa(round), FilesBefore: files, NewFiles: cfg.NewFiles}
	job := api.Job{Dataset: "events", Name: res.Job, Params: shuffle.Params{Seed: 56, Window: cfg.Window, BatchSize: cfg.BatchSize, World: 1}}
	hc := &http.Client{Transport: newTransport(8)}
	c, err := client.New(g.base, client.Options{HTTPClient: hc, Job: job, Ahead: 3})
	if err != nil {
		return res, err
	}
	name := fmt.Sprintf("new%d", round)
	rd := &appendReader{c: c, step: cfg.StepTime, batch: cfg.BatchSize, newPrefix: "data/" + name + "-", warmSteps: cfg.WarmSteps,
		warm: make(chan struct{})}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- rd.run(rctx) }()
	finished := false // done received
	defer func() {
		cancel()
		if !finished {
			<-done
		}
	}()
	select {
	case <-rd.warm:
	case err := <-done:
		finished = true
		return res, fmt.Errorf("the job's loop before the append: %w", err)
	}

	t0 := time.Now()
	if res.NewBytes, err = writeAppendsFiles(ctx, st, name, cfg.NewFiles, cfg.RowsPerFile, cfg.RowBytes); err != nil {
		return res, err
	}
	written := time.Now()
	res.WriteSeconds = written.Sub(t0).Seconds()

	before := ixs.proxy.snapshot()
	run, out, err := indexProcess(ctx, cfg.GatewayBinary, ixs, appendsPrefix, "--append")
	if err != nil {
		return res, err
	}
	indexed := time.Now()
	ixGet := ixs.proxy.since(before, "GET "+appendsPrefix+"-index")
	run.Files, run.Rows, run.Bytes = cfg.NewFiles, cfg.NewFiles*cfg.RowsPerFile, res.NewBytes
	run.Fraction = ratio(float64(run.ListBytes+run.GetBytes), float64(res.NewBytes))
	res.Index, res.IndexGets, res.IndexGetBytes = run, ixGet.Requests, ixGet.Bytes
	m := appendedRe.FindStringSubmatch(out)
	if m == nil {
		return res, fmt.Errorf("brand index --append printed no version:\n%s", out)
	}
	res.To, res.From = m[1], m[2]
	if pinned := c.Index(); pinned != res.From {
		return res, fmt.Errorf("the job reads index %s, brand index --append extended %s", pinned, res.From)
	}
	if err := waitForIndex(ctx, g, res.To); err != nil {
		return res, err
	}
	reloaded := time.Now()
	res.ReloadSeconds = reloaded.Sub(indexed).Seconds()

	job.Index = res.From
	poster, err := client.New(g.base, client.Options{HTTPClient: hc, Job: job})
	if err != nil {
		return res, err
	}
	var step uint64
	for {
		res.Posts++
		rd.appended.Store(true) // the loop may see the epoch grow from now on
		rec, err := poster.Append(ctx, step, res.To, "")
		if ae, ok := errors.AsType[*client.APIError](err); ok && ae.StatusCode == http.StatusConflict && ae.FirstEditableStep != nil && res.Posts < 50 {
			step = *ae.FirstEditableStep
			continue
		}
		if err != nil {
			return res, err
		}
		res.Record = rec
		break
	}
	posted := time.Now()
	res.PostSeconds = posted.Sub(reloaded).Seconds()
	res.StepAtPost = int(rd.steps.Load())
	res.NewSamples = res.Record.NewSamples
	if want := cfg.NewFiles * cfg.RowsPerFile; res.NewSamples != want {
		return res, fmt.Errorf("the record adds %d samples, want %d", res.NewSamples, want)
	}

	err = <-done
	finished = true
	if err != nil {
		return res, fmt.Errorf("the job's loop: %w", err)
	}
	res.FirstStep, res.FirstRows, res.Replans, res.Replan = rd.firstStep, rd.firstRows, rd.replans, rd.replan
	res.FirstSeconds = rd.firstAt.Sub(posted).Seconds()
	res.TotalSeconds = rd.firstAt.Sub(written).Seconds()
	if uint64(res.FirstStep) < res.Record.FromStep {
		return res, fmt.Errorf("a new row at step %d, before the record's step %d", res.FirstStep, res.Record.FromStep)
	}
	return res, nil
}

// waitForIndex waits until the gateway serves index version id.
func waitForIndex(ctx context.Context, g *gatewayProc, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		var b bytes.Buffer
		code, err := g.get(ctx, "/datasets", &b)
		if err != nil {
			return fmt.Errorf("waiting for index %s: %w", id, err)
		}
		var list api.DatasetList
		if code == http.StatusOK && json.Unmarshal(b.Bytes(), &list) == nil {
			for _, d := range list.Datasets {
				if d.IndexID == id {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the gateway did not load index %s: %w", id, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// appendReader is the job's training loop: it reads epoch after epoch
// with the Go client, holding each batch for a step, until a batch holds
// a row of the new files. When the epoch grows under it (the record's
// epoch has more samples than the plan the client fetched: the client
// refuses the batch, client.ErrBadResponse) it goes on from the position
// it reached with the epoch's plan fetched again, as a trainer resumes.
type appendReader struct {
	c         *client.Client
	step      time.Duration
	batch     int
	newPrefix string
	warmSteps int
	warm      chan struct{} // closed once warmSteps are read
	appended  atomic.Bool   // set before the first POST
	steps     atomic.Int64  // steps the loop has taken

	// Set by run before it returns nil.
	firstStep, firstRows, replans int
	firstAt                       time.Time
	replan                        string // the client's error, the first time the epoch grew
}

func (r *appendReader) run(ctx context.Context) error {
	var warmed sync.Once
	for epoch := 0; ; epoch++ {
		for offset, stuck := 0, false; ; {
			n, found, err := r.rest(ctx, epoch, offset, &warmed)
			if found {
				return nil
			}
			if err == nil {
				break // the epoch's end: the next one
			}
			// Only the epoch growing under the loop, once, is gone on from.
			if !errors.Is(err, client.ErrBadResponse) || !r.appended.Load() || stuck && n == 0 {
				return err
			}
			offset += n * r.batch
			if r.replans++; r.replan == "" {
				r.replan = err.Error()
			}
			stuck = n == 0
		}
	}
}

// rest reads epoch from offset until its end, a new row or an error, and
// returns the batches it took and whether the last held a new row.
func (r *appendReader) rest(ctx context.Context, epoch, offset int, warmed *sync.Once) (int, bool, error) {
	n := 0
	for b, err := range r.c.EpochFrom(ctx, epoch, offset) {
		if err != nil {
			return n, false, err
		}
		rows := 0
		for _, s := range b.Samples {
			if strings.HasPrefix(s.Key, r.newPrefix) {
				rows++
			}
		}
		b.Release()
		now := time.Now()
		step := r.steps.Add(1) - 1
		n++
		if rows > 0 {
			r.firstStep, r.firstRows, r.firstAt = int(step), rows, now
			return n, true, nil
		}
		if step+1 >= int64(r.warmSteps) {
			warmed.Do(func() { close(r.warm) })
		}
		select {
		case <-ctx.Done():
			return n, false, ctx.Err()
		case <-time.After(r.step):
		}
	}
	return n, false, nil
}

// ExclusionRun is (5): epoch 0 of the grown dataset without an exclusion
// list and under one, each read whole by a fresh gateway.
type ExclusionRun struct {
	Files        int `json:"files"`         // the dataset's
	EmptiedFiles int `json:"emptied_files"` // files every row of which the list names
	RowsNamed    int `json:"scattered_rows"`
	Keys         int `json:"keys"`
	// EmptiedBytes is the emptied files' bytes in the store.
	EmptiedBytes int64               `json:"emptied_file_bytes"`
	Record       api.StoredExclusion `json:"record"`
	Plain        ExclusionEpoch      `json:"without"`
	Listed       ExclusionEpoch      `json:"with"`
}

// ExclusionEpoch is one epoch 0 read whole by a fresh gateway.
type ExclusionEpoch struct {
	Job           string  `json:"job"`
	Samples       int     `json:"samples"`
	StoreRequests int64   `json:"store_requests"`
	StoreBytes    int64   `json:"store_bytes"`
	Seconds       float64 `json:"seconds"`
	// PlanBytes is /plan's backend bytes of epoch 0 (the optimum, at the
	// gateway's cache, which holds the dataset): its prediction of
	// StoreBytes.
	PlanBytes int64 `json:"plan_bytes"`
}

// exclusionRun measures (5) on index version index of the dataset, whose
// files are about grown bytes.
func exclusionRun(ctx context.Context, cfg AppendsConfig, cs *countedStore, index string, grown int64) (ExclusionRun, error) {
	x := ExclusionRun{Files: cfg.Files + cfg.Rounds*cfg.NewFiles, EmptiedFiles: cfg.ExcludeFiles, RowsNamed: cfg.ExcludeRows}
	byFile := map[string][]string{} // a file's rows' keys, by the file's stem
	plain, err := exclusionEpoch(ctx, cfg, cs, grown, index, "plain", nil, func(key string) {
		stem := key[:strings.LastIndexByte(key, '/')]
		byFile[stem] = append(byFile[stem], key)
	})
	if err != nil {
		return x, err
	}
	x.Plain = plain
	if len(byFile) != x.Files {
		return x, fmt.Errorf("epoch 0 read rows of %d files, want %d", len(byFile), x.Files)
	}
	stems := make([]string, 0, len(byFile))
	for s := range byFile {
		stems = append(stems, s)
	}
	slices.Sort(stems)
	// The first ExcludeFiles files by name are emptied, and one row of
	// each of the next ExcludeRows files named.
	var keys []string
	st, err := cs.open(ctx, appendsPrefix)
	if err != nil {
		return x, err
	}
	for i, s := range stems[:cfg.ExcludeFiles+cfg.ExcludeRows] {
		if i >= cfg.ExcludeFiles {
			keys = append(keys, byFile[s][0])
			continue
		}
		keys = append(keys, byFile[s]...)
		info, err := st.Stat(ctx, s+".parquet")
		if err != nil {
			return x, err
		}
		x.EmptiedBytes += info.Size
	}
	x.Keys = len(keys)
	named := make(map[string]bool, len(keys))
	for _, k := range keys {
		named[k] = true
	}
	var again error
	listed, err := exclusionEpoch(ctx, cfg, cs, grown, index, "listed", func(c *client.Client) error {
		rec, err := c.Exclude(ctx, 0, keys)
		x.Record, x.Record.Keys = rec, nil
		return err
	}, func(key string) {
		if named[key] && again == nil {
			again = fmt.Errorf("sample %s, which the list names, read", key)
		}
	})
	if err != nil {
		return x, err
	}
	if again != nil {
		return x, again
	}
	if listed.Samples != plain.Samples-len(keys) {
		return x, fmt.Errorf("epoch 0 under the list read %d samples, want %d", listed.Samples, plain.Samples-len(keys))
	}
	x.Listed = listed
	return x, nil
}

// exclusionEpoch reads epoch 0 of job name, pinned to index, whole with
// the Go client through a fresh gateway (its cache holds grown bytes and
// more), calling edit first (if not nil) and seen with every sample's key.
func exclusionEpoch(ctx context.Context, cfg AppendsConfig, cs *countedStore, grown int64, index, name string,
	edit func(*client.Client) error, seen func(string)) (ExclusionEpoch, error) {
	e := ExclusionEpoch{Job: name}
	args := []string{"serve", "--listen", "127.0.0.1:0", "--dataset", "events=s3://" + appendsBucket + "/" + appendsPrefix + "-index",
		"--s3-endpoint", cs.proxy.url, "--s3-region", "us-east-1", "--cache-size", strconv.FormatInt(max(32<<20, 2*grown), 10),
		"--log-format", "json", "--log-level", "info", "--shutdown-timeout", "10s"}
	g, err := startGateway(ctx, cfg.GatewayBinary, args, gatewayEnv(cs.srv.AccessKey, cs.srv.SecretKey), filepath.Join(cfg.WorkDir, "gateway-appends-"+name+".log"))
	if err != nil {
		return e, err
	}
	defer g.kill()
	job := api.Job{Dataset: "events", Name: name, Index: index, Params: shuffle.Params{Seed: 56, Window: cfg.Window, BatchSize: cfg.BatchSize, World: 1}}
	c, err := client.New(g.base, client.Options{HTTPClient: &http.Client{Transport: newTransport(8)}, Job: job, Ahead: 3})
	if err != nil {
		return e, err
	}
	if edit != nil {
		if err := edit(c); err != nil {
			return e, err
		}
	}
	var plan struct {
		Optimal struct {
			Epochs []struct {
				BackendBytes int64 `json:"backend_bytes"`
			} `json:"epochs"`
		} `json:"optimal"`
	}
	var b bytes.Buffer
	q := fmt.Sprintf("/plan?dataset=events&job=%s&index=%s&seed=56&window=%d&batch_size=%d&world=1&epochs=2", name, index, cfg.Window, cfg.BatchSize)
	if code, err := g.get(ctx, q, &b); err != nil || code != http.StatusOK || json.Unmarshal(b.Bytes(), &plan) != nil || len(plan.Optimal.Epochs) == 0 {
		return e, fmt.Errorf("GET %s: %d %v: %s", q, code, err, lastLines(b.String(), 5))
	}
	e.PlanBytes = plan.Optimal.Epochs[0].BackendBytes
	before := cs.proxy.snapshot()
	start := time.Now()
	for b, err := range c.Epoch(ctx, 0) {
		if err != nil {
			return e, err
		}
		for _, s := range b.Samples {
			seen(s.Key)
		}
		e.Samples += len(b.Samples)
		b.Release()
	}
	e.Seconds = time.Since(start).Seconds()
	got := cs.proxy.since(before, "GET "+appendsPrefix)
	e.StoreRequests, e.StoreBytes = got.Requests, got.Bytes
	return e, g.stop(15 * time.Second)
}
