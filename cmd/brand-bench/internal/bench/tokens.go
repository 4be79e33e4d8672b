package bench

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/format/megatron/megatrontest"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// The tokens benchmark (brand-bench tokens): issue 42's figures for token
// jobs (seq=), side by side in one run on one machine.
//
//   - A corpus: one Megatron prefix (corpus.bin/.idx, int32) of documents
//     whose lengths are log-normal, median TokensConfig.Median tokens and
//     σ TokensConfig.Sigma (the defaults: median 500, σ 1.2, mean about
//     1,000 tokens — a web corpus's mix — with about 12 % of the documents
//     past 2,048 tokens and 1 % past 8,192), capped at 131,072. Token j of
//     the corpus is the number j (its position in the .bin), so that every
//     served piece names its document and offset.
//   - Fill. For seq 2,048 and 8,192, bestfit and concat, one gateway reads
//     a whole epoch; every sequence is decoded and its pieces checked
//     against the corpus: the fill (non-pad tokens ÷ tokens, concat's EOS
//     counted as a token), the documents shorter than seq that were cut,
//     and every token of every document once.
//   - Warm throughput. The same four jobs, epochs after the first with the
//     corpus in the gateway's cache, read by Readers concurrent HTTP
//     readers that drain the bodies: tokens served per second and per
//     second of the gateway's CPU (from /proc).
//   - Time to first batch. Blend prefixes (default 2,000: 4,000 objects)
//     of uint16 documents in MinIO, as one source (format/megatron indexes
//     a source of many prefixes as one dataset): `brand index` once, then
//     fresh `brand serve` processes, each timed from its start to the end
//     of batch 0 of a seq=4,096 job.
//   - The trainer's CPU per token. The Go client (client.Batch.Sequences)
//     in this process; in Python (tokens.py, a process of its own),
//     brand.torch.BrandDataset(seq=)'s steps, the brand client with the
//     members stacked into (B, seq) int32 tensors or its bodies viewed,
//     nanoGPT's memmap loader over the local corpus.bin, and the same
//     packing done trainer-side (greedy best-fit over a buffer of
//     documents). Each reports its own CPU time over the tokens it hands
//     the loop.
//
// Everything shares the machine's cores: the load average is recorded.

//go:embed tokens.py
var tokensPy []byte

// TokensConfig describes a tokens benchmark run; zero fields take
// DefaultTokensConfig's values.
type TokensConfig struct {
	Documents     int     // documents in the corpus
	Median        float64 // median document length, tokens
	Sigma         float64 // σ of the log of the length
	Seqs          []int   // sequence lengths of the fill and throughput jobs
	BatchTokens   int     // tokens per batch (batch_size = BatchTokens / seq)
	Window        int     // shuffle window, chunks
	ChunkSize     int64   // the index's chunk size
	WarmEpochs    int     `zero:"kept"` // warm epochs timed per job
	Readers       int     // concurrent readers of the warm epochs
	BlendPrefixes int     // prefixes of the blend
	BlendDocs     int     // documents per blend prefix
	FirstBatches  int     `zero:"kept"` // fresh gateways timed on the blend
	TrainerTokens int     // tokens each trainer-side loader hands over
	TrainerSeq    int     // seq of the trainer-side loaders
	PackBuffer    int     // documents in the Python packer's buffer
	Seed          uint64  `zero:"kept"`

	Interpreter string // Python with numpy and torch; found when empty
	Harness
}

// DefaultTokensConfig: 60,000 documents (about 60 M tokens), seq 2,048
// and 8,192, 64 Ki tokens a batch, a blend of 2,000 prefixes of 50
// documents.
func DefaultTokensConfig() TokensConfig {
	return TokensConfig{Documents: 60000, Median: 500, Sigma: 1.2, Seqs: []int{2048, 8192}, BatchTokens: 65536,
		Window: 8, ChunkSize: 16 << 20, WarmEpochs: 2, Readers: 2, BlendPrefixes: 2000, BlendDocs: 50, FirstBatches: 3,
		TrainerTokens: 32 << 20, TrainerSeq: 4096, PackBuffer: 10000, Seed: 42}
}

// SmallTokensConfig is a short run: 12,000 documents, a blend of 2,000
// prefixes of 4 documents, 8 Mi tokens per trainer loader.
func SmallTokensConfig() TokensConfig {
	c := DefaultTokensConfig()
	c.Documents, c.ChunkSize, c.WarmEpochs, c.BlendDocs, c.FirstBatches, c.TrainerTokens = 12000, 4<<20, 1, 4, 2, 8<<20
	return c
}

