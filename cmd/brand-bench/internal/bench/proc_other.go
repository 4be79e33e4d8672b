//go:build !linux

package bench

import (
	"os/exec"
	"time"
)

// setProcAttr does nothing where the kernel cannot tie a child's life to
// ours; the harness stops its gateways itself.
func setProcAttr(cmd *exec.Cmd) {}

// peakRSS is not reported off Linux.
func peakRSS(pid int) int64 { return 0 }

// platformInfo is not reported off Linux.
func platformInfo() (cpu string, mem int64, kernel string) { return "", 0, "" }

// firstTouchRate is not measured off Linux.
func firstTouchRate(huge bool) float64 { return 0 }

// processCPU is not measured off Linux.
func processCPU(pid int) time.Duration { return 0 }

// minorFaults is not counted off Linux.
func minorFaults(pid int) int64 { return 0 }

// freeDisk is not measured off Linux: -1, unknown.
func freeDisk(dir string) int64 { return -1 }
