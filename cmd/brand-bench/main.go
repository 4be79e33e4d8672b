// Command brand-bench is Brand's benchmark harness (package internal/bench)
// as a binary of its own, so that the server binary and its image link
// neither the harness nor its charting libraries.
//
// `brand-bench run` (the default command) measures a brand binary's
// gateway, started with `brand serve`, beside the limits and baselines; it
// starts each limit as a process of its own with `brand-bench limit`, run
// from this same executable. Run `brand-bench help` for the commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

type command struct {
	name, synopsis, summary string
	run                     func(ctx context.Context, env *cliEnv, args []string) error
}

// cliEnv is what a command may touch of the outside world, so tests can
// run commands in-process.
type cliEnv struct {
	stdout, stderr io.Writer
}

func commands() []command {
	return []command{
		{"run", "[run] [--smoke | --small] [flags]", "run the benchmark (the default command)", runBench},
		{"limit", "limit --kind KIND --dataset s3://bucket/prefix [flags]", "serve one of the benchmark's limits; run starts these itself", runLimit},
		{"version", "version", "print the version", func(_ context.Context, env *cliEnv, _ []string) error {
			fmt.Fprintln(env.stdout, "brand-bench", version)
			return nil
		}},
	}
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "brand-bench %s: benchmark Brand's gateway against the limits of any gateway and against per-object reads and WebDataset\n\nUsage:\n", version)
	for _, c := range commands() {
		fmt.Fprintf(w, "  brand-bench %s\n        %s\n", c.synopsis, c.summary)
	}
	fmt.Fprintf(w, "  brand-bench help [command]\n        show this help, or a command's flags\n")
}

func isHelp(arg string) bool {
	return arg == "help" || arg == "-h" || arg == "--help" || arg == "-help"
}

// run dispatches a command line and returns the process exit code. A
// command line that starts with a flag, or is empty, is the run command's.
func run(ctx context.Context, env *cliEnv, args []string) int {
	name, rest := "run", args
	switch {
	case len(args) > 0 && isHelp(args[0]):
		if len(args) == 1 {
			usage(env.stdout)
			return 0
		}
		name, rest = args[1], []string{"-h"}
	case len(args) > 0 && !strings.HasPrefix(args[0], "-"):
		name, rest = args[0], args[1:]
	}
	for _, c := range commands() {
		if c.name != name {
			continue
		}
		err := c.run(ctx, env, rest)
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			return 2
		default:
			fmt.Fprintf(env.stderr, "brand-bench %s: %v\n", name, err)
			return 1
		}
	}
	fmt.Fprintf(env.stderr, "brand-bench: unknown command %q\n\n", name)
	usage(env.stderr)
	return 2
}

// errUsage reports a command line a FlagSet already complained about.
var errUsage = errors.New("usage")

// parseFlags parses a command's flags, printing its usage on error.
func parseFlags(fs *flag.FlagSet, env *cliEnv, args []string, synopsis string) error {
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: brand-bench %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, &cliEnv{stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:])
	stop()
	os.Exit(code)
}
