package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestIndexGNUTarShards(t *testing.T) {
	src := synthTree(t, 80)
	store := filepath.Join(t.TempDir(), "laion")
	shards := filepath.Join(store, "shards")
	if err := os.MkdirAll(shards, 0o755); err != nil {
		t.Fatal(err)
	}
	classes, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range classes {
		cmd := exec.Command("tar", "--sort=name", "-C", src, "-cf", filepath.Join(shards, fmt.Sprintf("%05d.tar", i)), c.Name())
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", cmd, err, b)
		}
	}
	code, out, errOut := brand(t, "index", "--src", store, "--prefix", "shards/", "--parallel", "2")
	if code != 0 {
		t.Fatalf("index exited %d:\n%s%s", code, out, errOut)
	}
	if !regexp.MustCompile(fmt.Sprintf(`^indexed 80 samples in %d shards \(.*\) at .*, index [0-9a-f]{16}\n$`, len(classes))).MatchString(out) {
		t.Fatalf("index printed %q", out)
	}
	code, out, errOut = brand(t, "inspect", "--src", store, "--verify")
	if code != 0 {
		t.Fatalf("inspect exited %d:\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"dataset       shards\n", "samples       80\n", "shuffled      no\n", "verify        OK"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "chunk target") {
		t.Errorf("an indexed dataset shows a chunk target:\n%s", out)
	}
}

// TestIndexImageTextFacts: `brand index --tokenizer` on tar shards
// writes their image-text facts beside the index and says how many
// samples every rule refuses (here all: synth's samples are a jpg and a
// cls, no text); --text and --tokens stay refused on tar shards.
func TestIndexImageTextFacts(t *testing.T) {
	src := synthTree(t, 12)
	store := filepath.Join(t.TempDir(), "pairs")
	if err := os.MkdirAll(store, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("tar", "--sort=name", "-C", src, "-cf", filepath.Join(store, "00000.tar"), ".")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd, err, b)
	}
	code, out, errOut := brand(t, "index", "--src", store, "--tokenizer", "../../tokenize/testdata/hf-golden-tokenizer.json")
	if code != 0 || !strings.Contains(out, "wrote the image-text facts of 12 samples (12 at fault") {
		t.Fatalf("index exited %d:\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(store, "_brand", "vision-facts")); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--text", "txt", "--tokenizer", "../../tokenize/testdata/hf-golden-tokenizer.json"}, {"--tokens", "x"}} {
		code, out, errOut := brand(t, append([]string{"index", "--src", store}, args...)...)
		if code == 0 || !strings.Contains(errOut, "tar shards are not token datasets") {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
}
