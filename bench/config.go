package bench

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/brandgw/brand/internal/minioserver"
)

// ErrConfig reports a Config the harness cannot run.
var ErrConfig = errors.New("bench: invalid configuration")

// Groups of configurations a run can be limited to.
const (
	GroupLimits    = "limits"    // (a) and (b)
	GroupBaselines = "baselines" // (c) and (d)
	GroupBrand     = "brand"     // the gateway at each cache fraction
	GroupPolicy    = "policy"    // lru vs schedule vs the planner's optimum
)

// AllGroups lists every group, in the order a run measures them.
var AllGroups = []string{GroupLimits, GroupBaselines, GroupBrand, GroupPolicy}

// Config describes a benchmark run. Zero fields take the defaults of
// DefaultConfig; SmokeConfig is a seconds-long run of every configuration.
type Config struct {
	// The synthetic dataset: Samples images of log-normal sizes around
	// MeanBytes (see internal/synth), packed into chunks of about ChunkSize.
	Samples   int
	MeanBytes int64
	ChunkSize int64
	Seed      uint64 // dataset, pack and shuffle seed

	// The training job every configuration serves.
	BatchSize int // samples per batch
	Window    int // shuffle window, in chunks
	Ahead     int // batches the Brand client keeps in flight
	// AheadLevels are the read-ahead depths of extra warm epochs that the
	// gateway whose cache holds the whole dataset serves after its own
	// epochs: Brand's client concurrency, swept as the limits' is, so that
	// the warm path can be compared with (b) at the best of each.
	AheadLevels []int

	// CacheFractions are the Brand cache sizes, as fractions of the
	// dataset's bytes.
	CacheFractions []float64
	// Epochs is how many epochs each Brand configuration reads (epoch 0 is
	// cold).
	Epochs int
	// PolicyCache is the cache fraction of the policy comparison, which
	// reads epochs 0..PolicyEpochs and compares epochs 1..PolicyEpochs.
	PolicyCache  float64
	PolicyEpochs int

	// Concurrency levels tried for the limits' chunk streams, the
	// per-object readers and the WebDataset shard streams; each reports
	// its best.
	StreamReaders []int
	ObjectReaders []int
	ShardReaders  []int
	// ShuffleBuffer is the WebDataset shuffle buffer, in samples.
	ShuffleBuffer int

	// Groups limits the run to some of AllGroups; nil runs them all.
	Groups []string

	// GatewayBinary is the brand binary whose serve command is the gateway
	// under test. Required for the brand and policy groups.
	GatewayBinary string
	// LimitBinary is the brand binary whose bench-limit command serves the
	// limits (a), (a′) and (b), each as a process of its own (ServeLimit).
	// Default: GatewayBinary. Required for the limits group.
	LimitBinary string
	// GatewayArgs are extra `brand serve` flags for every gateway, after
	// the harness's own (a later flag wins), for experiments such as
	// --s3-part-size or --prefetch-concurrency.
	GatewayArgs []string
	// GatewayProfiles, if set, is a directory where every gateway writes a
	// CPU profile of its run (brand serve --cpuprofile), named like its
	// log: gateway-<policy>-<cache %>.pprof. Samples carry an epoch label.
	GatewayProfiles string
	// Server is the S3 server to use; nil starts a MinIO with its data in
	// WorkDir/minio.
	Server *minioserver.Server
	// Bucket holds the dataset, the per-sample objects and nothing else;
	// default "brand-bench". Data already there from an earlier run with the
	// same dataset parameters is reused.
	Bucket string
	// WorkDir holds the MinIO data, the synthetic source tree while it is
	// packed, and the gateways' logs. Required.
	WorkDir string

	// ConfigTimeout bounds each measured configuration (a concurrency
	// sweep counts as one); Run fails if one takes longer.
	ConfigTimeout time.Duration

	// Command is the command line recorded in the report.
	Command string
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// DefaultConfig is the full benchmark: about 2 GB of 100 KiB samples.
func DefaultConfig() Config {
	return Config{
		Samples:        20000,
		MeanBytes:      100 << 10,
		ChunkSize:      16 << 20,
		Seed:           1,
		BatchSize:      256,
		Window:         8,
		Ahead:          3,
		CacheFractions: []float64{0.25, 0.5, 1},
		Epochs:         3,
		PolicyCache:    0.5,
		PolicyEpochs:   3,
		StreamReaders:  []int{1, 2, 4, 8},
		AheadLevels:    []int{1, 2, 4, 8},
		ObjectReaders:  []int{8, 32, 64},
		ShardReaders:   []int{1, 2, 4},
		ShuffleBuffer:  1000,
		Bucket:         "brand-bench",
		ConfigTimeout:  10 * time.Minute,
	}
}

// SmallConfig is the small-sample benchmark: 100,000 samples of 10 KiB,
// where per-request overhead dominates per-object reads.
func SmallConfig() Config {
	c := DefaultConfig()
	c.Samples = 100000
	c.MeanBytes = 10 << 10
	return c
}

// SmokeConfig runs every configuration on a tiny dataset in seconds. It
// checks that the harness works, not how fast anything is.
func SmokeConfig() Config {
	c := DefaultConfig()
	c.Samples = 400
	c.MeanBytes = 4 << 10
	c.ChunkSize = 128 << 10
	c.BatchSize = 16
	c.Window = 2
	c.Ahead = 2
	c.PolicyEpochs = 2
	c.StreamReaders = []int{1, 2}
	c.AheadLevels = []int{1, 2}
	c.ObjectReaders = []int{4}
	c.ShardReaders = []int{1, 2}
	c.ShuffleBuffer = 64
	c.ConfigTimeout = 2 * time.Minute
	return c
}

// withDefaults fills zero fields from DefaultConfig and checks the result.
func (c Config) withDefaults() (Config, error) {
	d := DefaultConfig()
	setInt := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	setInt(&c.Samples, d.Samples)
	setInt(&c.BatchSize, d.BatchSize)
	setInt(&c.Window, d.Window)
	setInt(&c.Ahead, d.Ahead)
	setInt(&c.Epochs, d.Epochs)
	setInt(&c.PolicyEpochs, d.PolicyEpochs)
	setInt(&c.ShuffleBuffer, d.ShuffleBuffer)
	if c.MeanBytes == 0 {
		c.MeanBytes = d.MeanBytes
	}
	if c.ChunkSize == 0 {
		c.ChunkSize = d.ChunkSize
	}
	if c.Seed == 0 {
		c.Seed = d.Seed
	}
	if c.CacheFractions == nil {
		c.CacheFractions = d.CacheFractions
	}
	if c.PolicyCache == 0 {
		c.PolicyCache = d.PolicyCache
	}
	if c.StreamReaders == nil {
		c.StreamReaders = d.StreamReaders
	}
	if c.AheadLevels == nil {
		c.AheadLevels = d.AheadLevels
	}
	if c.ObjectReaders == nil {
		c.ObjectReaders = d.ObjectReaders
	}
	if c.ShardReaders == nil {
		c.ShardReaders = d.ShardReaders
	}
	if c.Groups == nil {
		c.Groups = AllGroups
	}
	if c.Bucket == "" {
		c.Bucket = d.Bucket
	}
	if c.ConfigTimeout == 0 {
		c.ConfigTimeout = d.ConfigTimeout
	}
	if c.Log == nil {
		c.Log = io.Discard
	}

	bad := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("%w: "+format, append([]any{ErrConfig}, args...)...)
	}
	switch {
	case c.Samples < 1 || c.MeanBytes < 1 || c.ChunkSize < 1:
		return bad("samples %d, mean bytes %d and chunk size %d must be positive", c.Samples, c.MeanBytes, c.ChunkSize)
	case c.BatchSize < 1 || c.Window < 1 || c.Ahead < 1:
		return bad("batch size %d, window %d and ahead %d must be positive", c.BatchSize, c.Window, c.Ahead)
	case c.Epochs < 2:
		return bad("epochs %d: need at least 2 (a cold one and a warm one)", c.Epochs)
	case c.PolicyEpochs < 1:
		return bad("policy epochs %d must be positive", c.PolicyEpochs)
	case c.PolicyCache <= 0 || c.PolicyCache > 1:
		return bad("policy cache fraction %g must be in (0, 1]", c.PolicyCache)
	case c.WorkDir == "":
		return bad("no work directory")
	}
	for _, f := range c.CacheFractions {
		if f <= 0 || f > 1 {
			return bad("cache fraction %g must be in (0, 1]", f)
		}
	}
	for _, levels := range [][]int{c.StreamReaders, c.AheadLevels, c.ObjectReaders, c.ShardReaders} {
		if len(levels) == 0 || slices.Min(levels) < 1 {
			return bad("concurrency levels %v: need at least one, each positive", levels)
		}
	}
	for _, g := range c.Groups {
		if !slices.Contains(AllGroups, g) {
			return bad("unknown group %q (want some of %v)", g, AllGroups)
		}
	}
	if (c.runs(GroupBrand) || c.runs(GroupPolicy)) && c.GatewayBinary == "" {
		return bad("the brand and policy groups need the brand binary (GatewayBinary)")
	}
	if c.LimitBinary == "" {
		c.LimitBinary = c.GatewayBinary
	}
	if c.runs(GroupLimits) && c.LimitBinary == "" {
		return bad("the limits group needs the brand binary (LimitBinary or GatewayBinary)")
	}
	return c, nil
}

func (c *Config) runs(group string) bool { return slices.Contains(c.Groups, group) }

// smallSamples reports whether the run uses the small-sample targets: a
// mean sample under 32 KiB, where per-request overhead dominates.
func (c *Config) smallSamples() bool { return c.MeanBytes < 32<<10 }
