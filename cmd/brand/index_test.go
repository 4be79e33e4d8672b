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