// The pad and EOS of the fill jobs: above every token of a corpus under
// 2^31 − 2 tokens.
const (
	tokensPad = math.MaxInt32
	tokensEOS = math.MaxInt32 - 1
)

// TokensReport is the benchmark's result: tokens.json.
type TokensReport struct {
	Header
	Documents int    `json:"documents"`
	Tokens    int64  `json:"tokens"`
	Lengths   string `json:"lengths"` // the length distribution, in words
	// Past is the share of documents longer than each seq.
	Past       map[string]float64 `json:"share_past_seq"`
	Chunks     int                `json:"chunks"`
	Window     int                `json:"window"`
	Jobs       []TokensJob        `json:"jobs"`
	First      TokensFirst        `json:"first_batch"`
	Trainer    []TokensTrainer    `json:"trainer"`
	TrainerSeq int                `json:"trainer_seq"`
	Targets    []Target           `json:"targets"`
	Load       []float64          `json:"load_average"` // the 1-minute load average at each stage
	Seconds    float64            `json:"seconds"`
}

// TokensJob is one (seq, pack) job: its epoch checked, and its warm epochs.
type TokensJob struct {
	Seq       int    `json:"seq"`
	Pack      string `json:"pack"`
	BatchSize int    `json:"batch_size"`
	Sequences int    `json:"sequences"`
	// Fill is non-pad tokens ÷ tokens over the epoch, as read; GatewayFill
	// is /epoch/0's.
	Fill        float64 `json:"fill"`
	GatewayFill float64 `json:"gateway_fill"`
	// ShortCuts are documents shorter than seq cut across sequences;
	// Split all documents cut (long ones included).
	ShortCuts int `json:"short_cuts"`
	Split     int `json:"split"`
	// Exact says every token of every document was read once.
	Exact bool `json:"exact"`
	// Warm: tokens served over the warm epochs, the wall time, the
	// gateway's CPU seconds, and the rates.
	WarmTokens       int64   `json:"warm_tokens"`
	WarmSeconds      float64 `json:"warm_seconds"`
	GatewayCPU       float64 `json:"gateway_cpu_s"`
	HarnessCPU       float64 `json:"harness_cpu_s"`
	TokensPerSec     float64 `json:"tokens_per_s"`
	TokensPerCoreSec float64 `json:"tokens_per_gateway_core_s"`
}

// TokensFirst is the blend's time to first batch.
type TokensFirst struct {
	Prefixes     int       `json:"prefixes"`
	Objects      int       `json:"objects"`
	Documents    int       `json:"documents"`
	IndexSeconds float64   `json:"index_s"`       // brand index, once per dataset version
	Ready        []float64 `json:"ready_s"`       // start to /readyz
	First        []float64 `json:"first_batch_s"` // start to batch 0's last byte
	Seq          int       `json:"seq"`
	BatchSize    int       `json:"batch_size"`
}

// TokensTrainer is one trainer-side loader's CPU per token.
type TokensTrainer struct {
	Loader     string  `json:"loader"`
	Tokens     int64   `json:"tokens"`
	Seconds    float64 `json:"seconds"`
	CPUSeconds float64 `json:"cpu_seconds"`
	NsPerToken float64 `json:"cpu_ns_per_token"`
	Fill       float64 `json:"fill,omitempty"` // the Python packer's
	Note       string  `json:"note,omitempty"`
}

// The trainer-side loaders.
const (
	tokLoaderGo     = "go-client"
	tokLoaderDS     = "brand-dataset"
	tokLoaderPy     = "python-client"
	tokLoaderViews  = "python-views"
	tokLoaderMemmap = "nanogpt-memmap"
	tokLoaderPack   = "python-bestfit"
)

var tokensLoaderLabels = map[string]string{
	tokLoaderGo:     "Brand, Go client: Batch.Sequences ([]int32 views)",
	tokLoaderDS:     "Brand, BrandDataset(seq=) steps, num_workers=0 ((B, seq) int32 views of the buffer)",
	tokLoaderPy:     "Brand, Python client: members stacked to (B, seq) int32 tensors",
	tokLoaderViews:  "Brand, Python client: batch bodies (bytes) viewed in place as (B, seq) int32 tensors by the script",
	tokLoaderMemmap: "nanoGPT: memmap, random offsets, int64 → int32 tensors (no documents)",
	tokLoaderPack:   "Python best-fit packing trainer-side over a buffer of documents",
}

// docLengths draws n document lengths, log-normal around median.
func docLengths(n int, median, sigma float64, seed uint64) []int {
	r := rand.New(rand.NewPCG(seed, 0x746f6b656e73))
	out := make([]int, n)
	for i := range out {
		l := int(math.Round(median * math.Exp(sigma*r.NormFloat64())))
		out[i] = min(max(l, 1), 131072)
	}
	return out
}

