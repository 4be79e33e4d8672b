package bench

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/shuffle"
)

// ErrConfig reports a Config the harness cannot run.
var ErrConfig = errkind.New(errkind.Invalid, "bench: invalid configuration")

// Groups of configurations a run can be limited to.
const (
	GroupLimits    = "limits"    // (a) and (b)
	GroupBaselines = "baselines" // (c) and (d)
	GroupBrand     = "brand"     // the gateway at each cache fraction
	GroupPolicy    = "policy"    // lru vs next-use vs the planner's optimum
	GroupDisk      = "disk"      // RAM only against RAM + a disk tier, and a warm restart
	// GroupPython is PyTorch's DataLoader over boto3 and over Brand, and
	// the Python client beside the Go client (see Python). Skipped, with
	// the reason in the report, where no Python imports torch and boto3.
	GroupPython = "python"
)

// AllGroups lists every group, in the order a run measures them.
var AllGroups = []string{GroupLimits, GroupBaselines, GroupBrand, GroupPolicy, GroupDisk, GroupPython}

// gatewayDataset is the name the gateway under test serves the dataset by.
const gatewayDataset = "bench"

// Config describes a benchmark run. It is grouped by what each part
// describes, so that a reader (or a flag) finds an option by its subject.
// Zero fields take the value of DefaultConfig, the one place defaults are
// written; a nil list takes the default, an empty one is an error.
type Config struct {
	Dataset Dataset
	// Job is the training job every configuration serves: its seed and
	// window fix the order, its batch size cuts it. The harness compares
	// one rank reading every sample of whole epochs with baselines that do
	// the same, so World must be 1 (or 0), Rank and Offset 0 and DropLast
	// false; Dataset is set by the harness to the gateway's one dataset.
	Job         api.Job
	Concurrency Concurrency
	Brand       Brand
	Policy      Policy
	Disk        Disk
	// ShuffleBuffer is the WebDataset (d) shuffle buffer, in samples.
	ShuffleBuffer int
	Python        Python
	Processes     Processes

	// Groups limits the run to some of AllGroups.
	Groups []string
	// Server is the S3 server to use; nil starts a MinIO with its data in
	// WorkDir/minio.
	Server *miniotest.Server
	// Bucket holds the dataset, the per-sample objects and nothing else.
	// Data already there from an earlier run with the same Dataset is
	// reused.
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

// Dataset is the synthetic dataset: Samples images of log-normal sizes
// around MeanBytes (see internal/gen/synth), packed into chunks of about
// ChunkSize. Seed fixes the samples and the pack's order; the job's
// shuffle has a seed of its own (Config.Job.Seed), so that one dataset can
// be read under several jobs without regenerating it.
type Dataset struct {
	Samples   int
	MeanBytes int64
	ChunkSize int64
	Seed      uint64
}

// Concurrency lists the client concurrencies tried for each kind of
// reader; each configuration reports its best, so that every contender is
// measured at its own best rather than at one arbitrary level.
type Concurrency struct {
	StreamReaders []int // chunk streams of the limits (a) and (b)
	ObjectReaders []int // per-object readers of (c)
	ShardReaders  []int // WebDataset shard streams of (d)
}

// Brand describes the gateway's own configurations.
type Brand struct {
	// CacheFractions are the cache sizes, as fractions of the dataset's
	// bytes; each gets a fresh gateway, so its epoch 0 is cold.
	CacheFractions []float64
	// Epochs is how many epochs each configuration reads (epoch 0 is
	// cold, so at least 2).
	Epochs int
	// Ahead is how many batches the Go client keeps in flight.
	Ahead int
	// AheadLevels are the read-ahead depths of extra warm epochs that the
	// gateway whose cache holds the whole dataset serves after its own
	// epochs: Brand's client concurrency, swept as the limits' is, so that
	// the warm path can be compared with (b) at the best of each.
	AheadLevels []int
}

// Policy is the lru/next-use comparison: one cache size, epochs 0..Epochs
// read under each policy, epochs 1..Epochs compared with the planner's
// optimum and simulation of the same trace.
type Policy struct {
	Cache  float64 // cache size, as a fraction of the dataset's bytes
	Epochs int     // steady epochs compared
}

// Disk is the disk tier comparison: at each cache fraction, a gateway
// with the RAM cache alone and one with a disk tier holding the whole
// dataset read epochs 0..Epochs-1 each; then the second is stopped and
// started again on the same disk cache and reads one more epoch.
type Disk struct {
	CacheFractions []float64
}

// Processes are the programs the harness starts, each as a process of its
// own so that its CPU time and peak RSS are its own.
type Processes struct {
	// GatewayBinary is the brand binary whose serve command is the gateway
	// under test. Required for the brand and policy groups.
	GatewayBinary string
	// LimitBinary is the brand-bench binary whose limit command serves the
	// limits (a), (a′), (a″) and (b), one process per limit (ServeLimit):
	// `LimitBinary limit --kind K --listen ADDR --dataset s3://B/P
	// --s3-endpoint URL --s3-region R`. Required for the limits group.
	LimitBinary string
	// GatewayArgs are extra `brand serve` flags for every gateway, after
	// the harness's own (a later flag wins), for experiments such as
	// --s3-part-size or --prefetch-concurrency.
	GatewayArgs []string
	// GatewayProfiles, if set, is a directory where every gateway writes a
	// CPU profile of its run (brand serve --cpuprofile), named like its
	// log: gateway-<policy>-<cache %>.pprof. Samples carry an epoch label.
	GatewayProfiles string
	// ServerCPU, if not empty, is the one core (its number) every gateway
	// and limit server of the limits and brand groups is pinned to, and
	// the harness (the clients) runs on the others: a server and the
	// client that measures it no longer take each other's core in turn,
	// which on a 2-core machine moved one binary's warm rate by up to
	// 0.14 of (b″) from run to run. MinIO is not pinned.
	ServerCPU string
}

// DefaultConfig is the full benchmark: about 2 GB of 100 KiB samples.
func DefaultConfig() Config {
	return Config{
		Dataset: Dataset{Samples: 20000, MeanBytes: 100 << 10, ChunkSize: 16 << 20, Seed: 1},
		Job:     api.Job{Params: shuffle.Params{Seed: 1, Window: 8, BatchSize: 256, World: 1}},
		Concurrency: Concurrency{
			StreamReaders: []int{1, 2, 4, 8},
			ObjectReaders: []int{8, 32, 64},
			ShardReaders:  []int{1, 2, 4},
		},
		Brand:         Brand{CacheFractions: []float64{0.25, 0.5, 1}, Epochs: 3, Ahead: 3, AheadLevels: []int{1, 2, 4, 8}},
		Policy:        Policy{Cache: 0.5, Epochs: 3},
		Disk:          Disk{CacheFractions: []float64{0.25, 1}},
		ShuffleBuffer: 1000,
		Python: Python{Workers: []int{2, 4, 8}, BrandWorkers: []int{0, 2, 4}, CacheFractions: []float64{0.5, 1},
			ObjectSamples: 10000, ClientRounds: 2},
		Groups:        AllGroups,
		Bucket:        "brand-bench",
		ConfigTimeout: 10 * time.Minute,
	}
}

// SmallConfig is the small-sample benchmark: 100,000 samples of 10 KiB,
// where per-request overhead dominates per-object reads.
func SmallConfig() Config {
	c := DefaultConfig()
	c.Dataset.Samples = 100000
	c.Dataset.MeanBytes = 10 << 10
	return c
}

// SmokeConfig runs every configuration on a tiny dataset in seconds. It
// checks that the harness works, not how fast anything is.
func SmokeConfig() Config {
	c := DefaultConfig()
	c.Dataset = Dataset{Samples: 400, MeanBytes: 4 << 10, ChunkSize: 128 << 10, Seed: 1}
	c.Job.BatchSize, c.Job.Window = 16, 2
	c.Brand.Ahead, c.Brand.AheadLevels = 2, []int{1, 2}
	c.Policy.Epochs = 2
	c.Concurrency = Concurrency{StreamReaders: []int{1, 2}, ObjectReaders: []int{4}, ShardReaders: []int{1, 2}}
	c.ShuffleBuffer = 64
	c.ConfigTimeout = 2 * time.Minute
	// The python group starts a Python (and torch) for every measurement:
	// seconds each. TestPythonGroup runs it on its own.
	c.Groups = slices.DeleteFunc(slices.Clone(AllGroups), func(g string) bool { return g == GroupPython })
	c.Python = Python{Workers: []int{1}, BrandWorkers: []int{0, 1}, ColdWorkers: 1, CacheFractions: []float64{1}, ObjectSamples: 0, ClientRounds: 1}
	return c
}

// withDefaults fills zero fields from DefaultConfig and checks the result.
func (c Config) withDefaults() (Config, error) {
	d := DefaultConfig()
	orDefault(&c.Dataset.Samples, d.Dataset.Samples)
	orDefault(&c.Dataset.MeanBytes, d.Dataset.MeanBytes)
	orDefault(&c.Dataset.ChunkSize, d.Dataset.ChunkSize)
	orDefault(&c.Dataset.Seed, d.Dataset.Seed)
	orDefault(&c.Job.Seed, d.Job.Seed)
	orDefault(&c.Job.Window, d.Job.Window)
	orDefault(&c.Job.BatchSize, d.Job.BatchSize)
	orDefault(&c.Job.World, d.Job.World)
	orDefaultList(&c.Concurrency.StreamReaders, d.Concurrency.StreamReaders)
	orDefaultList(&c.Concurrency.ObjectReaders, d.Concurrency.ObjectReaders)
	orDefaultList(&c.Concurrency.ShardReaders, d.Concurrency.ShardReaders)
	orDefaultList(&c.Brand.CacheFractions, d.Brand.CacheFractions)
	orDefaultList(&c.Disk.CacheFractions, d.Disk.CacheFractions)
	orDefault(&c.Brand.Epochs, d.Brand.Epochs)
	orDefault(&c.Brand.Ahead, d.Brand.Ahead)
	orDefaultList(&c.Brand.AheadLevels, d.Brand.AheadLevels)
	orDefault(&c.Policy.Cache, d.Policy.Cache)
	orDefault(&c.Policy.Epochs, d.Policy.Epochs)
	orDefault(&c.ShuffleBuffer, d.ShuffleBuffer)
	orDefaultList(&c.Python.Workers, d.Python.Workers)
	orDefaultList(&c.Python.BrandWorkers, d.Python.BrandWorkers)
	orDefaultList(&c.Python.CacheFractions, d.Python.CacheFractions)
	orDefault(&c.Python.ClientRounds, d.Python.ClientRounds)
	orDefaultList(&c.Groups, d.Groups)
	orDefault(&c.Bucket, d.Bucket)
	orDefault(&c.ConfigTimeout, d.ConfigTimeout)
	if c.Log == nil {
		c.Log = io.Discard
	}
	c.Job.Dataset = gatewayDataset

	for _, err := range []error{c.Dataset.validate(), c.validateJob(), c.Concurrency.validate(), c.Brand.validate(), c.Policy.validate(), c.Python.validate(), c.validateRun()} {
		if err != nil {
			return Config{}, fmt.Errorf("%w: %w", ErrConfig, err)
		}
	}
	return c, nil
}

func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

func orDefaultList[T any](v *[]T, def []T) {
	if *v == nil {
		*v = def
	}
}

func (d Dataset) validate() error {
	if d.Samples < 1 || d.MeanBytes < 1 || d.ChunkSize < 1 {
		return fmt.Errorf("samples %d, mean bytes %d and chunk size %d must be positive", d.Samples, d.MeanBytes, d.ChunkSize)
	}
	return nil
}

func (c *Config) validateJob() error {
	if err := c.Job.Validate(); err != nil {
		return fmt.Errorf("job: %w", err)
	}
	if c.Job.World != 1 || c.Job.Offset != 0 || c.Job.DropLast {
		return fmt.Errorf("job of world %d, offset %d, drop last %t: the harness measures one rank reading every sample of whole epochs",
			c.Job.World, c.Job.Offset, c.Job.DropLast)
	}
	if c.ShuffleBuffer < 1 {
		return fmt.Errorf("shuffle buffer %d must be positive", c.ShuffleBuffer)
	}
	return nil
}

func (cc Concurrency) validate() error {
	return checkLevels(cc.StreamReaders, cc.ObjectReaders, cc.ShardReaders)
}

// checkLevels checks lists of concurrency levels: each needs at least one
// level, and every level is positive.
func checkLevels(lists ...[]int) error {
	for _, levels := range lists {
		if len(levels) == 0 || slices.Min(levels) < 1 {
			return fmt.Errorf("concurrency levels %v: need at least one, each positive", levels)
		}
	}
	return nil
}

func (b Brand) validate() error {
	switch {
	case b.Epochs < 2:
		return fmt.Errorf("epochs %d: need at least 2 (a cold one and a warm one)", b.Epochs)
	case b.Ahead < 1:
		return fmt.Errorf("ahead %d must be positive", b.Ahead)
	}
	for _, f := range b.CacheFractions {
		if f <= 0 || f > 1 {
			return fmt.Errorf("cache fraction %g must be in (0, 1]", f)
		}
	}
	return checkLevels(b.AheadLevels)
}

func (p Python) validate() error {
	if p.ObjectSamples < 0 {
		return fmt.Errorf("python object samples %d must be >= 0", p.ObjectSamples)
	}
	for _, f := range p.CacheFractions {
		if f <= 0 || f > 1 {
			return fmt.Errorf("python cache fraction %g must be in (0, 1]", f)
		}
	}
	if p.ColdWorkers < 0 || len(p.BrandWorkers) == 0 || slices.Min(p.BrandWorkers) < 0 {
		return fmt.Errorf("python brand workers %v and cold workers %d: need at least one, each >= 0", p.BrandWorkers, p.ColdWorkers)
	}
	return checkLevels(p.Workers, []int{p.ClientRounds})
}

func (p Policy) validate() error {
	switch {
	case p.Epochs < 1:
		return fmt.Errorf("policy epochs %d must be positive", p.Epochs)
	case p.Cache <= 0 || p.Cache > 1:
		return fmt.Errorf("policy cache fraction %g must be in (0, 1]", p.Cache)
	}
	return nil
}

// validateRun checks what the run needs from outside: a work directory,
// known groups, and the binaries the selected groups start.
func (c *Config) validateRun() error {
	if c.WorkDir == "" {
		return errors.New("no work directory")
	}
	for _, g := range c.Groups {
		if !slices.Contains(AllGroups, g) {
			return fmt.Errorf("unknown group %q (want some of %v)", g, AllGroups)
		}
	}
	if _, err := c.Processes.serverCPU(); err != nil {
		return err
	}
	if (c.runs(GroupBrand) || c.runs(GroupPolicy) || c.runs(GroupDisk) || c.runs(GroupPython)) && c.Processes.GatewayBinary == "" {
		return errors.New("the brand, policy and python groups need the brand binary (Processes.GatewayBinary; brand-bench finds it for the brand and policy groups, so run python with one of them or give --gateway-binary)")
	}
	if c.runs(GroupLimits) && c.Processes.LimitBinary == "" {
		return errors.New("the limits group needs the brand-bench binary (Processes.LimitBinary)")
	}
	return nil
}

func (c *Config) runs(group string) bool { return slices.Contains(c.Groups, group) }

// smallSamples reports whether the run uses the small-sample targets: a
// mean sample under 32 KiB, where per-request overhead dominates.
func (c *Config) smallSamples() bool { return c.Dataset.MeanBytes < 32<<10 }
