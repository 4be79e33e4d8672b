package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/testsupport/promtest"
)

// gatewayProc is a `brand serve` process under test. It runs as its own
// process so that its peak RSS is its own, not the client's.
type gatewayProc struct {
	cmd     *exec.Cmd
	base    string // http://127.0.0.1:port
	logPath string
	hc      *http.Client
	exited  chan struct{} // closed once the process has exited
	waitErr error         // its exit status, once exited is closed

	start    time.Duration // from starting the process to ready
	startCPU time.Duration // its CPU time until ready
}

// startGateway runs bin with args (a serve command line listening on
// 127.0.0.1:0), finds the address it listens on in its JSON log, and waits
// until it reports ready. Its stdout and stderr go to logPath.
func startGateway(ctx context.Context, bin string, args, env []string, logPath string) (*gatewayProc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("bench: gateway log: %w", err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		logf.Close()
		return nil, fmt.Errorf("bench: %w", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout = pw
	cmd.Stderr = pw
	setProcAttr(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("bench: starting %s: %w", bin, err)
	}
	pw.Close() // the child holds its copy
	p := &gatewayProc{cmd: cmd, logPath: logPath, exited: make(chan struct{}), hc: &http.Client{Transport: newTransport(4)}}
	addrc := make(chan string, 1)
	go func() {
		defer logf.Close()
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		found := false
		for sc.Scan() {
			line := sc.Bytes()
			_, _ = logf.Write(append(line, '\n'))
			if !found {
				var m struct {
					Addr    string `json:"addr"`
					Message string `json:"message"`
				}
				// The data listener's line; a --pprof listener logs an
				// address too.
				if json.Unmarshal(line, &m) == nil && m.Addr != "" && strings.HasPrefix(m.Message, "listening") {
					found = true
					addrc <- m.Addr
				}
			}
		}
		_, _ = io.Copy(logf, pr)
	}()
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()

	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	select {
	case addr := <-addrc:
		p.base = "http://" + addr
	case <-p.exited:
		return nil, fmt.Errorf("bench: the gateway exited before listening (%v); see %s", p.waitErr, logPath)
	case <-ctx.Done():
		p.kill()
		return nil, fmt.Errorf("bench: the gateway did not report its address: %w; see %s", ctx.Err(), logPath)
	}
	for {
		if code, err := p.get(ctx, "/readyz", io.Discard); err == nil && code == http.StatusOK {
			return p, nil
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("bench: the gateway exited before it was ready (%v); see %s", p.waitErr, logPath)
		case <-ctx.Done():
			p.kill()
			return nil, fmt.Errorf("bench: the gateway was not ready: %w; see %s", ctx.Err(), logPath)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// get fetches path from the gateway into w and returns the status code.
func (p *gatewayProc) get(ctx context.Context, path string, w io.Writer) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path, nil)
	if err != nil {
		return 0, err
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return resp.StatusCode, err
}

// metrics scrapes /metrics.
func (p *gatewayProc) metrics(ctx context.Context) (promtest.Scrape, error) {
	var b strings.Builder
	code, err := p.get(ctx, "/metrics", &b)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("status %d", code)
	}
	if err != nil {
		return nil, fmt.Errorf("bench: gateway /metrics: %w", err)
	}
	m, err := promtest.Read(strings.NewReader(b.String()))
	if err != nil {
		return nil, fmt.Errorf("bench: gateway /metrics: %w", err)
	}
	return m, nil
}

// gatewayStats is the part of the gateway's /stats answer the harness uses.
type gatewayStats struct {
	Epochs []api.EpochStat `json:"epochs"`
}

// stats fetches /stats: per-epoch chunk accesses, loads and backend bytes,
// with prefetched chunks counted in the epoch they were read for.
func (p *gatewayProc) stats(ctx context.Context) (gatewayStats, error) {
	var b strings.Builder
	code, err := p.get(ctx, "/stats", &b)
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("status %d", code)
	}
	var st gatewayStats
	if err == nil {
		err = json.Unmarshal([]byte(b.String()), &st)
	}
	if err != nil {
		return gatewayStats{}, fmt.Errorf("bench: gateway /stats: %w", err)
	}
	return st, nil
}

// epoch returns one epoch's figures from st, zero if the gateway has none.
func (st gatewayStats) epoch(e int) api.EpochStat {
	for _, s := range st.Epochs {
		if s.Epoch == uint64(e) {
			return s
		}
	}
	return api.EpochStat{Epoch: uint64(e)}
}

// peakRSS returns the process's peak resident set size so far, 0 where the
// platform does not report it.
func (p *gatewayProc) peakRSS() int64 { return peakRSS(p.cmd.Process.Pid) }

// stop asks the gateway to shut down (SIGTERM) and waits for it, killing it
// if it takes longer than grace. A non-zero exit status is an error: a race
// report or a crash in the gateway must not pass unnoticed.
func (p *gatewayProc) stop(grace time.Duration) error {
	p.hc.CloseIdleConnections()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.kill()
		return fmt.Errorf("bench: signalling the gateway: %w", err)
	}
	select {
	case <-p.exited:
	case <-time.After(grace):
		p.kill()
		return fmt.Errorf("bench: the gateway did not stop within %s; killed (see %s)", grace, p.logPath)
	}
	if p.waitErr != nil {
		return fmt.Errorf("bench: the gateway exited with %w; see %s", p.waitErr, p.logPath)
	}
	return nil
}

func (p *gatewayProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// gatewayEnv is this process's environment for a gateway: the S3
// credentials of srv, and no GOMEMLIMIT, so that `--memory-limit auto`
// applies as in a default deployment.
func gatewayEnv(accessKey, secretKey string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "AWS_") || strings.HasPrefix(kv, "GOMEMLIMIT=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "AWS_ACCESS_KEY_ID="+accessKey, "AWS_SECRET_ACCESS_KEY="+secretKey, "AWS_REGION=us-east-1")
}