// writeCorpus writes prefix.bin and prefix.idx: documents of lengths, one
// sequence each, in int32, token j being j.
func writeCorpus(prefix string, lengths []int) (tokens int64, err error) {
	f, err := os.Create(prefix + ".bin")
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var b [4]byte
	for _, l := range lengths {
		for range l {
			binary.LittleEndian.PutUint32(b[:], uint32(tokens))
			w.Write(b[:])
			tokens++
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	le := binary.LittleEndian
	idx := append([]byte("MMIDIDX\x00\x00"), make([]byte, 0, 8+1+16+len(lengths)*20)...)
	idx = le.AppendUint64(idx, 1)
	idx = append(idx, 4) // int32
	idx = le.AppendUint64(idx, uint64(len(lengths)))
	idx = le.AppendUint64(idx, uint64(len(lengths)+1))
	for _, l := range lengths {
		idx = le.AppendUint32(idx, uint32(l))
	}
	var p int64
	for _, l := range lengths {
		idx = le.AppendUint64(idx, uint64(p))
		p += int64(l) * 4
	}
	for i := range len(lengths) + 1 {
		idx = le.AppendUint64(idx, uint64(i))
	}
	return tokens, os.WriteFile(prefix+".idx", idx, 0o644)
}

// putFile uploads a local file.
func putFile(ctx context.Context, st s3backend.Store, key, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	_, err = st.Put(ctx, key, f, fi.Size())
	return err
}

// runBrand runs the brand binary (brand index) and returns its output.
func runBrandCmd(ctx context.Context, bin string, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("bench: brand %s: %w\n%s", strings.Join(args, " "), err, lastLines(string(out), 20))
	}
	return string(out), nil
}

// RunTokens runs the tokens benchmark.
func RunTokens(ctx context.Context, cfg TokensConfig) (*TokensReport, error) {
	fillZero(&cfg, DefaultTokensConfig())
	if err := cfg.check(); err != nil {
		return nil, err
	}
	started := time.Now()
	interp, err := findInterpreter(ctx, cfg.Interpreter, "numpy, torch", "python3-numpy python3-torch")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	pyDir, err := findAbove(filepath.Join("python", "brand", "__init__.py"))
	if err != nil {
		return nil, err
	}
	pyDir = filepath.Dir(filepath.Dir(pyDir))
	script := filepath.Join(cfg.WorkDir, "tokens.py")
	if err := os.WriteFile(script, tokensPy, 0o644); err != nil {
		return nil, err
	}
	rep := &TokensReport{Header: newHeader(started, cfg.Command),
		Documents: cfg.Documents, Window: cfg.Window, Past: map[string]float64{}, TrainerSeq: cfg.TrainerSeq,
		Lengths: fmt.Sprintf("log-normal, median %.0f tokens, σ %.1f, capped at 131,072", cfg.Median, cfg.Sigma)}
	rep.Load = append(rep.Load, loadAverage())

	lengths := docLengths(cfg.Documents, cfg.Median, cfg.Sigma, cfg.Seed)
	for _, s := range cfg.Seqs {
		n := 0
		for _, l := range lengths {
			if l > s {
				n++
			}
		}
		rep.Past[strconv.Itoa(s)] = float64(n) / float64(len(lengths))
	}
	local := filepath.Join(cfg.WorkDir, "corpus")
	if rep.Tokens, err = writeCorpus(local, lengths); err != nil {
		return nil, err
	}
	if rep.Tokens >= tokensEOS {
		return nil, fmt.Errorf("bench: %d tokens: the corpus must stay under 2^31 − 2 tokens", rep.Tokens)
	}
	starts := make([]int64, len(lengths)+1)
	for i, l := range lengths {
		starts[i+1] = starts[i] + int64(l)
	}
	logf(cfg.Log, "corpus: %d documents, %d tokens (%s), %s", len(lengths), rep.Tokens, sizeString(4*rep.Tokens), rep.Lengths)

	srv, err := miniotest.Start(ctx, filepath.Join(cfg.WorkDir, "tokens-minio"))
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	const bucket = "tokens"
	if err := srv.MakeBucket(ctx, bucket); err != nil {
		return nil, err
	}
	store, err := s3backend.Open(ctx, "s3://"+bucket+"/corpus", srv.Config())
	if err != nil {
		return nil, err
	}
	for _, ext := range []string{".bin", ".idx"} {
		if err := putFile(ctx, store, "corpus_text_document"+ext, local+ext); err != nil {
			return nil, err
		}
	}
	env := gatewayEnv(srv.AccessKey, srv.SecretKey)
	out, err := runBrandCmd(ctx, cfg.GatewayBinary, env, "index", "--src", "s3://"+bucket+"/corpus", "--s3-endpoint", srv.URL(),
		"--s3-region", "us-east-1", "--chunk-size", strconv.FormatInt(cfg.ChunkSize, 10))
	if err != nil {
		return nil, err
	}
	logf(cfg.Log, "brand index: %s", strings.TrimSpace(lastLines(out, 2)))

	g, err := startGateway(ctx, cfg.GatewayBinary, []string{"serve", "--listen", "127.0.0.1:0", "--dataset", "corpus=s3://" + bucket + "/corpus",
		"--s3-endpoint", srv.URL(), "--s3-region", "us-east-1", "--cache-size", strconv.FormatInt(3*4*rep.Tokens+(256<<20), 10),
		"--log-format", "json", "--log-level", "info", "--shutdown-timeout", "10s", "--index-poll", "0"}, env, filepath.Join(cfg.WorkDir, "gateway-tokens.log"))
	if err != nil {
		return nil, err
	}
	defer g.kill()
	for _, seq := range cfg.Seqs {
		for _, mode := range []string{"bestfit", "concat"} {
			rep.Load = append(rep.Load, loadAverage())
			job, err := tokensJob(ctx, cfg, g, seq, mode, lengths, starts)
			if err != nil {
				return nil, err
			}
			logf(cfg.Log, "seq %d %s: fill %.4f (gateway %.4f), %d short documents cut, %d split, exact %v; warm %.1f M tokens/s, %.1f M per gateway core-s",
				seq, mode, job.Fill, job.GatewayFill, job.ShortCuts, job.Split, job.Exact, job.TokensPerSec/1e6, job.TokensPerCoreSec/1e6)
			rep.Jobs = append(rep.Jobs, job)
		}
	}
	var info struct{ Chunks int }
	if _, err := gatewayJSON(ctx, g, "/epoch/0?dataset=corpus", &info); err == nil {
		rep.Chunks = info.Chunks
	}

	rep.Load = append(rep.Load, loadAverage())
	if err := tokensTrainers(ctx, cfg, rep, g, interp, pyDir, script, local); err != nil {
		return nil, err
	}
	if err := g.stop(10 * time.Second); err != nil {
		return nil, err
	}

	rep.Load = append(rep.Load, loadAverage())
	if rep.First, err = tokensFirstBatch(ctx, cfg, srv); err != nil {
		return nil, err
	}
	rep.Targets = rep.targets()
	rep.Seconds = time.Since(started).Seconds()
	return rep, nil
}

// gatewayJSON fetches path and decodes it into v.
func gatewayJSON(ctx context.Context, g *gatewayProc, path string, v any) ([]byte, error) {
	var b strings.Builder
	code, err := g.get(ctx, path, &b)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("status %d: %s", code, b.String())
	}
	if err == nil {
		err = json.Unmarshal([]byte(b.String()), v)
	}
	if err != nil {
		return nil, fmt.Errorf("bench: GET %s: %w", path, err)
	}
	return []byte(b.String()), nil
}

