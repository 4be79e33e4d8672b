// Command brand packs training datasets into chunks in object storage and
// serves them to training jobs as shuffled batches over HTTP.
//
// Run `brand help` for the subcommands.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/brandgw/brand/internal/cli"
	"github.com/brandgw/brand/transform"
	"github.com/brandgw/brand/transform/video"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func program() *cli.Program {
	return &cli.Program{Name: "brand", Usage: usage, Commands: []cli.Command{
		{Name: "demo", Summary: "generate a small dataset of labelled photos, pack it locally and serve it", Run: runDemo},
		{Name: "serve", Summary: "serve shuffled batches of one or more datasets over HTTP", Run: runServe},
		{Name: "pack", Summary: "pack a directory tree into tar chunks and an index in a store", Run: runPack},
		{Name: "index", Summary: "index a dataset where it is, without rewriting it: " + formatNames(), Run: runIndex},
		{Name: "inspect", Summary: "print a dataset's summary; --verify checks every chunk", Run: runInspect},
		{Name: "plan", Summary: "simulate a job's cache behaviour and report the optimum", Run: runPlan},
		{Name: "prewarm", Summary: "read a job's first steps into a gateway's caches before it starts; exit 0 once warm", Run: runPrewarm},
		{Name: "healthcheck", Summary: "exit 0 if a URL (a gateway's /readyz) answers 200: for container healthchecks", Run: runHealthcheck},
		{Name: "version", Summary: "print the version and the JPEG and video decoders this build has", Run: func(_ context.Context, env *cli.Env, args []string) error {
			fs := flag.NewFlagSet("version", flag.ContinueOnError)
			if err := cli.ParseFlags(fs, env, args, "brand version"); err != nil {
				return err
			}
			if err := cli.NoArgs(fs); err != nil {
				return err
			}
			fmt.Fprintln(env.Stdout, "brand", version)
			fmt.Fprintln(env.Stdout, "JPEG decoder:", transform.JPEGDecoderBuild())
			fmt.Fprintln(env.Stdout, "Video decoder:", video.Build())
			if note := pureGoDecoderNote(); note != "" {
				fmt.Fprintln(env.Stdout, "Note:", note)
			}
			return nil
		}},
	}}
}

func usage(w io.Writer, commands []cli.Command) {
	fmt.Fprintf(w, "brand %s: feed training jobs shuffled batches from chunked datasets in object storage\n\nUsage: brand <command> [flags]\n\nCommands:\n", version)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-11s %s\n", c.Name, c.Summary)
	}
	fmt.Fprintf(w, "  %-11s %s\n", "help", "show this help, or `brand help <command>` for a command's flags")
	fmt.Fprintf(w, "\nS3 credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; the endpoint and region from\n"+
		"AWS_ENDPOINT_URL and AWS_REGION, or a command's --s3-endpoint and --s3-region. A local directory works\n"+
		"wherever a store URL is taken. `brand serve` listens on %s (this machine) unless given --listen.\n", defaultListen)
}

// run dispatches a command line and returns the process exit code.
func run(ctx context.Context, env *cli.Env, args []string) int {
	return program().Run(ctx, env, args)
}

func main() { program().Main() }
