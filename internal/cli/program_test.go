package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"
)

// testProgram is a program with a command of each outcome. Its usage and
// the commands' output let a test see which command ran with what.
func testProgram(defaultCommand string) *Program {
	echo := func(_ context.Context, env *Env, args []string) error {
		fmt.Fprintf(env.Stdout, "echo %q\n", args)
		return nil
	}
	flags := func(_ context.Context, env *Env, args []string) error {
		fs := flag.NewFlagSet("flags", flag.ContinueOnError)
		n := fs.Int("n", 0, "a number")
		if err := ParseFlags(fs, env, args, "prog flags [-n N]"); err != nil {
			return err
		}
		fmt.Fprintf(env.Stdout, "n=%d\n", *n)
		return NoArgs(fs)
	}
	return &Program{
		Name: "prog",
		Usage: func(w io.Writer, commands []Command) {
			fmt.Fprint(w, "Usage: prog <command>\n")
			for _, c := range commands {
				fmt.Fprintf(w, "  %s\n", c.Name)
			}
		},
		Commands: []Command{
			{Name: "echo", Run: echo},
			{Name: "flags", Run: flags},
			{Name: "fail", Run: func(context.Context, *Env, []string) error { return errors.New("boom") }},
			{Name: "usage", Run: func(context.Context, *Env, []string) error { return fmt.Errorf("bad: %w", ErrUsage) }},
		},
		Default: defaultCommand,
	}
}

func TestRun(t *testing.T) {
	tests := []struct {
		name           string
		defaultCommand string
		args           []string
		code           int
		stdout, stderr string // each must contain these
	}{
		{name: "no command", args: nil, code: 2, stderr: "Usage: prog <command>"},
		{name: "help", args: []string{"help"}, code: 0, stdout: "  flags\n"},
		{name: "--help", args: []string{"--help"}, code: 0, stdout: "Usage: prog <command>"},
		{name: "help on a command", args: []string{"help", "flags"}, code: 0, stderr: "Usage: prog flags [-n N]\n\nFlags:\n  -n int"},
		{name: "-h on a command", args: []string{"flags", "-h"}, code: 0, stderr: "-n int"},
		{name: "help on an unknown command", args: []string{"help", "nope"}, code: 2, stderr: "prog: unknown command \"nope\"\n\nUsage:"},
		{name: "unknown command", args: []string{"nope"}, code: 2, stderr: "prog: unknown command \"nope\"\n\nUsage: prog <command>"},
		{name: "a flag is no command", args: []string{"-n", "1"}, code: 2, stderr: `unknown command "-n"`},
		{name: "command", args: []string{"echo", "a", "b"}, code: 0, stdout: `echo ["a" "b"]`},
		{name: "flags", args: []string{"flags", "-n", "3"}, code: 0, stdout: "n=3"},
		{name: "bad flag", args: []string{"flags", "-x"}, code: 2, stderr: "flag provided but not defined: -x\nUsage: prog flags"},
		{name: "bad flag value", args: []string{"flags", "-n", "x"}, code: 2, stderr: "invalid value"},
		{name: "stray argument", args: []string{"flags", "extra"}, code: 1, stderr: `prog flags: unexpected arguments ["extra"]`},
		{name: "usage error", args: []string{"usage"}, code: 2},
		{name: "failure", args: []string{"fail"}, code: 1, stderr: "prog fail: boom\n"},
		{name: "default: empty", defaultCommand: "echo", args: nil, code: 0, stdout: "echo []"},
		{name: "default: a flag", defaultCommand: "flags", args: []string{"-n", "4"}, code: 0, stdout: "n=4"},
		{name: "default: a command", defaultCommand: "flags", args: []string{"echo", "-n"}, code: 0, stdout: `echo ["-n"]`},
		{name: "default: help", defaultCommand: "echo", args: []string{"-h"}, code: 0, stdout: "Usage: prog <command>"},
		{name: "default: unknown command", defaultCommand: "echo", args: []string{"nope"}, code: 2, stderr: `unknown command "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := testProgram(tt.defaultCommand).Run(t.Context(), &Env{Stdout: &stdout, Stderr: &stderr}, tt.args)
			if code != tt.code || !strings.Contains(stdout.String(), tt.stdout) || !strings.Contains(stderr.String(), tt.stderr) {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s\nwant stdout to contain %q and stderr %q",
					code, tt.code, stdout.String(), stderr.String(), tt.stdout, tt.stderr)
			}
			if tt.name == "usage error" && stderr.Len() > 0 {
				t.Fatalf("a usage error printed %q; the command complains itself", stderr.String())
			}
		})
	}
}