// tokensQuery is a token job's query.
func tokensQuery(cfg TokensConfig, seq int, mode string) (string, int) {
	bs := max(1, cfg.BatchTokens/seq)
	q := fmt.Sprintf("dataset=corpus&seed=7&window=%d&batch_size=%d&seq=%d&pack=%s&pad=%d", cfg.Window, bs, seq, mode, tokensPad)
	if mode == "concat" {
		q += fmt.Sprintf("&eos=%d", tokensEOS)
	}
	return q, bs
}

// tokensJob checks epoch 0 of a job against the corpus and times its warm
// epochs.
func tokensJob(ctx context.Context, cfg TokensConfig, g *gatewayProc, seq int, mode string, lengths []int, starts []int64) (TokensJob, error) {
	q, bs := tokensQuery(cfg, seq, mode)
	job := TokensJob{Seq: seq, Pack: mode, BatchSize: bs}
	var info struct {
		Batches int
		Samples int
		Tokens  struct {
			Fill  float64
			Split int
		}
	}
	if _, err := gatewayJSON(ctx, g, "/epoch/0?"+q, &info); err != nil {
		return job, err
	}
	job.GatewayFill, job.Split = info.Tokens.Fill, info.Tokens.Split
	chk := newPieceCheck(lengths, starts, seq, mode == "concat")
	var buf strings.Builder
	for m := range info.Batches {
		buf.Reset()
		code, err := g.get(ctx, fmt.Sprintf("/epoch/0/batch/%d?%s", m, q), &buf)
		if err != nil || code != http.StatusOK {
			return job, fmt.Errorf("bench: seq %d %s batch %d: status %d, %v", seq, mode, m, code, err)
		}
		samples, err := client.DecodeTar([]byte(buf.String()))
		if err != nil {
			return job, err
		}
		for _, s := range samples {
			ids, err := client.Int32s(s.Files[client.InputIDs])
			if err != nil {
				return job, err
			}
			pos, err := client.Int32s(s.Files[client.PositionIDs])
			if err != nil {
				return job, err
			}
			chk.add(ids, pos)
		}
	}
	job.Sequences, job.Fill, job.ShortCuts, job.Exact = chk.sequences, chk.fill(), chk.shortCuts, chk.exact()

	// Warm epochs: Readers goroutines take batches in turn and drain them.
	gw0, h0, t0 := processCPU(g.cmd.Process.Pid), processCPU(0), time.Now()
	var tokens atomic.Int64
	for e := 1; e <= max(1, cfg.WarmEpochs); e++ {
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make([]error, cfg.Readers)
		for r := range cfg.Readers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					m := int(next.Add(1) - 1)
					if m >= info.Batches {
						return
					}
					n, err := countingGet(ctx, g, fmt.Sprintf("/epoch/%d/batch/%d?%s", e, m, q))
					if err != nil {
						errs[r] = err
						return
					}
					tokens.Add(n)
				}
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return job, err
			}
		}
	}
	job.WarmSeconds = time.Since(t0).Seconds()
	job.GatewayCPU = (processCPU(g.cmd.Process.Pid) - gw0).Seconds()
	job.HarnessCPU = (processCPU(0) - h0).Seconds()
	// Every sequence is two members of 128 + 4·seq bytes rounded to 512
	// with a 512-byte header each; tokens are counted from the bodies'
	// Brand-Batch-Samples.
	job.WarmTokens = tokens.Load() * int64(seq)
	job.TokensPerSec = float64(job.WarmTokens) / job.WarmSeconds
	job.TokensPerCoreSec = ratio(float64(job.WarmTokens), job.GatewayCPU)
	return job, nil
}

