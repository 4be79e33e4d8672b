package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/gen/photos"
	"github.com/brandgw/brand/internal/testsupport/pythontest"
)

// A README's examples, run as written on a CPU-only machine but for the
// gateway's address (localhost:8080 is a free loopback port): each shell
// line with bash, each Python block with the Python that has torch, each
// Go block compiled into a program of its own. TestReadmeHuggingFace and
// TestReadmeTokens run the two sections that need a store of their own;
// TestReadmeExamples runs the rest that a gateway of brand demo's, or of
// two small datasets for a mixture, can serve.

// readmeBlock is a fenced code block of a Markdown file.
type readmeBlock struct {
	lang, section, text string
	line                int // of its first line of code
}

// readmeBlocks returns the fenced blocks of file, each with the "## "
// heading it is under.
func readmeBlocks(t *testing.T, file string) []readmeBlock {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []readmeBlock
	var cur *readmeBlock
	section := ""
	for i, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && strings.HasPrefix(line, "## "):
			section = strings.TrimPrefix(line, "## ")
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &readmeBlock{lang: strings.TrimPrefix(trimmed, "```"), section: section, line: i + 2}
		case cur != nil && trimmed == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		}
	}
	return out
}

// sectionBlocks returns the blocks of section of lang, in order.
func sectionBlocks(blocks []readmeBlock, section, lang string) []readmeBlock {
	var out []readmeBlock
	for _, b := range blocks {
		if b.section == section && b.lang == lang {
			out = append(out, b)
		}
	}
	return out
}

// shellPrelude makes every README line checkable: curl fails on an HTTP
// error, with the body shown; a pipeline's every stage's exit status is
// checked, a stage before the last allowed to have been cut off by a
// head that had read enough (SIGPIPE, or curl's write error).
const shellPrelude = `set -u -o pipefail
curl() { command curl --fail-with-body --show-error "$@"; }
__check() {
	local line=$1; shift
	local n=$# i=0 s
	for s in "$@"; do
		i=$((i+1))
		if ((i == n)); then
			((s == 0)) || { echo "README line $line failed: exit statuses $*" >&2; exit 1; }
		else
			case $s in 0|23|141) ;; *) echo "README line $line failed: exit statuses $*" >&2; exit 1;; esac
		fi
	done
}
`

