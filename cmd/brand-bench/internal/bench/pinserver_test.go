package bench

import (
	"strings"
	"testing"
)

// TestServerCPU: --server-cpu is a core's number or nothing; anything
// else is refused before a run starts, naming the flag.
func TestServerCPU(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
		err  bool
	}{{"", -1, false}, {"1", 1, false}, {"0", 0, false}, {"-1", -1, true}, {"one", -1, true}, {"0-1", -1, true}} {
		got, err := Processes{ServerCPU: c.in}.serverCPU()
		if got != c.want || (err != nil) != c.err || err != nil && !strings.Contains(err.Error(), "--server-cpu") {
			t.Errorf("%q: %d, %v; want %d (error %v)", c.in, got, err, c.want, c.err)
		}
	}
	cfg := Config{WorkDir: t.TempDir(), Processes: Processes{ServerCPU: "x"}}
	if err := cfg.validateRun(); err == nil || !strings.Contains(err.Error(), "--server-cpu") {
		t.Errorf("validateRun with --server-cpu x: %v", err)
	}
}
