package cli

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// StartCPUProfile profiles the process into file until the returned
// function is called. Errors name the --cpuprofile flag, which is how both
// binaries ask for a profile.
func StartCPUProfile(file string) (stop func(), err error) {
	out, err := os.Create(file)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		out.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		out.Close()
	}, nil
}
