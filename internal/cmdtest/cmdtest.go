// Package cmdtest builds the module's commands for tests that run them as
// processes of their own: a gateway whose RSS and CPU are its own, or a
// cluster of gateways, each a real process with its own memory. Under the
// race detector the binaries are built with it too, so that a race in a
// child process fails the test through its exit status; the packages are
// then already compiled for the test, and the build mostly links.
package cmdtest

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Build builds github.com/brandgw/brand/cmd/<name> into a temporary
// directory of t and returns the binary's path.
func Build(t testing.TB, name string) string {
	t.Helper()
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(goTool); err != nil {
		if goTool, err = exec.LookPath("go"); err != nil {
			t.Fatalf("the go command is needed to build %s: %v", name, err)
		}
	}
	bin := filepath.Join(t.TempDir(), name)
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	args = append(args, "github.com/brandgw/brand/cmd/"+name)
	out, err := exec.Command(goTool, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin
}
