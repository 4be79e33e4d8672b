package main

import (
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
	"github.com/brandgw/brand/internal/cli"
)

// The run command's flags are bound straight to the parts of bench.Config
// they set, one small function per part, so that a flag and the field it
// sets sit side by side and a new option is one line in one place.

func bindDataset(fs *flag.FlagSet, d *bench.Dataset) {
	fs.IntVar(&d.Samples, "samples", d.Samples, "synthetic samples")
	fs.Var((*cli.ByteSize)(&d.MeanBytes), "mean-bytes", "mean sample size (sizes are log-normal around it)")
	fs.Var((*cli.ByteSize)(&d.ChunkSize), "chunk-size", "target chunk (shard) size")
	fs.Uint64Var(&d.Seed, "seed", d.Seed, "seed of the synthetic samples and the pack's order")
}

func bindJob(fs *flag.FlagSet, j *api.Job) {
	fs.Uint64Var(&j.Seed, "shuffle-seed", j.Seed, "the job's shuffle seed")
	fs.IntVar(&j.BatchSize, "batch-size", j.BatchSize, "samples per batch")
	fs.IntVar(&j.Window, "window", j.Window, "shuffle window, in chunks")
}

func bindConcurrency(fs *flag.FlagSet, c *bench.Concurrency) {
	fs.Var((*intList)(&c.StreamReaders), "stream-readers", "client concurrencies tried for the limits (a) and (b)")
	fs.Var((*intList)(&c.ObjectReaders), "object-readers", "concurrent readers tried for per-object GETs (c)")
	fs.Var((*intList)(&c.ShardReaders), "shard-readers", "concurrent shard streams tried for WebDataset (d)")
}

func bindBrand(fs *flag.FlagSet, b *bench.Brand) {
	fs.Var((*percentList)(&b.CacheFractions), "cache", "Brand cache sizes, in percent of the dataset (comma-separated)")
	fs.IntVar(&b.Epochs, "epochs", b.Epochs, "epochs per Brand configuration (epoch 0 is cold)")
	fs.IntVar(&b.Ahead, "ahead", b.Ahead, "batches the Brand client keeps in flight")
	fs.Var((*intList)(&b.AheadLevels), "ahead-levels", "read-ahead depths of the extra warm epochs at 100 % cache, compared with (b) at the best of each")
}

func bindPolicy(fs *flag.FlagSet, p *bench.Policy) {
	fs.Var((*percent)(&p.Cache), "policy-cache", "cache size of the lru/next-use comparison, in percent of the dataset")
	fs.IntVar(&p.Epochs, "policy-epochs", p.Epochs, "steady epochs (1..N) of the lru/next-use comparison")
}

// bindProcesses binds the gateway's flags. The limits' binary has no flag:
// it is always this executable (see prepare).
func bindProcesses(fs *flag.FlagSet, p *bench.Processes) {
	fs.StringVar(&p.GatewayBinary, "gateway-binary", p.GatewayBinary, "brand binary whose serve command is the gateway under test (default: brand beside this executable, else on $PATH)")
	fs.Var((*stringList)(&p.GatewayArgs), "gateway-arg", "extra `FLAG` of brand serve for every gateway, e.g. --gateway-arg=--s3-part-size=64MiB (repeatable)")
	fs.StringVar(&p.GatewayProfiles, "gateway-profiles", p.GatewayProfiles, "directory for a CPU profile of each gateway run (gateway-<policy>-<cache %>.pprof; go tool pprof -tagfocus epoch=0 for the cold epoch)")
	fs.StringVar(&p.ServerCPU, "server-cpu", p.ServerCPU, "pin every gateway and limit server of the limits and brand groups to this `CPU` (its number), and the harness's clients to the others (Linux)")
}

// bindRun binds what the run as a whole uses: which groups, where the data
// lives, how long a configuration may take, and the WebDataset baseline's
// buffer.
func bindRun(fs *flag.FlagSet, c *bench.Config) {
	fs.Var((*groupList)(&c.Groups), "only", "run only these groups: "+strings.Join(bench.AllGroups, ", "))
	fs.StringVar(&c.Bucket, "bucket", c.Bucket, "bucket for the dataset and the per-sample objects")
	fs.StringVar(&c.WorkDir, "work-dir", c.WorkDir, "where MinIO keeps the data and the gateways write their logs; kept and reused when given (default: a temporary directory, removed)")
	fs.DurationVar(&c.ConfigTimeout, "config-timeout", c.ConfigTimeout, "bound on each measured configuration")
	fs.IntVar(&c.ShuffleBuffer, "shuffle-buffer", c.ShuffleBuffer, "WebDataset shuffle buffer, in samples")
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, " ") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// intList is a flag of comma-separated positive integers.
type intList []int

func (l *intList) String() string {
	s := make([]string, len(*l))
	for i, v := range *l {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

func (l *intList) Set(v string) error {
	var out intList
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("%q is not a comma-separated list of positive integers", v)
		}
		out = append(out, n)
	}
	*l = out
	return nil
}

// percent is a flag of one percentage in (0, 100], held as a fraction.
type percent float64

func (p *percent) String() string { return strconv.FormatFloat(100*float64(*p), 'g', -1, 64) }

func (p *percent) Set(v string) error {
	f, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), "%"), 64)
	if err != nil || f <= 0 || f > 100 {
		return fmt.Errorf("%q is not a percentage in (0, 100]", v)
	}
	*p = percent(f / 100)
	return nil
}

// percentList is a flag of comma-separated percentages, held as fractions.
type percentList []float64

func (l *percentList) String() string {
	s := make([]string, len(*l))
	for i, v := range *l {
		s[i] = (*percent)(&v).String()
	}
	return strings.Join(s, ",")
}

func (l *percentList) Set(v string) error {
	var out percentList
	for _, f := range strings.Split(v, ",") {
		var p percent
		if err := p.Set(f); err != nil {
			return fmt.Errorf("%q is not a comma-separated list of percentages in (0, 100]", v)
		}
		out = append(out, float64(p))
	}
	*l = out
	return nil
}

// groupList is a flag of comma-separated names of bench.AllGroups.
type groupList []string

func (l *groupList) String() string { return strings.Join(*l, ",") }

func (l *groupList) Set(v string) error {
	var out groupList
	for _, g := range strings.Split(v, ",") {
		g = strings.TrimSpace(g)
		if g == "" {
			continue
		}
		if !slices.Contains(bench.AllGroups, g) {
			return fmt.Errorf("unknown group %q (want some of %s)", g, strings.Join(bench.AllGroups, ", "))
		}
		out = append(out, g)
	}
	if len(out) == 0 {
		return fmt.Errorf("%q names no group", v)
	}
	*l = out
	return nil
}

// wordList is a flag of comma-separated words; it replaces its default.
type wordList []string

func (l *wordList) String() string { return strings.Join(*l, ",") }

func (l *wordList) Set(v string) error {
	var out wordList
	for _, w := range strings.Split(v, ",") {
		if w = strings.TrimSpace(w); w != "" {
			out = append(out, w)
		}
	}
	if len(out) == 0 {
		return fmt.Errorf("%q names nothing", v)
	}
	*l = out
	return nil
}
