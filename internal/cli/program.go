package cli

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

	"github.com/brandgw/brand/internal/errkind"
)

// ErrUsage reports a command line that was already complained about (by a
// FlagSet, or by the command itself on the standard error): Run exits with
// 2 and prints nothing more.
var ErrUsage = errkind.New(errkind.Internal, "usage")

// Env is what a command may touch of the outside world, so that tests can
// run commands in-process.
type Env struct {
	Stdout, Stderr io.Writer
	// Getenv reads the environment; nil only for commands that never do.
	Getenv func(string) string
}

// Command is one subcommand of a Program.
type Command struct {
	Name string
	// Synopsis is how the command is called, after the program's name; a
	// usage may list it beside Summary.
	Synopsis string
	Summary  string
	// Run runs the command on the arguments after its name. An error that
	// wraps flag.ErrHelp exits with 0, one that wraps ErrUsage with 2, any
	// other is printed and exits with 1.
	Run func(ctx context.Context, env *Env, args []string) error
}

// Program is a binary's subcommand table and how it introduces itself.
type Program struct {
	// Name prefixes every message Run prints ("brand serve: ...").
	Name string
	// Usage writes the program's help, listing commands.
	Usage    func(w io.Writer, commands []Command)
	Commands []Command
	// Default, if set, names the command that runs a command line that is
	// empty or starts with a flag. Without it, an empty command line is a
	// usage error.
	Default string
}

// isHelp reports whether arg asks for help rather than naming a command.
func isHelp(arg string) bool {
	return arg == "help" || arg == "-h" || arg == "--help" || arg == "-help"
}

// Run dispatches a command line (without the program's name) and returns
// the process exit code. `help` alone prints the usage; `help CMD` asks CMD
// for its flags.
func (p *Program) Run(ctx context.Context, env *Env, args []string) int {
	name, rest := p.Default, args
	switch {
	case len(args) > 0 && isHelp(args[0]):
		if len(args) == 1 {
			p.Usage(env.Stdout, p.Commands)
			return 0
		}
		name, rest = args[1], []string{"-h"}
	case len(args) > 0 && (p.Default == "" || !strings.HasPrefix(args[0], "-")):
		name, rest = args[0], args[1:]
	case len(args) == 0 && p.Default == "":
		p.Usage(env.Stderr, p.Commands)
		return 2
	}
	for _, c := range p.Commands {
		if c.Name != name {
			continue
		}
		err := c.Run(ctx, env, rest)
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, ErrUsage):
			return 2
		default:
			fmt.Fprintf(env.Stderr, "%s %s: %v\n", p.Name, name, err)
			return 1
		}
	}
	fmt.Fprintf(env.Stderr, "%s: unknown command %q\n\n", p.Name, name)
	p.Usage(env.Stderr, p.Commands)
	return 2
}

// Main runs the process's command line, cancelling the context on SIGINT
// or SIGTERM so that commands shut down cleanly, and exits with Run's code.
// It is for func main only.
func (p *Program) Main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := p.Run(ctx, &Env{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}, os.Args[1:])
	stop()
	os.Exit(code)
}

// ParseFlags parses a command's flags, printing "Usage: " and synopsis
// (the whole line, program name included) with the flags' defaults on an
// error or on -h. It returns flag.ErrHelp for -h and ErrUsage for a bad
// command line, the FlagSet having complained already.
func ParseFlags(fs *flag.FlagSet, env *Env, args []string, synopsis string) error {
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return ErrUsage
	}
	return nil
}

// NoArgs fails if the parsed command line left arguments that are not
// flags, for commands that take none.
func NoArgs(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return nil
}
