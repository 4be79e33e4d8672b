package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
	"github.com/brandgw/brand/cmd/brand-bench/internal/chart"
	"github.com/brandgw/brand/internal/cli"
)

// runOptions are the run command's options: the benchmark's Config, and
// what only the command uses (where the report goes, the bound on the
// whole run, a profile of this process).
type runOptions struct {
	cfg        bench.Config
	out        string
	timeout    time.Duration
	cpuProfile string
}

// presets are the configurations a run starts from, by flag.
type presets struct{ smoke, small bool }

func (p *presets) bind(fs *flag.FlagSet) {
	fs.BoolVar(&p.smoke, "smoke", false, "run every configuration on a tiny dataset in seconds (checks the harness, not performance)")
	fs.BoolVar(&p.small, "small", false, "the small-sample configuration: 100,000 samples of 10 KiB (flags given explicitly still apply)")
}

func (p presets) config() (bench.Config, error) {
	switch {
	case p.smoke && p.small:
		return bench.Config{}, errors.New("--smoke and --small exclude each other")
	case p.smoke:
		return bench.SmokeConfig(), nil
	case p.small:
		return bench.SmallConfig(), nil
	}
	return bench.DefaultConfig(), nil
}

// flagSet binds every flag of the run command to o.
func (o *runOptions) flagSet(p *presets) *flag.FlagSet {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	p.bind(fs)
	bindDataset(fs, &o.cfg.Dataset)
	bindJob(fs, &o.cfg.Job)
	bindConcurrency(fs, &o.cfg.Concurrency)
	bindBrand(fs, &o.cfg.Brand)
	bindPolicy(fs, &o.cfg.Policy)
	bindProcesses(fs, &o.cfg.Processes)
	bindRun(fs, &o.cfg)
	fs.StringVar(&o.out, "out", o.out, "directory for report.txt, report.json, throughput.chart.json and throughput.png (drawn by brand-chart)")
	fs.DurationVar(&o.timeout, "timeout", o.timeout, "bound on the whole run, setup included")
	fs.StringVar(&o.cpuProfile, "cpuprofile", o.cpuProfile, "write a CPU profile of this process (the clients, the proxy and the memory server; not the gateway) to this file")
	return fs
}

func newRunOptions(cfg bench.Config) *runOptions {
	return &runOptions{cfg: cfg, out: "bench-results", timeout: 90 * time.Minute}
}

// parseRun parses the run command's flags. A preset (--smoke or --small)
// is the base that flags given explicitly override, wherever they stand on
// the command line: the flags are parsed once onto the defaults to find
// the preset (and report any error, with the defaults in the help), then
// again onto the preset.
func parseRun(env *cli.Env, args []string) (*runOptions, error) {
	var p presets
	if err := parseFlags(newRunOptions(bench.DefaultConfig()).flagSet(&p), env, args, runSynopsis); err != nil {
		return nil, err
	}
	cfg, err := p.config()
	if err != nil {
		return nil, err
	}
	o := newRunOptions(cfg)
	fs := o.flagSet(&p)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("parsing the flags onto the preset: %w", err)
	}
	o.cfg.Command = commandLine("brand-bench run", args)
	o.cfg.Log = env.Stderr
	return o, nil
}