// pieceCheck reads an epoch's sequences against a corpus whose token j is
// j (writeCorpus): each piece (a run of position_ids from 0) names its
// document by its first token and must continue it token by token.
type pieceCheck struct {
	lengths   []int
	starts    []int64 // document d is tokens starts[d] … starts[d+1]-1
	seq       int
	concat    bool    // a piece that ends its document ends with tokensEOS
	seen      []int64 // tokens read of each document
	bad       int     // pieces that do not continue their document
	sequences int
	nonpad    int64 // tokens that are not pad, concat's EOS included
	total     int64
	shortCuts int // documents shorter than seq read in more than one piece
}

func newPieceCheck(lengths []int, starts []int64, seq int, concat bool) *pieceCheck {
	return &pieceCheck{lengths: lengths, starts: starts, seq: seq, concat: concat, seen: make([]int64, len(lengths))}
}

// add reads one sequence.
func (c *pieceCheck) add(ids, pos []int32) {
	c.sequences++
	c.total += int64(len(ids))
	for i := 0; i < len(ids); {
		j := i + 1
		for j < len(ids) && pos[j] != 0 {
			j++
		}
		piece := ids[i:j]
		i = j
		if piece[0] == tokensPad {
			continue // the pad, one last segment
		}
		n := len(piece)
		if c.concat && piece[n-1] == tokensEOS {
			n--
			c.nonpad++
		}
		c.nonpad += int64(n)
		if n == 0 {
			continue
		}
		first := int64(piece[0])
		d := sort.Search(len(c.lengths), func(k int) bool { return c.starts[k+1] > first })
		if d == len(c.lengths) {
			c.bad++
			continue
		}
		for k := range n {
			if int64(piece[k]) != first+int64(k) || first+int64(k) >= c.starts[d+1] {
				c.bad++
				break
			}
		}
		c.seen[d] += int64(n)
		if c.lengths[d] < c.seq && n < c.lengths[d] && first == c.starts[d] {
			c.shortCuts++ // counted once, at the document's first piece
		}
	}
}

func (c *pieceCheck) fill() float64 { return ratio(float64(c.nonpad), float64(c.total)) }

// exact reports whether every token of every document was read once and
// every piece continued its document.
func (c *pieceCheck) exact() bool {
	if c.bad > 0 {
		return false
	}
	for d, n := range c.seen {
		if n != int64(c.lengths[d]) {
			return false
		}
	}
	return true
}

