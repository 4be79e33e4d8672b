package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/cli"
	"github.com/brandgw/brand/internal/gen/synth"
)

// brand runs a command line in-process and returns its exit code and
// output.
func brand(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), &cli.Env{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}, args)
	return code, out.String(), errOut.String()
}

// synthTree writes a small class-folder dataset and returns its directory.
func synthTree(t *testing.T, samples int) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "train")
	if err := (synth.Spec{Samples: samples, MeanBytes: 2000, Classes: 4, Seed: 2}).WriteTree(src); err != nil {
		t.Fatal(err)
	}
	return src
}

func TestPackThenInspectVerify(t *testing.T) {
	src := synthTree(t, 150)
	dst := filepath.Join(t.TempDir(), "store")
	code, out, errOut := brand(t, "pack", "--src", src, "--dst", dst, "--chunk-size", "64KiB", "--shuffle-seed", "5", "--parallel", "2")
	if code != 0 {
		t.Fatalf("pack exited %d:\n%s%s", code, out, errOut)
	}
	m := regexp.MustCompile(`^packed 150 samples into (\d+) chunks \(.*\) at .*, index ([0-9a-f]{16})\n$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("pack printed %q", out)
	}
	if errOut != "" {
		t.Fatalf("pack wrote to a non-terminal stderr: %q", errOut)
	}
	chunks, id := m[1], m[2]

	code, out, errOut = brand(t, "inspect", "--src", dst, "--verify")
	if code != 0 {
		t.Fatalf("inspect --verify exited %d:\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		"dataset       train\n",
		"index         " + id + "\n",
		"chunks        " + chunks + "\n",
		"samples       150\n",
		"chunk target  64 KiB\n",
		"shuffled      yes, seed 5\n",
		"tool          brand dev\n",
		"verify        OK: " + chunks + " chunks, 150 samples,",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}

	// --no-shuffle into an existing dataset needs --overwrite.
	code, _, errOut = brand(t, "pack", "--src", src, "--dst", dst, "--no-shuffle")
	if code != 1 || !strings.Contains(errOut, "already holds a dataset") || !strings.Contains(errOut, "--overwrite") {
		t.Fatalf("pack over a dataset exited %d: %s", code, errOut)
	}
	code, _, errOut = brand(t, "pack", "--src", src, "--dst", dst, "--no-shuffle", "--overwrite", "--name", "sorted")
	if code != 0 {
		t.Fatalf("pack --overwrite exited %d: %s", code, errOut)
	}
	_, out, _ = brand(t, "inspect", "--src", dst)
	if !strings.Contains(out, "dataset       sorted\n") || !strings.Contains(out, "shuffled      no\n") || strings.Contains(out, "verify") {
		t.Fatalf("inspect after the repack:\n%s", out)
	}
}

func TestPackFlags(t *testing.T) {
	src := synthTree(t, 5)
	dst := filepath.Join(t.TempDir(), "store")
	tests := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"pack", "--bogus"}, 2, "flag provided but not defined"},
		{[]string{"pack", "--src", src, "--dst", dst, "--chunk-size", "huge"}, 2, "not a size"},
		{[]string{"pack", "--src", src, "--dst", dst, "--chunk-size", "0"}, 2, "--chunk-size must be positive"},
		{[]string{"pack", "--src", src, "--dst", dst, "--parallel", "0"}, 2, "--parallel must be at least 1"},
		{[]string{"pack", "--src", src, "--dst", dst, "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"pack", "--dst", dst}, 1, "no --src given"},
		{[]string{"pack", "--src", src}, 1, "no --dst given"},
		{[]string{"pack", "--src", filepath.Join(src, "missing"), "--dst", dst}, 1, "no such file or directory"},
		{[]string{"help", "pack"}, 0, "-shuffle-seed"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args[1:], " "), func(t *testing.T) {
			code, out, errOut := brand(t, tt.args...)
			if code != tt.code || !strings.Contains(out+errOut, tt.out) {
				t.Fatalf("exit %d, want %d; output:\n%s%s\nwant it to contain %q", code, tt.code, out, errOut, tt.out)
			}
		})
	}
}
