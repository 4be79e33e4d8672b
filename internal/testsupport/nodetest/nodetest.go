// Package nodetest finds the Node.js packages the tests hold Brand to as
// independent references — DuckDB writes Parquet, Hugging Face's
// tokenizers encodes byte-level BPE, tiktoken its named encodings — which
// the project's scripts install pinned, once, into a cache
// (scripts/ensure-duckdb.sh, scripts/ensure-hf-tokenizers.sh,
// scripts/ensure-tiktoken.sh).
//
// A test without them skips; with CI=true it fails, so that a CI run
// cannot pass by skipping.
package nodetest

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A Reference is a Node.js package a script installs.
type Reference struct {
	What    string // named in a skip or failure: "DuckDB"
	Script  string // under scripts/: "ensure-duckdb.sh"
	Package string // its directory under node_modules: "@duckdb/node-api"
}

// The references the tests use.
var (
	DuckDB     = Reference{What: "DuckDB", Script: "ensure-duckdb.sh", Package: "@duckdb/node-api"}
	Tokenizers = Reference{What: "Hugging Face tokenizers", Script: "ensure-hf-tokenizers.sh", Package: "tokenizers"}
	Tiktoken   = Reference{What: "tiktoken", Script: "ensure-tiktoken.sh", Package: "tiktoken"}
)

// Find returns node and the node_modules directory holding r, installed
// by its script (asked for the path with --print-path), or skips the
// test; with CI=true it fails it. The script is found in the scripts
// directory of the module the test runs in.
func Find(t testing.TB, r Reference) (node, modules string) {
	t.Helper()
	node, modules, err := Locate(r)
	if err != nil {
		msg := r.What + ": " + err.Error() + " (run scripts/" + r.Script + ")"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + "; CI=true: failing")
		}
		t.Skip(msg)
	}
	return node, modules
}

// Locate is Find without a test: for a benchmark that measures r's
// subjects only where r is installed.
func Locate(r Reference) (node, modules string, err error) {
	node, err = exec.LookPath("node")
	if err != nil {
		return "", "", fmt.Errorf("no node")
	}
	root, err := moduleRoot()
	if err != nil {
		return "", "", err
	}
	out, err := exec.Command(filepath.Join(root, "scripts", r.Script), "--print-path").Output()
	if err != nil {
		return "", "", fmt.Errorf("scripts/%s --print-path: %v", r.Script, err)
	}
	modules = filepath.Join(strings.TrimSpace(string(out)), "node_modules")
	if _, err := os.Stat(filepath.Join(modules, filepath.FromSlash(r.Package))); err != nil {
		return "", "", fmt.Errorf("no %s in %s", r.Package, modules)
	}
	return node, modules, nil
}

// moduleRoot is the directory of the go.mod above the working directory
// (a test runs in its package's directory).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("no go.mod above the test's directory")
		}
		dir = up
	}
}

// EncodeHF has Hugging Face's tokenizers (Tokenizers; package tokenize's
// testdata/hf_reference.cjs) encode texts with the tokenizer.json at
// path, and returns each text's IDs; without the reference it skips, or
// fails with CI=true.
func EncodeHF(t testing.TB, path string, texts [][]byte) [][]int32 {
	t.Helper()
	node, modules := Find(t, Tokenizers)
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var b strings.Builder
	for _, s := range texts {
		b.WriteString(hex.EncodeToString(s))
		b.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(dir, "texts.hex"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(map[string]any{"texts": filepath.Join(dir, "texts.hex"), "tokenizers": map[string]string{"t": abs}})
	if err := os.WriteFile(filepath.Join(dir, "spec.json"), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(root, "tokenize", "testdata", "hf_reference.cjs"), filepath.Join(dir, "spec.json"), filepath.Join(dir, "out.json"))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hf_reference.cjs: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "out.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res map[string]struct {
		IDs [][]int32 `json:"ids"`
	}
	if err := json.Unmarshal(raw, &res); err != nil || len(res["t"].IDs) != len(texts) {
		t.Fatalf("hf_reference.cjs's output: %v (%d texts)", err, len(res["t"].IDs))
	}
	return res["t"].IDs
}

// EncodeTiktoken has tiktoken (Tiktoken; package tokenize's
// testdata/tiktoken_reference.cjs) write the named encodings' rank files
// into dir (NAME.tiktoken, as tiktoken publishes them) and encode texts
// with each (encode_ordinary); it returns each encoding's IDs of each
// text. Without the reference it skips, or fails with CI=true.
func EncodeTiktoken(t testing.TB, dir string, names []string, texts [][]byte) map[string][][]int32 {
	t.Helper()
	node, modules := Find(t, Tiktoken)
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	var b strings.Builder
	for _, s := range texts {
		b.WriteString(hex.EncodeToString(s))
		b.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(work, "texts.hex"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(map[string]any{"texts": filepath.Join(work, "texts.hex"), "dir": abs, "encodings": names})
	if err := os.WriteFile(filepath.Join(work, "spec.json"), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(root, "tokenize", "testdata", "tiktoken_reference.cjs"), filepath.Join(work, "spec.json"), filepath.Join(work, "out.json"))
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tiktoken_reference.cjs: %v\n%s", err, out)
	}
	raw, err := os.ReadFile(filepath.Join(work, "out.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res map[string]struct {
		IDs [][]int32 `json:"ids"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		t.Fatalf("tiktoken_reference.cjs's output: %v", err)
	}
	ids := map[string][][]int32{}
	for _, name := range names {
		if len(res[name].IDs) != len(texts) {
			t.Fatalf("tiktoken_reference.cjs encoded %d texts with %s, want %d", len(res[name].IDs), name, len(texts))
		}
		ids[name] = res[name].IDs
	}
	return ids
}