// runShellBlock runs a block's commands with bash in dir, localhost:8080
// being addr, each logical line (continuations joined) checked on its
// own; it returns the output.
func runShellBlock(t *testing.T, b readmeBlock, dir, addr string) string {
	t.Helper()
	var script strings.Builder
	script.WriteString(shellPrelude)
	lines := strings.Split(strings.TrimRight(b.text, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		cmd, at := lines[i], b.line+i
		for strings.HasSuffix(cmd, "\\") && i+1 < len(lines) {
			i++
			cmd += "\n" + lines[i]
		}
		if strings.TrimSpace(cmd) == "" || strings.HasPrefix(strings.TrimSpace(cmd), "#") {
			continue
		}
		if !strings.Contains(cmd, "localhost:8080") {
			t.Fatalf("README line %d names no gateway at localhost:8080, which this test runs its commands against: %s", at, cmd)
		}
		fmt.Fprintf(&script, "%s\n__check %d \"${PIPESTATUS[@]}\"\n", strings.ReplaceAll(cmd, "localhost:8080", addr), at)
	}
	c := exec.Command("bash", "-c", script.String())
	c.Dir = dir
	out, err := runBounded(c, 3*time.Minute)
	if err != nil {
		t.Fatalf("the README's block at line %d: %v\n%s", b.line, err, out)
	}
	t.Logf("the README's block at line %d:\n%s", b.line, out)
	return string(out)
}

// pythonReport is what testdata/readme_run.py reports of a snippet.
type pythonReport struct {
	Epochs map[string]struct {
		Steps, Samples int
		Datasets       map[string]int
	}
	Used    int // samples given to use(...)
	Globals map[string]json.RawMessage
}

// runPythonBlock runs a Python block with py in dir through
// testdata/readme_run.py, its loaders' first epochs passes read, and
// reports the globals named.
func runPythonBlock(t *testing.T, py string, b readmeBlock, dir, url string, epochs int, globals ...string) pythonReport {
	t.Helper()
	snippet := filepath.Join(dir, fmt.Sprintf("readme-%d.py", b.line))
	if err := os.WriteFile(snippet, []byte(b.text), 0o644); err != nil {
		t.Fatal(err)
	}
	repo, _ := filepath.Abs("..")
	harness, _ := filepath.Abs(filepath.Join("testdata", "readme_run.py"))
	cmd := exec.Command(py, append([]string{harness, snippet, url, strconv.Itoa(epochs)}, globals...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(repo, "python"))
	out, err := runBounded(cmd, 4*time.Minute)
	if err != nil {
		t.Fatalf("the README's Python block at line %d: %v\n%s", b.line, err, out)
	}
	var r pythonReport
	if err := json.Unmarshal(lastLine(out), &r); err != nil {
		t.Fatalf("the README's Python block at line %d: %v\n%s", b.line, err, out)
	}
	t.Logf("the README's Python block at line %d: %s", b.line, lastLine(out))
	return r
}

// goProgram is the program the README's Go blocks are compiled into, each
// the body of a function of its own; a block's use(...) counts the
// samples it is given.
const goProgram = `package main

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/shuffle"
)

var (
	samples int
	_       = api.Job{}
	_       = shuffle.Params{}
	_       = client.Options{}
)

func use(...any) { samples++ }

%s

func main() {
	blocks := []func(context.Context) error{%s}
	k, _ := strconv.Atoi(os.Args[1])
	if err := blocks[k](context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(samples)
}
`

// goBlocks compiles the README's Go blocks into one program, with
// localhost:8080 being url, and returns a function that runs block k and
// returns the samples it used.
func goBlocks(t *testing.T, blocks []readmeBlock, url string) func(k int) int {
	t.Helper()
	var funcs, names strings.Builder
	for k, b := range blocks {
		if !strings.Contains(b.text, "http://localhost:8080") {
			t.Fatalf("the README's Go block at line %d names no http://localhost:8080", b.line)
		}
		fmt.Fprintf(&funcs, "func block%d(ctx context.Context) error {\n%s\treturn nil\n}\n\n", k, strings.ReplaceAll(b.text, "http://localhost:8080", url))
		fmt.Fprintf(&names, "block%d, ", k)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, fmt.Appendf(nil, goProgram, funcs.String(), names.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// The program is a package of the module (overlaid: nothing is
	// written into the tree), so it builds against this checkout.
	repo, _ := filepath.Abs("..")
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(repo, "integration", "testdata", "readmego", "main.go"): src}})
	overlayPath := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlayPath, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "readmego")
	build := exec.Command("go", "build", "-overlay", overlayPath, "-o", bin, "./integration/testdata/readmego")
	build.Dir = repo
	if out, err := runBounded(build, 5*time.Minute); err != nil {
		t.Fatalf("the README's Go blocks do not compile: %v\n%s\n%s", err, out, funcs.String())
	}
	return func(k int) int {
		t.Helper()
		out, err := runBounded(exec.Command(bin, strconv.Itoa(k)), 3*time.Minute)
		if err != nil {
			t.Fatalf("the README's Go block at line %d: %v\n%s", blocks[k].line, err, out)
		}
		n, err := strconv.Atoi(string(lastLine(out)))
		if err != nil {
			t.Fatalf("the README's Go block at line %d: %v\n%s", blocks[k].line, err, out)
		}
		return n
	}
}

// needTools fails (CI=true) or skips the test without the programs the
// READMEs' shell lines run (scripts/ensure-readme-tools.sh installs them).
func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			msg := fmt.Sprintf("the README's commands run %s, which is not installed (scripts/ensure-readme-tools.sh installs it)", tool)
			if os.Getenv("CI") == "true" {
				t.Fatal(msg + "; CI=true: failing")
			}
			t.Skip(msg)
		}
	}
}