// countingGet reads a batch, drains its body and returns its sequences
// (Brand-Batch-Samples).
func countingGet(ctx context.Context, g *gatewayProc, path string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.base+path, nil)
	if err != nil {
		return 0, err
	}
	resp, err := g.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("bench: GET %s: %s", path, resp.Status)
	}
	n, err := strconv.ParseInt(resp.Header.Get("Brand-Batch-Samples"), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bench: GET %s: Brand-Batch-Samples %q", path, resp.Header.Get("Brand-Batch-Samples"))
	}
	return n, nil
}

// tokensTrainers measures each trainer-side loader's CPU per token.
func tokensTrainers(ctx context.Context, cfg TokensConfig, rep *TokensReport, g *gatewayProc, interp, pyDir, script, local string) error {
	seq, bs := cfg.TrainerSeq, max(1, cfg.BatchTokens/cfg.TrainerSeq)
	// The Go client, in this process: its CPU over the loop.
	c, err := client.New(g.base, client.Options{Ahead: 2, Job: api.Job{Dataset: "corpus", Seq: seq,
		Params: shuffle.Params{Seed: 7, BatchSize: bs}}})
	if err != nil {
		return err
	}
	c0, t0 := selfCPU(), time.Now()
	var n int64
	for b, err := range c.Epoch(ctx, 100) {
		if err != nil {
			return err
		}
		seqs, err := b.Sequences()
		if err != nil {
			return err
		}
		for _, s := range seqs {
			n += int64(len(s.InputIDs))
		}
		b.Release()
		if n >= int64(cfg.TrainerTokens) {
			break
		}
	}
	cpu := (selfCPU() - c0).Seconds()
	rep.Trainer = append(rep.Trainer, TokensTrainer{Loader: tokLoaderGo, Tokens: n, Seconds: time.Since(t0).Seconds(), CPUSeconds: cpu,
		NsPerToken: 1e9 * cpu / float64(n)})
	logf(cfg.Log, "trainer %s: %.2f ns CPU per token", tokLoaderGo, rep.Trainer[len(rep.Trainer)-1].NsPerToken)

	common := []string{"--seq", strconv.Itoa(seq), "--batch-size", strconv.Itoa(bs), "--tokens", strconv.Itoa(cfg.TrainerTokens)}
	runs := []struct {
		loader string
		args   []string
	}{
		{tokLoaderDS, []string{"dataset", "--url", g.base, "--dataset", "corpus", "--epoch", "103"}},
		{tokLoaderPy, []string{"brand", "--url", g.base, "--dataset", "corpus", "--epoch", "101"}},
		{tokLoaderViews, []string{"views", "--url", g.base, "--dataset", "corpus", "--epoch", "102"}},
		{tokLoaderMemmap, []string{"memmap", "--bin", local + ".bin", "--dtype", "int32"}},
		{tokLoaderPack, []string{"pack", "--bin", local + ".bin", "--idx", local + ".idx", "--dtype", "int32", "--buffer", strconv.Itoa(cfg.PackBuffer)}},
	}
	for _, r := range runs {
		var o struct {
			Tokens     int64   `json:"tokens"`
			Seconds    float64 `json:"seconds"`
			CPUSeconds float64 `json:"cpu_seconds"`
			Fill       float64 `json:"fill"`
		}
		if err := runPyJSON(ctx, interp, pyDir, script, append(r.args, common...), &o); err != nil {
			return err
		}
		t := TokensTrainer{Loader: r.loader, Tokens: o.Tokens, Seconds: o.Seconds, CPUSeconds: o.CPUSeconds,
			NsPerToken: 1e9 * o.CPUSeconds / float64(o.Tokens), Fill: o.Fill}
		rep.Trainer = append(rep.Trainer, t)
		logf(cfg.Log, "trainer %s: %.2f ns CPU per token", r.loader, t.NsPerToken)
	}
	return nil
}

// runPyJSON runs script (a bench's Python side) under interp with args,
// the brand package of pyDir importable and one BLAS thread, and decodes
// the last line of its output, a JSON object, into out.
func runPyJSON(ctx context.Context, interp, pyDir, script string, args []string, out any) error {
	cmd := exec.CommandContext(ctx, interp, append([]string{"-W", "ignore", script}, args...)...)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+pyDir, "OMP_NUM_THREADS=1")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	setProcAttr(cmd)
	name := filepath.Base(script) + " " + args[0]
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("bench: %s: %w\n%s", name, err, lastLines(stderr.String(), 20))
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(lastLines(stdout.String(), 1))), out); err != nil {
		return fmt.Errorf("bench: %s: its output %q: %w", name, stdout.String(), err)
	}
	return nil
}

