package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDemoSnippetTeachesTheEntries: the PyTorch loop `brand demo` prints
// is a newcomer's first copy, so it names the entries python/README.md
// teaches (its table of one dataset a kind of job) and none that warns:
// not the first releases' BrandDataset(url, brand.Options(job=...)),
// whose DeprecationWarning would greet that first run.
func TestDemoSnippetTeachesTheEntries(t *testing.T) {
	readme, err := os.ReadFile("../../python/README.md")
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `brand\\.(\\w+)\\(").FindAllStringSubmatch(string(readme), -1) {
		entries[m[1]] = true
	}
	if !entries["Tensors"] || !entries["Samples"] {
		t.Fatalf("python/README.md's table of entries lists %v; want brand.Tensors and brand.Samples among them", entries)
	}
	loop := pytorchBlock(demoCommands(64, "http://127.0.0.1:8080"))
	if loop == "" {
		t.Fatal("the demo prints no PyTorch block")
	}
	for _, deprecated := range []string{"BrandDataset", "Options(job="} {
		if strings.Contains(loop, deprecated) {
			t.Errorf("the demo's PyTorch loop names %q, which python/README.md calls deprecated:\n%s", deprecated, loop)
		}
	}
	named := 0
	for _, m := range regexp.MustCompile(`\bbrand\.(\w+)\(`).FindAllStringSubmatch(loop, -1) {
		named++
		if !entries[m[1]] {
			t.Errorf("the demo's PyTorch loop calls brand.%s, not an entry of python/README.md's table (%v):\n%s", m[1], entries, loop)
		}
	}
	if named == 0 {
		t.Errorf("the demo's PyTorch loop calls no entry of python/README.md's table:\n%s", loop)
	}
	for _, want := range []string{`brand.Tensors("http://127.0.0.1:8080", "demo"`, `transform="imagenet-train"`} {
		if !strings.Contains(loop, want) {
			t.Errorf("the demo's PyTorch loop lacks %q:\n%s", want, loop)
		}
	}
}

// pytorchBlock is the indented block under the demo's "PyTorch (" line,
// as python/tests/test_demo.py runs it.
func pytorchBlock(out string) string {
	var block []string
	in := false
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "PyTorch ("):
			in = true
		case in && strings.HasPrefix(line, "  "):
			block = append(block, strings.TrimPrefix(line, "  "))
		case in:
			return strings.Join(block, "\n")
		}
	}
	return strings.Join(block, "\n")
}