// TestReadmeExamples runs the README's examples against brand demo, as
// its quick start starts it, and a gateway of two datasets for its
// mixture: the quick start's curls, its standard-library loop, its
// PyTorch loop (checkpointing as it goes) and its Go loop; the tensors'
// curls (into a directory they make), PyTorch loop (on the CPU here) and
// Go loop; importance sampling's curls, each step's answer used by the
// next; the mixture's curl and PyTorch loop. Every shell line must exit 0
// (curl failing on an HTTP error), every Python and Go block must run to
// its end, and each must have read what its comments say.
func TestReadmeExamples(t *testing.T) {
	needTools(t, "bash", "curl", "tar", "jq", "go")
	py := pythontest.Need(t, "scripts/test-python.sh", "torch", "numpy")
	blocks := readmeBlocks(t, "../README.md")
	bin := buildBrand(t)
	work := t.TempDir()

	// The quick start: brand demo, run from this build, on a free port.
	quick := sectionBlocks(blocks, "Quick start", "sh")
	if len(quick) != 2 || !strings.Contains(quick[0].text, "go run ./cmd/brand demo ") || !strings.Contains(quick[0].text, "scripts/test.sh") {
		t.Fatalf("the quick start's blocks are not `go run ./cmd/brand demo` and scripts/test.sh, then the curls:\n%+v", quick)
	}
	port := freePorts(t, 1)[0]
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	demo := &clusterProc{url: "http://" + addr, logPath: filepath.Join(work, "demo.log"),
		args: []string{"demo", "--listen", addr, "--dir", filepath.Join(work, "demo")}}
	demo.start(t, bin, os.Environ())
	t.Cleanup(func() { demo.stop(t) })
	const demoSamples = 2000 // brand demo's default, which the quick start keeps

	t.Run("quick start", func(t *testing.T) {
		out := runShellBlock(t, quick[1], work, addr)
		if !strings.Contains(out, `"demo"`) || !strings.Contains(out, ".npy") {
			t.Errorf("the quick start's curls listed no demo dataset or no tensors:\n%s", out)
		}
		pyBlocks := sectionBlocks(blocks, "Quick start", "python")
		if len(pyBlocks) != 2 {
			t.Fatalf("the quick start has %d Python blocks, want the standard library's and PyTorch's", len(pyBlocks))
		}
		r := runPythonBlock(t, py, pyBlocks[0], work, demo.url, 2, "m", "epoch", "files")
		var m int
		var epoch struct{ Batches, Samples int }
		var files []string
		if json.Unmarshal(r.Globals["m"], &m) != nil || json.Unmarshal(r.Globals["epoch"], &epoch) != nil || json.Unmarshal(r.Globals["files"], &files) != nil ||
			epoch.Samples != demoSamples || m != epoch.Batches-1 || len(files) != 2*(demoSamples-64*m) {
			t.Errorf("the standard-library loop ended at batch %s of %s, its last batch's files %s; want every batch, the last of the epoch's last samples, two files each", r.Globals["m"], r.Globals["epoch"], r.Globals["files"])
		}
		dir := t.TempDir() // where it writes ckpt.pt
		r = runPythonBlock(t, py, pyBlocks[1], dir, demo.url, 2)
		for _, e := range []string{"0", "1"} {
			if got := r.Epochs[e].Samples; got != demoSamples {
				t.Errorf("the PyTorch loop read %d samples in epoch %s, want the demo's %d once each", got, e, demoSamples)
			}
		}
		// python/README.md's first example, its client's, is the Go
		// loop's in Python.
		client := sectionBlocks(readmeBlocks(t, "../python/README.md"), "Client", "python")
		if len(client) != 1 {
			t.Fatalf("python/README.md's Client section has %d Python blocks, want one", len(client))
		}
		if r := runPythonBlock(t, py, client[0], work, demo.url, 1); r.Used != 7*64+64 {
			t.Errorf("python/README.md's client loop used %d samples, want rank 2 of 4's %d", r.Used, 7*64+64)
		}
		goQuick := sectionBlocks(blocks, "Quick start", "go")
		goTensors := sectionBlocks(blocks, "Tensors, not bytes", "go")
		if len(goQuick) != 1 || len(goTensors) != 1 {
			t.Fatalf("want one Go block in the quick start and one in Tensors, not bytes; have %d and %d", len(goQuick), len(goTensors))
		}
		run := goBlocks(t, append(goQuick, goTensors...), demo.url)
		// Rank 2 of 4, 64 a batch: 7 whole global batches of 256 and
		// the 208 samples after them, of which its 64.
		if n := run(0); n != 7*64+64 {
			t.Errorf("the quick start's Go loop used %d samples, want rank 2 of 4's %d", n, 7*64+64)
		}
		if n := run(1); n != demoSamples {
			t.Errorf("the tensors' Go loop used %d samples, want the epoch's %d", n, demoSamples)
		}
	})

	t.Run("tensors", func(t *testing.T) {
		sh := sectionBlocks(blocks, "Tensors, not bytes", "sh")
		pyBlocks := sectionBlocks(blocks, "Tensors, not bytes", "python")
		if len(sh) != 1 || len(pyBlocks) != 1 {
			t.Fatalf("Tensors, not bytes: %d shell and %d Python blocks, want one of each", len(sh), len(pyBlocks))
		}
		dir := t.TempDir() // no out/ in it: the commands make it
		out := runShellBlock(t, sh[0], dir, addr)
		npys, _ := filepath.Glob(filepath.Join(dir, "out", "*", "*.npy"))
		if len(npys) != 64 || !strings.Contains(out, "cores") {
			t.Errorf("the tensors' curls wrote %d .npy files (want 64) and said %q of the cores needed", len(npys), out)
		}
		// One epoch of its 90: the gateway transforms every image.
		r := runPythonBlock(t, py, pyBlocks[0], dir, demo.url, 1)
		if got := r.Epochs["0"].Samples; got != demoSamples || len(r.Epochs) != 1 {
			t.Errorf("the tensors' PyTorch loop read %d images in epoch 0 (epochs %v), want %d", got, r.Epochs, demoSamples)
		}
	})

	t.Run("importance sampling", func(t *testing.T) {
		sh := sectionBlocks(blocks, "Importance sampling", "sh")
		if len(sh) != 1 {
			t.Fatalf("Importance sampling: %d shell blocks, want one", len(sh))
		}
		out := runShellBlock(t, sh[0], t.TempDir(), addr)
		if n := len(regexp.MustCompile(`(?m)^n\d+/img_\d+\.(jpg|cls)$`).FindAllString(out, -1)); n != 8 {
			t.Errorf("the importance epochs' first batches listed %d files, want 4 each:\n%s", n, out)
		}
	})

	t.Run("task streams", func(t *testing.T) {
		sh := sectionBlocks(blocks, "Post-training: task streams", "sh")
		if len(sh) != 1 {
			t.Fatalf("Post-training: task streams: %d shell blocks, want one", len(sh))
		}
		out := runShellBlock(t, sh[0], t.TempDir(), addr)
		keys := regexp.MustCompile(`(?m)^n\d+/img_\d+$`).FindAllString(out, -1)
		if len(keys) != 8 || strings.Join(keys[:4], " ") != strings.Join(keys[4:], " ") || !strings.Contains(out, `{"counted":4,"steps":[0]}`) {
			t.Errorf("the task stream's lease and step 0 listed %v, want the same 4 keys twice and 4 counted:\n%s", keys, out)
		}
	})

	t.Run("mixing datasets", func(t *testing.T) {
		// web and code, 300 and 150 photos, in a local store.
		store := t.TempDir()
		for name, n := range map[string]int{"web": 300, "code": 150} {
			src := filepath.Join(t.TempDir(), name)
			if err := (photos.Tree{Samples: n, Classes: 3, MaxSide: 32, Seed: uint64(n)}).Write(t.Context(), src); err != nil {
				t.Fatal(err)
			}
			runBrand(t, bin, os.Environ(), "pack", "--src", src, "--dst", filepath.Join(store, name), "--chunk-size", "64KiB")
		}
		mport := freePorts(t, 1)[0]
		maddr := fmt.Sprintf("127.0.0.1:%d", mport)
		gw := &clusterProc{url: "http://" + maddr, logPath: filepath.Join(t.TempDir(), "serve.log"),
			args: []string{"serve", "--listen", maddr, "--dataset", "web=" + filepath.Join(store, "web"), "--dataset", "code=" + filepath.Join(store, "code"),
				"--cache-size", "64MiB", "--cache-prefault=false", "--log-format", "json"}}
		gw.start(t, bin, os.Environ())
		t.Cleanup(func() { gw.stop(t) })
		sh := sectionBlocks(blocks, "Mixing datasets", "sh")
		pyBlocks := sectionBlocks(blocks, "Mixing datasets", "python")
		if len(sh) != 1 || len(pyBlocks) != 1 {
			t.Fatalf("Mixing datasets: %d shell and %d Python blocks, want one of each", len(sh), len(pyBlocks))
		}
		out := runShellBlock(t, sh[0], t.TempDir(), maddr)
		if n := strings.Count(out, ".jpg"); n != 64 {
			t.Errorf("the mixture's batch listed %d images, want 64", n)
		}
		r := runPythonBlock(t, py, pyBlocks[0], t.TempDir(), gw.url, 1, "state")
		c := r.Epochs["0"]
		// Every step holds each dataset within one sample of its share.
		if c.Samples == 0 || abs(c.Datasets["web"]*10-7*c.Samples) > 10*c.Steps || c.Datasets["web"]+c.Datasets["code"] != c.Samples {
			t.Errorf("the mixture's loop read %+v; want web 70 %% of the samples, within a sample a step", c)
		}
		var state struct{ Mix string }
		if json.Unmarshal(r.Globals["state"], &state) != nil || state.Mix != "web:0.7,code:0.3" {
			t.Errorf("the mixture's state_dict: %s", r.Globals["state"])
		}
	})
}

func abs(n int) int { return max(n, -n) }
