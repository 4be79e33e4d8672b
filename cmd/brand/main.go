// Command brand packs training datasets into chunks in object storage and
// serves them to training jobs as shuffled batches over HTTP.
//
// Run `brand help` for the subcommands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *cliEnv, args []string) error
}

// cliEnv is what a subcommand may touch of the outside world, so tests can
// run subcommands in-process.
type cliEnv struct {
	stdout, stderr io.Writer
	getenv         func(string) string
}

func commands() []command {
	return []command{
		{"demo", "generate a small synthetic dataset, pack it locally and serve it", runDemo},
		{"serve", "serve shuffled batches of one or more datasets over HTTP", runServe},
		{"pack", "pack a directory tree into tar chunks and an index in a store", runPack},
		{"index", "index existing tar shards (e.g. a WebDataset dataset) in place", runIndex},
		{"inspect", "print a dataset's summary; --verify checks every chunk", runInspect},
		{"plan", "simulate a job's cache behaviour and report the optimum", runPlan},
		{"healthcheck", "exit 0 if a URL (a gateway's /readyz) answers 200: for container healthchecks", runHealthcheck},
		{"version", "print the version", func(_ context.Context, env *cliEnv, _ []string) error {
			fmt.Fprintln(env.stdout, "brand", version)
			return nil
		}},
	}
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "brand %s: feed training jobs shuffled batches from chunked datasets in object storage\n\nUsage: brand <command> [flags]\n\nCommands:\n", version)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "  %-11s %s\n", "help", "show this help, or `brand help <command>` for a command's flags")
	fmt.Fprintf(w, "\nS3 credentials come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION and AWS_ENDPOINT_URL, or the --s3-* flags.\n")
}

// run dispatches a command line and returns the process exit code.
func run(ctx context.Context, env *cliEnv, args []string) int {
	if len(args) == 0 {
		usage(env.stderr)
		return 2
	}
	name, rest := args[0], args[1:]
	if name == "help" || name == "-h" || name == "--help" || name == "-help" {
		if len(rest) == 0 {
			usage(env.stdout)
			return 0
		}
		name, rest = rest[0], []string{"-h"}
	}
	for _, c := range commands() {
		if c.name != name {
			continue
		}
		err := c.run(ctx, env, rest)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			return 2
		default:
			fmt.Fprintf(env.stderr, "brand %s: %v\n", name, err)
			return 1
		}
	}
	fmt.Fprintf(env.stderr, "brand: unknown command %q\n\n", name)
	usage(env.stderr)
	return 2
}

// errUsage reports a command line a FlagSet already complained about.
var errUsage = errors.New("usage")

// parseFlags parses a subcommand's flags, printing its usage on error.
func parseFlags(fs *flag.FlagSet, env *cliEnv, args []string, synopsis string) error {
	fs.SetOutput(env.stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: brand %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	return nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, &cliEnv{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}, os.Args[1:])
	stop()
	os.Exit(code)
}
