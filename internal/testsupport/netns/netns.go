// Package netns builds test networks out of Linux network namespaces, for
// tests that cut the links between real processes: a cluster's gateways
// each in a namespace of its own, the store behind an address of its own,
// the clients behind another, every link through one bridge, and faults
// applied where a network would fail — a link set down, packets dropped
// by address, by port, or by what a request says.
//
// A Network is a bridge in a namespace of its own (the switch) and hosts,
// each a namespace with one veth pair into the bridge and one address of
// 10.77.0.0/24. Nothing is configured outside the namespaces: the test
// process itself reaches a host through sockets it opens inside the
// client's namespace (Host.DialContext, Host.Listen), so no address,
// route or firewall rule of the machine changes, and two Networks never
// see each other. Processes run in a host's namespace through `ip netns
// exec` (Host.Command), keeping their process ID, so signals reach them.
//
// Faults are iptables rules in a chain of each host's own (BRANDFAULT,
// jumped to from INPUT and OUTPUT), so Heal flushes them all; a link
// down is the host's own end of its veth pair.
//
// It needs root, iproute2's ip and iptables (scripts/ensure-netns.sh
// installs both on Debian). Require skips a test without them, and fails
// it with CI=true. It is test support, as net/http's httptest is.
package netns

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Subnet is every Network's: it exists only inside its namespaces.
const Subnet = "10.77.0.0/24"

// chain is the iptables chain of a host's faults.
const chain = "BRANDFAULT"

// Require skips t unless this process can build a Network: it runs as
// root and finds ip and iptables. With CI=true it fails t instead: the
// partition tests are part of the suite there.
func Require(t testing.TB) {
	t.Helper()
	if err := check(); err != nil {
		msg := "the partition tests need network namespaces: " + err.Error()
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + " (CI=true: failing)")
		}
		t.Skip(msg)
	}
}

func check() error {
	if os.Geteuid() != 0 {
		return errors.New("not root (run the tests as root, as CI does)")
	}
	for _, tool := range []string{"ip", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("no %s on PATH (scripts/ensure-netns.sh installs it)", tool)
		}
	}
	return nil
}

// Network is a bridge and the hosts on it (the package doc).
type Network struct {
	t      testing.TB
	prefix string // of its namespaces' names
	sw     string // the switch's namespace

	mu    sync.Mutex
	hosts []*Host
}

// Host is one namespace of a Network: one address on the bridge.
type Host struct {
	Name string // its namespace, as ip netns names it
	IP   string // its address
	n    *Network
	port string // its veth's name in the switch
}

// New builds an empty Network (the switch), torn down when t ends: its
// hosts' namespaces deleted, which ends their links and rules. Processes
// started in them are the caller's to stop first (t.Cleanup runs last
// registered first).
func New(t testing.TB) *Network {
	t.Helper()
	Require(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	n := &Network{t: t, prefix: "bt" + hex.EncodeToString(b[:])}
	n.sw = n.prefix + "-sw"
	t.Cleanup(n.close)
	n.ip("netns", "add", n.sw)
	n.ip("-n", n.sw, "link", "add", "br0", "type", "bridge")
	n.ip("-n", n.sw, "link", "set", "br0", "up")
	return n
}

// close deletes every namespace of the Network.
func (n *Network) close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, h := range n.hosts {
		_ = exec.Command("ip", "netns", "del", h.Name).Run()
	}
	_ = exec.Command("ip", "netns", "del", n.sw).Run()
}

// ip runs ip with args and fails the test if it fails.
func (n *Network) ip(args ...string) {
	n.t.Helper()
	if err := run("ip", args...); err != nil {
		n.t.Fatal(err)
	}
}

func run(name string, args ...string) error {
	var out bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// Host adds a host named name (a short word: it names its namespace) at
// the next free address, from 10.77.0.2 on.
func (n *Network) Host(name string) *Host {
	n.t.Helper()
	n.mu.Lock()
	k := len(n.hosts)
	h := &Host{Name: n.prefix + "-" + name, IP: "10.77.0." + strconv.Itoa(2+k), n: n, port: "p" + strconv.Itoa(k)}
	n.hosts = append(n.hosts, h)
	n.mu.Unlock()
	if k >= 250 {
		n.t.Fatal("netns: a Network holds at most 250 hosts")
	}
	n.ip("netns", "add", h.Name)
	n.ip("link", "add", "name", "eth0", "netns", h.Name, "type", "veth", "peer", "name", h.port, "netns", n.sw)
	n.ip("-n", n.sw, "link", "set", h.port, "master", "br0")
	n.ip("-n", n.sw, "link", "set", h.port, "up")
	n.ip("-n", h.Name, "addr", "add", h.IP+"/24", "dev", "eth0")
	n.ip("-n", h.Name, "link", "set", "eth0", "up")
	n.ip("-n", h.Name, "link", "set", "lo", "up")
	for _, args := range [][]string{{"-N", chain}, {"-A", "INPUT", "-j", chain}, {"-A", "OUTPUT", "-j", chain}} {
		h.iptables(args...)
	}
	return h
}

// Command returns the command that runs bin with args in the host's
// namespace (ip netns exec, which keeps the process ID).
func (h *Host) Command(bin string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", h.Name, bin}, args...)...)
}

// in runs f on a thread of its own moved into the host's namespace:
// sockets f opens belong to the namespace for their life. The thread is
// moved back after f, or discarded if it cannot be (it stays locked to
// its goroutine, which ends).
func (h *Host) in(f func()) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer self.Close()
		target, err := os.Open("/run/netns/" + h.Name)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("netns: entering %s: %w", h.Name, err)
			return
		}
		f()
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- nil // the thread stays locked and ends with this goroutine
			return
		}
		runtime.UnlockOSThread()
		errc <- nil
	}()
	return <-errc
}