// selfCPU is this process's user and system CPU time from getrusage, to
// the microsecond (/proc's ticks are 10 ms).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return processCPU(0)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// tokensFirstBatch writes the blend, indexes it once and times fresh
// gateways to their first batch.
func tokensFirstBatch(ctx context.Context, cfg TokensConfig, srv *miniotest.Server) (TokensFirst, error) {
	const bucket = "blend"
	f := TokensFirst{Prefixes: cfg.BlendPrefixes, Objects: 2 * cfg.BlendPrefixes, Seq: 4096, BatchSize: 8}
	if err := srv.MakeBucket(ctx, bucket); err != nil {
		return f, err
	}
	store, err := s3backend.Open(ctx, "s3://"+bucket+"/blend", srv.Config())
	if err != nil {
		return f, err
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				p := int(next.Add(1) - 1)
				if p >= cfg.BlendPrefixes {
					return
				}
				ls := docLengths(cfg.BlendDocs, cfg.Median, cfg.Sigma, cfg.Seed+uint64(p)+1)
				docs := make([][]int64, len(ls))
				for d, l := range ls {
					docs[d] = make([]int64, l)
					for t := range docs[d] {
						docs[d][t] = int64((d*7919 + t) % 50257)
					}
				}
				bin, idx := megatrontest.Files("uint16", docs)
				name := fmt.Sprintf("shard_%04d_text_document", p)
				for _, o := range []struct {
					key string
					b   []byte
				}{{name + ".bin", bin}, {name + ".idx", idx}} {
					if _, err := store.Put(ctx, o.key, strings.NewReader(string(o.b)), int64(len(o.b))); err != nil {
						errs[w] = err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return f, err
		}
	}
	f.Documents = cfg.BlendPrefixes * cfg.BlendDocs
	logf(cfg.Log, "blend: %d prefixes (%d objects) of %d documents each in MinIO", f.Prefixes, f.Objects, cfg.BlendDocs)
	env := gatewayEnv(srv.AccessKey, srv.SecretKey)
	t0 := time.Now()
	if _, err := runBrandCmd(ctx, cfg.GatewayBinary, env, "index", "--src", "s3://"+bucket+"/blend", "--s3-endpoint", srv.URL(),
		"--s3-region", "us-east-1"); err != nil {
		return f, err
	}
	f.IndexSeconds = time.Since(t0).Seconds()
	logf(cfg.Log, "blend: brand index %.2f s", f.IndexSeconds)
	for k := range max(1, cfg.FirstBatches) {
		t0 := time.Now()
		g, err := startGateway(ctx, cfg.GatewayBinary, []string{"serve", "--listen", "127.0.0.1:0", "--dataset", "blend=s3://" + bucket + "/blend",
			"--s3-endpoint", srv.URL(), "--s3-region", "us-east-1", "--log-format", "json", "--log-level", "info",
			"--shutdown-timeout", "10s", "--index-poll", "0"}, env, filepath.Join(cfg.WorkDir, fmt.Sprintf("gateway-blend-%d.log", k)))
		if err != nil {
			return f, err
		}
		ready := time.Since(t0).Seconds()
		code, err := g.get(ctx, fmt.Sprintf("/epoch/0/batch/0?dataset=blend&seed=%d&seq=%d&batch_size=%d", k+1, f.Seq, f.BatchSize), io.Discard)
		first := time.Since(t0).Seconds()
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("status %d", code)
		}
		if serr := g.stop(10 * time.Second); err == nil {
			err = serr
		}
		if err != nil {
			return f, fmt.Errorf("bench: the blend's first batch: %w", err)
		}
		f.Ready, f.First = append(f.Ready, ready), append(f.First, first)
		logf(cfg.Log, "blend: fresh gateway %d: ready %.2f s, first batch %.2f s", k, ready, first)
	}
	return f, nil
}