// runBench runs the benchmark harness against a MinIO it starts on
// loopback, prints the table and the targets, and writes the report as
// text, JSON and a PNG chart into --out.
func runBench(ctx context.Context, env *cli.Env, args []string) error {
	o, err := parseRun(env, args)
	if err != nil {
		return err
	}
	cleanup, err := o.prepare()
	if err != nil {
		return err
	}
	defer cleanup()
	if o.cpuProfile != "" {
		stop, err := cli.StartCPUProfile(o.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	rep, err := bench.Run(ctx, o.cfg)
	if err != nil {
		return err
	}
	if err := rep.WriteText(env.Stdout); err != nil {
		return err
	}
	return o.writeReport(env, rep)
}

// prepare finds the binaries the run starts and makes its directories;
// cleanup removes a temporary work directory.
func (o *runOptions) prepare() (cleanup func(), err error) {
	cleanup = func() {}
	exe, err := os.Executable()
	if err != nil {
		return cleanup, fmt.Errorf("finding this executable, whose limit command serves the limits: %w", err)
	}
	// The limits are this build's, whichever gateway binary is measured.
	o.cfg.Processes.LimitBinary = exe
	needsGateway := slices.ContainsFunc(o.cfg.Groups, func(g string) bool {
		return g == bench.GroupBrand || g == bench.GroupPolicy || g == bench.GroupDisk || g == bench.GroupPython
	})
	if o.cfg.Processes.GatewayBinary == "" && needsGateway {
		if o.cfg.Processes.GatewayBinary, err = findBrand(exe); err != nil {
			return cleanup, err
		}
	}
	if o.cfg.Processes.GatewayProfiles, err = profileDir(o.cfg.Processes.GatewayProfiles); err != nil {
		return cleanup, err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return cleanup, fmt.Errorf("--out: %w", err)
	}
	if o.cfg.WorkDir != "" {
		if err := os.MkdirAll(o.cfg.WorkDir, 0o755); err != nil {
			return cleanup, fmt.Errorf("--work-dir: %w", err)
		}
		return cleanup, nil
	}
	dir, err := os.MkdirTemp("", "brand-bench-")
	if err != nil {
		return cleanup, err
	}
	o.cfg.WorkDir = dir
	return func() { os.RemoveAll(dir) }, nil
}

// defaultBrand fills an empty --gateway-binary with the brand binary
// beside this executable, else on $PATH (findBrand).
func defaultBrand(path *string) error {
	if *path != "" {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	*path, err = findBrand(exe)
	return err
}

// findBrand finds the brand binary to measure when none is given: the one
// beside this executable (where scripts/bench.sh builds both), else the
// one on $PATH.
func findBrand(exe string) (string, error) {
	if p, ok := besideOrOnPath(exe, "brand"); ok {
		return p, nil
	}
	return "", fmt.Errorf("no brand binary beside %s or on $PATH: give --gateway-binary", exe)
}

// findBeside finds the program name beside this executable, else on
// $PATH.
func findBeside(name string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	if p, ok := besideOrOnPath(exe, name); ok {
		return p, nil
	}
	return "", fmt.Errorf("no %s beside %s or on $PATH", name, exe)
}

func besideOrOnPath(exe, name string) (string, bool) {
	beside := filepath.Join(filepath.Dir(exe), name)
	if fi, err := os.Stat(beside); err == nil && !fi.IsDir() {
		return beside, true
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, true
	}
	return "", false
}

// writeReport writes report.txt, report.json and the throughput chart
// into --out.
func (o *runOptions) writeReport(env *cli.Env, rep *bench.Report) error {
	return writeReports(env.Stderr, o.out, report{"report.txt", rep.WriteText}, report{"report.json", rep.WriteJSON},
		chartReport("throughput", rep))
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// workAndOut makes a command's work directory (a temporary one, removed by
// cleanup, if workDir is empty) and its output directory.
func workAndOut(workDir *string, out, name string) (cleanup func(), err error) {
	cleanup = func() {}
	if *workDir == "" {
		dir, err := os.MkdirTemp("", "brand-bench-"+name+"-")
		if err != nil {
			return cleanup, err
		}
		cleanup = func() { os.RemoveAll(dir) }
		*workDir = dir
	} else if err := os.MkdirAll(*workDir, 0o755); err != nil {
		return cleanup, fmt.Errorf("--work-dir: %w", err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return cleanup, fmt.Errorf("--out: %w", err)
	}
	return cleanup, nil
}

// report is one file a command writes into its output directory.
type report struct {
	name  string
	write func(io.Writer) error
}

// writeReports writes files into out and says which it wrote; charts
// among them are drawn (drawCharts).
func writeReports(stderr io.Writer, out string, files ...report) error {
	var names, charts []string
	for _, f := range files {
		path := filepath.Join(out, f.name)
		if err := writeFile(path, f.write); err != nil {
			return err
		}
		names = append(names, path)
		if strings.HasSuffix(path, chart.Ext) {
			charts = append(charts, path)
		}
	}
	fmt.Fprintf(stderr, "wrote %s\n", strings.Join(names, ", "))
	return drawCharts(stderr, charts)
}

// chartReport is a report's chart as data, NAME.chart.json (see package
// chart), which drawCharts draws as NAME.png.
func chartReport(name string, rep interface{ Chart() (*chart.Chart, error) }) report {
	return report{name + chart.Ext, func(w io.Writer) error {
		c, err := rep.Chart()
		if err != nil {
			return err
		}
		return c.WriteJSON(w)
	}}
}

// drawCharts draws chart files as PNGs beside them with brand-chart
// (tools/brand-chart, a module of its own so that the product's go.mod
// carries no plotting library), found beside this executable, where
// scripts/bench.sh builds it, or on $PATH. Without it the charts stay
// data, and it says how to draw them.
func drawCharts(stderr io.Writer, charts []string) error {
	if len(charts) == 0 {
		return nil
	}
	bin, err := findBeside("brand-chart")
	if err != nil {
		fmt.Fprintf(stderr, "not drawn: %v; draw them with `go run -C tools/brand-chart . FILE.chart.json...` (absolute paths) or scripts/bench.sh\n", err)
		return nil
	}
	cmd := exec.Command(bin, charts...)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("drawing the charts with %s: %w", bin, err)
	}
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

// profileDir makes the --gateway-profiles directory and returns it
// absolute (the gateways run in other directories); "" stays "".
func profileDir(dir string) (string, error) {
	if dir == "" {
		return "", nil
	}
	abs, err := filepath.Abs(dir)
	if err == nil {
		err = os.MkdirAll(abs, 0o755)
	}
	if err != nil {
		return "", fmt.Errorf("--gateway-profiles: %w", err)
	}
	return abs, nil
}