// Listen listens on addr (host:port of the host's address) in the host's
// namespace.
func (h *Host) Listen(addr string) (net.Listener, error) {
	var ln net.Listener
	var lerr error
	if err := h.in(func() { ln, lerr = net.Listen("tcp", addr) }); err != nil {
		return nil, err
	}
	return ln, lerr
}

// DialContext dials addr from the host's namespace.
func (h *Host) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	var derr error
	d := net.Dialer{Timeout: 2 * time.Second, KeepAlive: 15 * time.Second}
	if err := h.in(func() { c, derr = d.DialContext(ctx, network, addr) }); err != nil {
		return nil, err
	}
	return c, derr
}

// HTTPClient returns a client whose connections start in the host's
// namespace, bounded by timeout (0: none).
func (h *Host) HTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		Proxy: nil, DialContext: h.DialContext, MaxIdleConnsPerHost: 16,
		IdleConnTimeout: 30 * time.Second, DisableCompression: true,
	}}
}

// Forward accepts connections at addr in the host's namespace and
// forwards each to target, dialled from the test process's own namespace
// (a server on the machine's loopback, such as a test's MinIO), until the
// test ends. It returns addr's host:port.
func (h *Host) Forward(addr, target string) string {
	t := h.n.t
	t.Helper()
	ln, err := h.Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	track := func(c net.Conn, add bool) {
		mu.Lock()
		defer mu.Unlock()
		if add {
			conns[c] = true
		} else {
			delete(conns, c)
		}
	}
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer in.Close()
				out, err := net.DialTimeout("tcp", target, 5*time.Second)
				if err != nil {
					return
				}
				defer out.Close()
				track(in, true)
				track(out, true)
				defer track(in, false)
				defer track(out, false)
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
				go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
				<-done
			})
		}
	})
	return ln.Addr().String()
}

// iptables runs iptables in the host's namespace (-w: it waits for the
// lock other namespaces' rules take).
func (h *Host) iptables(args ...string) {
	h.n.t.Helper()
	if err := run("ip", append([]string{"netns", "exec", h.Name, "iptables", "-w"}, args...)...); err != nil {
		h.n.t.Fatal(err)
	}
}

// Cut drops every packet between h and each of others, both ways: to h,
// they are gone, and h to them.
func (h *Host) Cut(others ...*Host) {
	for _, o := range others {
		h.iptables("-A", chain, "-s", o.IP, "-j", "DROP")
		h.iptables("-A", chain, "-d", o.IP, "-j", "DROP")
	}
}

// Unreachable drops the TCP segments h sends to port of each of others: h
// cannot open a connection to their servers on port (its handshakes go
// unanswered), while theirs to h's servers work. One way of an
// asymmetric cut.
func (h *Host) Unreachable(port int, others ...*Host) {
	for _, o := range others {
		h.iptables("-A", chain, "-d", o.IP, "-p", "tcp", "--dport", strconv.Itoa(port), "-j", "DROP")
	}
}

// DropRequests drops the TCP segments that reach h's port carrying text
// (a request line's start, such as "POST /internal/v2/samples"): those
// requests are never answered, their connections hang, and every other
// request to the same port is served. A gray failure.
func (h *Host) DropRequests(port int, text string) {
	// To this host's address: the host's own requests to others' port
	// are not dropped.
	h.iptables("-A", chain, "-d", h.IP, "-p", "tcp", "--dport", strconv.Itoa(port), "-m", "string", "--algo", "bm", "--string", text, "-j", "DROP")
}

// LinkDown sets the host's end of its link down: nothing reaches it or
// leaves it until LinkUp.
func (h *Host) LinkDown() { h.n.ip("-n", h.Name, "link", "set", "eth0", "down") }

// LinkUp sets the host's link up again.
func (h *Host) LinkUp() { h.n.ip("-n", h.Name, "link", "set", "eth0", "up") }

// Heal removes every fault: each host's rules flushed, its link up.
func (n *Network) Heal() {
	n.t.Helper()
	n.mu.Lock()
	hosts := append([]*Host(nil), n.hosts...)
	n.mu.Unlock()
	for _, h := range hosts {
		h.iptables("-F", chain)
		h.LinkUp()
	}
}
