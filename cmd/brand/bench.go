package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/brandgw/brand/bench"
)

// runBench runs the benchmark harness (package bench) against a MinIO it
// starts on loopback, prints the table and the targets, and writes the
// report as text, JSON and a PNG chart into --out.
func runBench(ctx context.Context, env *cliEnv, args []string) error {
	var (
		smoke, small             bool
		samples                  int
		mean, chunk              byteSize
		seed                     uint64
		batchSize, window, ahead int
		cache                    percentList
		epochs                   int
		policyCache              float64
		policyEpochs             int
		streamReaders            intList
		aheadLevels              intList
		objectReaders            intList
		shardReaders             intList
		shuffleBuffer            int
		only                     string
		gatewayBin, workDir, out string
		bucket, cpuProfile       string
		gatewayProfiles          string
		gatewayArgs              stringList
		configTimeout, timeout   time.Duration
	)
	d := bench.DefaultConfig()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.BoolVar(&smoke, "smoke", false, "run every configuration on a tiny dataset in seconds (checks the harness, not performance)")
	fs.BoolVar(&small, "small", false, "the small-sample configuration: 100,000 samples of 10 KiB (flags given explicitly still apply)")
	fs.IntVar(&samples, "samples", d.Samples, "synthetic samples")
	mean, chunk = byteSize(d.MeanBytes), byteSize(d.ChunkSize)
	fs.Var(&mean, "mean-bytes", "mean sample size (sizes are log-normal around it)")
	fs.Var(&chunk, "chunk-size", "target chunk (shard) size")
	fs.Uint64Var(&seed, "seed", d.Seed, "dataset, pack and shuffle seed")
	fs.IntVar(&batchSize, "batch-size", d.BatchSize, "samples per batch")
	fs.IntVar(&window, "window", d.Window, "shuffle window, in chunks")
	fs.IntVar(&ahead, "ahead", d.Ahead, "batches the Brand client keeps in flight")
	cache = percentList(d.CacheFractions)
	fs.Var(&cache, "cache", "Brand cache sizes, in percent of the dataset (comma-separated)")
	fs.IntVar(&epochs, "epochs", d.Epochs, "epochs per Brand configuration (epoch 0 is cold)")
	fs.Float64Var(&policyCache, "policy-cache", 100*d.PolicyCache, "cache size of the lru/schedule comparison, in percent of the dataset")
	fs.IntVar(&policyEpochs, "policy-epochs", d.PolicyEpochs, "steady epochs (1..N) of the lru/schedule comparison")
	streamReaders, objectReaders, shardReaders = d.StreamReaders, d.ObjectReaders, d.ShardReaders
	fs.Var(&streamReaders, "stream-readers", "client concurrencies tried for the limits (a) and (b)")
	aheadLevels = d.AheadLevels
	fs.Var(&aheadLevels, "ahead-levels", "read-ahead depths of the extra warm epochs at 100 % cache, compared with (b) at the best of each")
	fs.Var(&objectReaders, "object-readers", "concurrent readers tried for per-object GETs (c)")
	fs.Var(&shardReaders, "shard-readers", "concurrent shard streams tried for WebDataset (d)")
	fs.IntVar(&shuffleBuffer, "shuffle-buffer", d.ShuffleBuffer, "WebDataset shuffle buffer, in samples")
	fs.StringVar(&only, "only", strings.Join(bench.AllGroups, ","), "run only these groups: "+strings.Join(bench.AllGroups, ", "))
	fs.StringVar(&gatewayBin, "gateway-binary", "", "brand binary whose serve command is the gateway under test (default: this executable)")
	fs.StringVar(&workDir, "work-dir", "", "where MinIO keeps the data and the gateways write their logs; kept and reused when given (default: a temporary directory, removed)")
	fs.StringVar(&out, "out", "bench-results", "directory for report.txt, report.json and throughput.png")
	fs.StringVar(&bucket, "bucket", d.Bucket, "bucket for the dataset and the per-sample objects")
	fs.DurationVar(&configTimeout, "config-timeout", d.ConfigTimeout, "bound on each measured configuration")
	fs.DurationVar(&timeout, "timeout", 90*time.Minute, "bound on the whole run, setup included")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of this process (the clients, the proxy and the memory server; not the gateway) to this file")
	fs.Var(&gatewayArgs, "gateway-arg", "extra `brand serve` flag for every gateway, e.g. --gateway-arg=--s3-part-size=64MiB (repeatable)")
	fs.StringVar(&gatewayProfiles, "gateway-profiles", "", "directory for a CPU profile of each gateway run (gateway-<policy>-<cache %>.pprof; go tool pprof -tagfocus epoch=0 for the cold epoch)")
	if err := parseFlags(fs, env, args, "bench [--smoke | --small] [flags]"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if smoke && small {
		return errors.New("--smoke and --small exclude each other")
	}

	cfg := bench.DefaultConfig()
	switch {
	case smoke:
		cfg = bench.SmokeConfig()
	case small:
		cfg = bench.SmallConfig()
	}
	// Flags given explicitly override the preset.
	var ferr error
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "samples":
			cfg.Samples = samples
		case "mean-bytes":
			cfg.MeanBytes = int64(mean)
		case "chunk-size":
			cfg.ChunkSize = int64(chunk)
		case "seed":
			cfg.Seed = seed
		case "batch-size":
			cfg.BatchSize = batchSize
		case "window":
			cfg.Window = window
		case "ahead":
			cfg.Ahead = ahead
		case "cache":
			cfg.CacheFractions = cache
		case "epochs":
			cfg.Epochs = epochs
		case "policy-cache":
			cfg.PolicyCache = policyCache / 100
		case "policy-epochs":
			cfg.PolicyEpochs = policyEpochs
		case "stream-readers":
			cfg.StreamReaders = streamReaders
		case "ahead-levels":
			cfg.AheadLevels = aheadLevels
		case "object-readers":
			cfg.ObjectReaders = objectReaders
		case "shard-readers":
			cfg.ShardReaders = shardReaders
		case "shuffle-buffer":
			cfg.ShuffleBuffer = shuffleBuffer
		case "bucket":
			cfg.Bucket = bucket
		case "config-timeout":
			cfg.ConfigTimeout = configTimeout
		case "only":
			cfg.Groups = nil
			for _, g := range strings.Split(only, ",") {
				if g = strings.TrimSpace(g); g != "" {
					cfg.Groups = append(cfg.Groups, g)
				}
			}
			if len(cfg.Groups) == 0 {
				ferr = errors.New("--only names no group")
			}
		}
	})
	if ferr != nil {
		return ferr
	}
	if gatewayBin == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("finding this executable for the gateway (give --gateway-binary): %w", err)
		}
		gatewayBin = exe
	}
	cfg.GatewayBinary = gatewayBin
	// The limits are this build's, whichever gateway binary is measured.
	if exe, err := os.Executable(); err == nil {
		cfg.LimitBinary = exe
	}
	cfg.GatewayArgs = gatewayArgs
	if gatewayProfiles != "" {
		abs, err := filepath.Abs(gatewayProfiles)
		if err == nil {
			err = os.MkdirAll(abs, 0o755)
		}
		if err != nil {
			return fmt.Errorf("--gateway-profiles: %w", err)
		}
		cfg.GatewayProfiles = abs
	}
	if workDir == "" {
		dir, err := os.MkdirTemp("", "brand-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		workDir = dir
	} else if err := os.MkdirAll(workDir, 0o755); err != nil {
		return err
	}
	cfg.WorkDir = workDir
	cfg.Command = commandLine("brand bench", args)
	cfg.Log = env.stderr
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}

	if cpuProfile != "" {
		stop, err := startCPUProfile(cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	if err := rep.WriteText(env.stdout); err != nil {
		return err
	}
	write := func(name string, fn func(f *os.File) error) error {
		f, err := os.Create(filepath.Join(out, name))
		if err != nil {
			return err
		}
		if err := fn(f); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	if err := write("report.txt", func(f *os.File) error { return rep.WriteText(f) }); err != nil {
		return err
	}
	if err := write("report.json", func(f *os.File) error { return rep.WriteJSON(f) }); err != nil {
		return err
	}
	if err := write("throughput.png", func(f *os.File) error { return rep.WriteChart(f) }); err != nil {
		return err
	}
	fmt.Fprintf(env.stderr, "wrote %s, %s and %s\n", filepath.Join(out, "report.txt"), filepath.Join(out, "report.json"), filepath.Join(out, "throughput.png"))
	return nil
}

// commandLine renders a command for the report, quoting arguments a shell
// would split.
func commandLine(prefix string, args []string) string {
	parts := []string{prefix}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
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

// percentList is a flag of comma-separated percentages, held as fractions.
type percentList []float64

func (l *percentList) String() string {
	s := make([]string, len(*l))
	for i, v := range *l {
		s[i] = strconv.FormatFloat(100*v, 'g', -1, 64)
	}
	return strings.Join(s, ",")
}

func (l *percentList) Set(v string) error {
	var out percentList
	for _, f := range strings.Split(v, ",") {
		p, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(f), "%"), 64)
		if err != nil || p <= 0 || p > 100 {
			return fmt.Errorf("%q is not a comma-separated list of percentages in (0, 100]", v)
		}
		out = append(out, p/100)
	}
	*l = out
	return nil
}