// targets are issue 42's.
func (r *TokensReport) targets() []Target {
	var ts []Target
	minFill, cuts := 1.0, 0
	var rates []float64
	for _, j := range r.Jobs {
		if j.Pack == "bestfit" {
			minFill = min(minFill, j.Fill)
			cuts += j.ShortCuts
		}
		rates = append(rates, j.TokensPerCoreSec/1e6)
	}
	t := atLeast("bestfit fill, the lowest of the seqs", minFill, 0.99)
	t.Note = fmt.Sprintf("%d documents shorter than seq cut", cuts)
	if cuts > 0 {
		t.Status = Miss
	}
	ts = append(ts, t)
	t = atLeast("warm tokens per gateway core-second, millions, the lowest job", minOrZero(rates), 50)
	t.Note = "jobs: " + joinFloats(rates, 1)
	ts = append(ts, t)
	worst := 0.0
	for _, v := range r.First.First {
		worst = max(worst, v)
	}
	t = atMost(fmt.Sprintf("seconds from a fresh gateway's start to the first batch of a %d-prefix blend, the slowest", r.First.Prefixes), worst, 5)
	t.Note = fmt.Sprintf("brand index once: %.1f s", r.First.IndexSeconds)
	ts = append(ts, t)
	return ts
}

// WriteJSON writes the report as JSON.
func (r *TokensReport) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// WriteText writes the report as markdown tables.
func (r *TokensReport) WriteText(w io.Writer) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "Corpus: one Megatron prefix, int32, %d documents, %d tokens; lengths %s", r.Documents, r.Tokens, r.Lengths)
	for _, j := range r.Jobs {
		if j.Pack == "bestfit" {
			fmt.Fprintf(&sb, "; %.1f %% past %d", 100*r.Past[strconv.Itoa(j.Seq)], j.Seq)
		}
	}
	fmt.Fprintf(&sb, ". Window %d chunks (%d chunks in all).\n\n", r.Window, r.Chunks)
	sb.WriteString("| seq | pack | batch | sequences | fill (read) | fill (/epoch) | documents < seq cut | documents split | every token once | warm tokens/s | tokens per gateway core-s |\n")
	sb.WriteString("| --: | --- | --: | --: | --: | --: | --: | --: | --- | --: | --: |\n")
	for _, j := range r.Jobs {
		fmt.Fprintf(&sb, "| %d | %s | %d | %d | %.4f | %.4f | %d | %d | %v | %.1f M | %.1f M |\n", j.Seq, j.Pack, j.BatchSize, j.Sequences,
			j.Fill, j.GatewayFill, j.ShortCuts, j.Split, j.Exact, j.TokensPerSec/1e6, j.TokensPerCoreSec/1e6)
	}
	sb.WriteString("\nWarm: epochs after the first, the corpus in the gateway's cache; gateway and harness CPU over them:\n\n| seq | pack | tokens | s | gateway CPU s | harness CPU s |\n| --: | --- | --: | --: | --: | --: |\n")
	for _, j := range r.Jobs {
		fmt.Fprintf(&sb, "| %d | %s | %d | %.2f | %.2f | %.2f |\n", j.Seq, j.Pack, j.WarmTokens, j.WarmSeconds, j.GatewayCPU, j.HarnessCPU)
	}
	f := r.First
	fmt.Fprintf(&sb, "\nTime to first batch: a blend of %d prefixes (%d objects, %d uint16 documents) in MinIO, one source; `brand index` once: %.2f s; fresh `brand serve`, seq=%d, batch %d:\n\n| gateway | start → ready | start → batch 0 |\n| --: | --: | --: |\n",
		f.Prefixes, f.Objects, f.Documents, f.IndexSeconds, f.Seq, f.BatchSize)
	for k := range f.First {
		fmt.Fprintf(&sb, "| %d | %.2f s | %.2f s |\n", k, f.Ready[k], f.First[k])
	}
	fmt.Fprintf(&sb, "\nThe trainer's CPU per token (seq %d):\n\n| loader | tokens | s | CPU s | CPU ns per token | fill |\n| --- | --: | --: | --: | --: | --: |\n", r.TrainerSeq)
	for _, t := range r.Trainer {
		fill := "—"
		if t.Fill > 0 {
			fill = fmt.Sprintf("%.4f", t.Fill)
		}
		fmt.Fprintf(&sb, "| %s | %d | %.2f | %.2f | %.2f | %s |\n", tokensLoaderLabels[t.Loader], t.Tokens, t.Seconds, t.CPUSeconds, t.NsPerToken, fill)
	}
	fmt.Fprintf(&sb, "\nLoad average at each stage: %s; %d CPUs (%s).\n\nTargets:\n", joinFloats(r.Load, 1), r.Machine.CPUs, r.Machine.CPUModel)
	for _, t := range r.Targets {
		fmt.Fprintf(&sb, "  %-4s %s: %.3f (want %s; %s)\n", t.Status, t.Name, t.Ratio, t.Want, t.Note)
	}
	fmt.Fprintf(&sb, "\n%s; %.0f s\n", r.Command, r.Seconds)
	_, err := io.WriteString(w, sb.String())
	return err
}
