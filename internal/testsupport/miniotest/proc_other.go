//go:build !linux

package miniotest

import "os/exec"

// setProcAttr does nothing where the kernel cannot tie the server's life to
// ours; Close (or t.Cleanup) must stop it.
func setProcAttr(cmd *exec.Cmd) {}
