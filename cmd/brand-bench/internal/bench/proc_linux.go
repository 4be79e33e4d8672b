package bench

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// setProcAttr makes the kernel kill a gateway if the harness dies without
// stopping it, so no orphan keeps a port and memory busy.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// peakRSS reads VmHWM, the peak resident set size, from /proc/<pid>/status.
func peakRSS(pid int) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// clockTicks is USER_HZ, the unit of the CPU times in /proc/<pid>/stat:
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// minorFaults returns the minor page faults a process (all its threads)
// has taken, from /proc/<pid>/stat (minflt, field 10): each the first
// touch of a page of fresh memory, the kernel zeroing it (or mapping a
// huge page). It returns 0 if the process is gone.
func minorFaults(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 8 {
		return 0
	}
	n, err := strconv.ParseInt(f[7], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// processCPU returns the user and system CPU time a process (all its
// threads, those that have ended included) has used; pid 0 means this
// process. It reads the process's CPU-time clock (clock_gettime of the
// clock clock_getcpuclockid names, to the nanosecond), and where that
// fails /proc/<pid>/stat, whose ticks of 10 ms were a twenty-seventh of
// a warm 10 KiB epoch's gateway CPU, so that its CPU per GB came in
// steps of 3.7 %. It returns 0 if the process is gone.
func processCPU(pid int) time.Duration {
	if d, ok := cpuClock(pid); ok {
		return d
	}
	return statCPU(pid)
}

// cpuClock reads pid's CPU-time clock: CPUCLOCK_SCHED of the whole
// process, the clock id glibc's clock_getcpuclockid makes of a pid.
func cpuClock(pid int) (time.Duration, bool) {
	clk := int32(unix.CLOCK_PROCESS_CPUTIME_ID)
	if pid != 0 {
		clk = int32(^pid<<3 | 2)
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(clk, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}

// statCPU is processCPU from /proc/<pid>/stat, in ticks of 10 ms.
func statCPU(pid int) time.Duration {
	name := "/proc/self/stat"
	if pid != 0 {
		name = "/proc/" + strconv.Itoa(pid) + "/stat"
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return 0
	}
	// The command name, field 2, is in parentheses and may hold spaces;
	// utime and stime are fields 14 and 15, the 12th and 13th after it.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// platformInfo reads the CPU model, the memory size and the kernel release
// from /proc.
func platformInfo() (cpu string, mem int64, kernel string) {
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
				mem = kb << 10
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(b))
	}
	return cpu, mem, kernel
}

// firstTouchRate measures how fast this machine hands a process fresh
// memory: it maps 256 MiB and writes one byte per page, so every write is
// a page fault; with huge, the mapping is first advised as transparent huge
// pages (madvise MADV_HUGEPAGE), as the gateway advises its chunk buffers.
// A gateway whose cache grows pays this for every byte it caches the first
// time; on some virtual machines it is slower than the network.
func firstTouchRate(huge bool) float64 {
	const size = 256 << 20
	b, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return 0
	}
	defer syscall.Munmap(b)
	if huge {
		if err := unix.Madvise(b, unix.MADV_HUGEPAGE); err != nil {
			return 0
		}
	}
	page := os.Getpagesize()
	start := time.Now()
	for i := 0; i < size; i += page {
		b[i] = 1
	}
	return size / time.Since(start).Seconds() / 1e6
}

// freeDisk is the bytes an unprivileged writer may still use on the file
// system holding dir (its nearest existing ancestor), or -1 when unknown.
func freeDisk(dir string) int64 {
	for {
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err == nil {
			return int64(st.Bavail) * int64(st.Bsize)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return -1
		}
		dir = parent
	}
}
