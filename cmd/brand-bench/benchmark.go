package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
	"github.com/brandgw/brand/cmd/brand-bench/internal/chart"
	"github.com/brandgw/brand/internal/cli"
)

// benchmark is one benchmark command but run (whose presets and grouped
// flags are its own). Every one has the same shape, which command gives
// it: parse the flags onto the defaults (or onto --small's configuration,
// under flags given explicitly), find the brand binary, make the work
// and output directories, record the command line, bound the run, print
// the text report, and write NAME.txt, NAME.json and, where the report
// draws a chart, NAME.chart.json and NAME.png. A benchmark says only what
// differs: its name, defaults, flags and run.
type benchmark[C any, R benchReport] struct {
	name     string // the command, and the stem of its files
	synopsis string
	config   func() C // the defaults
	// small is --small's configuration, smallDoc its help; nil: the
	// command has no --small.
	small    func() C
	smallDoc string
	timeout  time.Duration // --timeout's default
	// flags binds the command's own flags to cfg. What it returns, if not
	// nil, runs once the flags are parsed: what a flag cannot say alone
	// (a list that replaces its default, a preset, a check across flags).
	flags func(fs *flag.FlagSet, cfg *C) (parsed func() error)
	// profiles, if not nil, is where cfg keeps --gateway-profiles, made
	// absolute before the run.
	profiles func(cfg *C) *string
	// noGateway is set where the benchmark starts no gateway, so that no
	// brand binary is looked for.
	noGateway bool
	run       func(context.Context, C) (R, error)
}

// benchReport is what every benchmark's report writes. One that also has
// a Chart method (charted) draws a chart.
type benchReport interface {
	WriteText(io.Writer) error
	WriteJSON(io.Writer) error
}

type charted interface {
	Chart() (*chart.Chart, error)
}

// harnessed is a pointer to a benchmark's configuration: the part every
// one has, bench.Harness, is reached by Base.
type harnessed[C any] interface {
	*C
	Base() *bench.Harness
}

// benchOptions are a benchmark command's parsed flags.
type benchOptions[C any] struct {
	cfg     C
	small   bool
	out     string
	timeout time.Duration
	parsed  func() error
}

func (b benchmark[C, R]) charts() bool {
	_, ok := any(*new(R)).(charted)
	return ok
}

// files names what the command writes, for --out's help.
func (b benchmark[C, R]) files() string {
	if b.charts() {
		return fmt.Sprintf("%[1]s.txt, %[1]s.json, %[1]s.chart.json and %[1]s.png (drawn by brand-chart)", b.name)
	}
	return fmt.Sprintf("%[1]s.txt and %[1]s.json", b.name)
}

func (b benchmark[C, R]) flagSet(o *benchOptions[C]) *flag.FlagSet {
	fs := flag.NewFlagSet(b.name, flag.ContinueOnError)
	if b.small != nil {
		fs.BoolVar(&o.small, "small", false, b.smallDoc)
	}
	o.parsed = b.flags(fs, &o.cfg)
	fs.StringVar(&o.out, "out", o.out, "directory for "+b.files())
	fs.DurationVar(&o.timeout, "timeout", o.timeout, "bound on the whole run")
	return fs
}

func (b benchmark[C, R]) options(cfg C) *benchOptions[C] {
	return &benchOptions[C]{cfg: cfg, out: "bench-results", timeout: b.timeout}
}

// parse parses the command's flags onto the defaults, or, with --small,
// onto the small configuration: the flags are parsed once onto the
// defaults to find --small (and report any error, with the defaults in
// the help), then again onto its configuration, so that flags given
// explicitly apply over it wherever they stand.
func (b benchmark[C, R]) parse(env *cli.Env, args []string) (*benchOptions[C], error) {
	o := b.options(b.config())
	if err := parseFlags(b.flagSet(o), env, args, b.synopsis); err != nil {
		return o, err
	}
	if o.small {
		o = b.options(b.small())
		fs := b.flagSet(o)
		fs.SetOutput(io.Discard)
		if err := fs.Parse(args); err != nil {
			return o, fmt.Errorf("parsing the flags onto --small: %w", err)
		}
	}
	if o.parsed != nil {
		return o, o.parsed()
	}
	return o, nil
}

// command is the benchmark as a command of brand-bench.
func command[C any, PC harnessed[C], R benchReport](b benchmark[C, R]) func(context.Context, *cli.Env, []string) error {
	return func(ctx context.Context, env *cli.Env, args []string) error {
		o, err := b.parse(env, args)
		if err != nil {
			return err
		}
		cfg := o.cfg
		h := PC(&cfg).Base()
		if !b.noGateway {
			if err := defaultBrand(&h.GatewayBinary); err != nil {
				return err
			}
		}
		if b.profiles != nil {
			p := b.profiles(&cfg)
			if *p, err = profileDir(*p); err != nil {
				return err
			}
		}
		cleanup, err := workAndOut(&h.WorkDir, o.out, b.name)
		defer cleanup()
		if err != nil {
			return err
		}
		h.Command = commandLine("brand-bench "+b.name, args)
		h.Log = env.Stderr
		ctx, cancel := context.WithTimeout(ctx, o.timeout)
		defer cancel()
		rep, err := b.run(ctx, cfg)
		if err != nil {
			return err
		}
		if err := rep.WriteText(env.Stdout); err != nil {
			return err
		}
		files := []report{{b.name + ".txt", rep.WriteText}, {b.name + ".json", rep.WriteJSON}}
		if c, ok := any(rep).(charted); ok {
			files = append(files, chartReport(b.name, c))
		}
		return writeReports(env.Stderr, o.out, files...)
	}
}
