package miniotest

import (
	"os/exec"
	"syscall"
)

// setProcAttr makes the kernel kill the server if the test process dies
// without calling Close (a panic, a timeout, ^C), so no orphaned MinIO keeps
// a port and a temporary directory busy.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
