package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/dustin/go-humanize"
)

// WriteJSON writes the report as indented JSON.
func (rep *Report) WriteJSON(w io.Writer) error { return writeJSON(w, rep) }

// writeJSON writes v as indented JSON: every report's results file.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("bench: writing JSON: %w", err)
	}
	return nil
}

// WriteText writes the report for people: the setup, one table row per
// configuration (per epoch for Brand), the policy comparison, and every
// target with its measured ratio and PASS, MISS or N/A.
func (rep *Report) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	m, c, d := rep.Machine, rep.Config, rep.Dataset
	fmt.Fprintf(ew, "Brand benchmark, %s\n", rep.Date.Format("2006-01-02 15:04 MST"))
	if rep.Command != "" {
		fmt.Fprintf(ew, "command: %s\n", rep.Command)
	}
	fmt.Fprintf(ew, "machine: %d CPUs (%s), %s memory, %s %s, kernel %s, MinIO %s\n",
		m.CPUs, orUnknown(m.CPUModel), sizeString(m.Memory), m.GoVersion, m.OS, orUnknown(m.Kernel), m.MinIO)
	if m.FirstTouchMBPerSec > 0 {
		fmt.Fprintf(ew, "fresh memory is faulted in at %.0f MB/s, %.0f MB/s advised as huge pages (one write per page of a new 256 MiB mapping)\n",
			m.FirstTouchMBPerSec, m.FirstTouchHugeMBPerSec)
	}
	fmt.Fprintf(ew, "dataset: %d samples of mean %s (synthetic, log-normal, seed %d), %d chunks of ~%s, %s in all\n",
		d.Samples, sizeString(c.MeanBytes), c.Seed, d.Chunks, sizeString(c.ChunkSize), sizeString(d.Bytes))
	fmt.Fprintf(ew, "job: batch %d, window %d chunks, shuffle seed %d, client %d batches ahead; working set (the windows a batch spans + the prefetch window) %s\n\n",
		c.BatchSize, c.Window, c.ShuffleSeed, c.Ahead, sizeString(d.WorkingSetBytes))

	width := len("configuration")
	for _, r := range rep.Rows {
		width = max(width, len([]rune(r.Label)))
	}
	// Labels are padded so that they read left-aligned in a right-aligned
	// table of numbers.
	pad := func(s string) string { return s + strings.Repeat(" ", width-len([]rune(s))) }
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, pad("configuration")+"\tconc\tsamples/s\tMB/s\tread amp\thit %\tp50 ms\tp99 ms\treq p50\treq p99\tpeak RSS\t")
	for _, r := range rep.Rows {
		conc, hit, rss, req50, req99 := "-", "-", "-", "-", "-"
		if r.RequestP50Ms > 0 {
			req50, req99 = fmt.Sprintf("%.1f", r.RequestP50Ms), fmt.Sprintf("%.1f", r.RequestP99Ms)
		}
		if r.Concurrency > 0 || r.Group == GroupPython {
			conc = fmt.Sprint(r.Concurrency)
		}
		if r.HitRatio != nil {
			hit = fmt.Sprintf("%.1f", 100**r.HitRatio)
		}
		if r.PeakRSS > 0 {
			rss = sizeString(r.PeakRSS)
		}
		amp := fmt.Sprintf("%.3f", r.ReadAmplification)
		if r.Config == ConfigPyBrand {
			amp = "-" // payload bytes, not the body bytes the store's are compared with
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.1f\t%s\t%s\t%.1f\t%.1f\t%s\t%s\t%s\t\n",
			pad(r.Label), conc, r.SamplesPerSec, r.MBPerSec, amp, hit, r.P50Ms, r.P99Ms, req50, req99, rss)
	}
	tw.Flush()
	fmt.Fprintln(ew, "\nsamples/s and MB/s (10^6 bytes of HTTP body) as the consuming loop saw them; read amp = bytes read from",
		"\nthe store ÷ bytes delivered; hit % = demand chunk lookups served from the gateway's cache; p50/p99 = the",
		"\nloop's wait for each batch; req p50/p99 = Brand's batch request latency, from sending the request to the",
		"\nend of its body; peak RSS = the gateway process's VmHWM.")
	rep.writePythonNote(ew)

	if err := rep.writeCPU(ew, pad); err != nil {
		return err
	}

	if len(rep.Gateways) > 0 {
		fmt.Fprintln(ew, "\nGateway start (index load and cache preallocation, before the cold epoch's clock starts)")
		for _, g := range rep.Gateways {
			fmt.Fprintf(ew, "  cache %s, %-8s ready after %.2f s, %.2f s of CPU; %s of chunk buffers at the end\n",
				percentString(g.CacheFraction), g.Policy+":", g.StartSeconds, g.StartCPU, sizeString(int64(g.Counters["brand_cache_buffer_bytes"])))
		}
	}

	if p := rep.Policy; p != nil {
		fmt.Fprintf(ew, "\nCache policies, cache %s of the dataset (%s): backend bytes and hit ratios per epoch, live and simulated\n\n",
			percentString(p.CacheFraction), sizeString(p.CacheBytes))
		tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "epoch\tlru\tnext-use\tsim lru\toptimum\tlru hit live/sim\tnext-use hit live/optimum\taccesses live/sim\t")
		for _, e := range p.Epochs {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%.3f / %.3f\t%.3f / %.3f\t%d / %d\t\n", e.Epoch,
				sizeString(e.LRUBytes), sizeString(e.NextUseBytes), sizeString(e.SimLRUBytes), sizeString(e.OptimalBytes),
				e.LRUHit, e.SimLRUHit, e.NextUseHit, e.OptimalHit, e.NextUseAccesses, e.SimAccesses)
		}
		fmt.Fprintf(tw, "total\t%s\t%s\t%s\t%s\t\t\t\t\n", sizeString(p.LRUBytes), sizeString(p.NextUseBytes), sizeString(p.SimLRUBytes), sizeString(p.OptimalBytes))
		tw.Flush()
		fmt.Fprintln(ew, "\nEpoch boundaries: p99 of the 10 batches around the start of an epoch ÷ that epoch's median,",
			"\nfor batch request latency and for the loop's wait; control = the same ratio for 10 batches mid-epoch")
		for _, b := range p.Boundaries {
			fmt.Fprintf(ew, "  %-8s → epoch %d: requests %.1f ms ÷ %.1f ms = %.2f (control %.2f); waits %.1f ms ÷ %.1f ms = %.2f (control %.2f)\n",
				b.Policy, b.Epoch, b.P99Ms, b.MedianMs, b.Ratio, b.Control, b.WaitP99Ms, b.WaitMedianMs, b.WaitRatio, b.WaitControl)
		}
	}

	rep.writeCeilings(ew)
	rep.writeWarmCeilings(ew)
	for _, sk := range rep.Skipped {
		fmt.Fprintf(ew, "\nSkipped group %s: %s\n", sk.Group, sk.Reason)
	}

	if len(rep.Targets) > 0 {
		fmt.Fprintln(ew, "\nTargets (ratios measured in this run)")
		tw = tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
		for _, t := range rep.Targets {
			fmt.Fprintf(tw, "  %s\t%s\t%.3f\t%s\t%s\n", t.Status, t.Name, t.Ratio, "want "+t.Want, t.Note)
		}
		tw.Flush()
		pass, miss, na := rep.count()
		fmt.Fprintf(ew, "%d PASS, %d MISS, %d N/A\n", pass, miss, na)
	}
	return ew.err
}

// writePythonNote says how the python group's rows differ from the others.
func (rep *Report) writePythonNote(ew *errWriter) {
	for _, r := range rep.Rows {
		if r.Group != GroupPython {
			continue
		}
		fmt.Fprintln(ew, "\npython group: each row is measured in a Python process of its own (python/bench/loaders.py) with its",
			"\nDataLoader workers, except the Go client's, read in this process; conc = DataLoader workers (batches ahead",
			"\nfor the clients). (p) and BrandDataset count the samples' payload bytes (MB/s, CPU per GB); the clients, HTTP",
			"\nbody bytes. (p) reads a shuffled part of its epoch (Python.ObjectSamples). In the",
			"\nCPU table their harness column is the Python process and its workers, over its measured pass.")
		return
	}
}

// writeCPU writes where the CPU went in each configuration, if measured.
func (rep *Report) writeCPU(ew *errWriter, pad func(string) string) error {
	any := false
	for _, r := range rep.Rows {
		any = any || r.CPU != nil
	}
	if !any {
		return ew.err
	}
	fmt.Fprintf(ew, "\nCPU seconds each process spent during each measurement, and per GB (10^9 bytes) delivered\n\n")
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, pad("configuration")+"\tharness\tgateway\tstore\ttotal\tharness/GB\tgateway/GB\tstore/GB\ttotal/GB\tbusy %\t")
	for _, r := range rep.Rows {
		c := r.CPU
		if c == nil {
			continue
		}
		gb := float64(r.Bytes) / 1e9
		per := func(v float64) string { return fmt.Sprintf("%.3f", ratio(v, gb)) }
		gw, gwPer := "-", "-"
		if r.serverProcess() {
			gw, gwPer = fmt.Sprintf("%.2f", c.Gateway), per(c.Gateway)
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%s\t%.2f\t%.2f\t%s\t%s\t%s\t%s\t%.0f\t\n",
			pad(r.Label), c.Harness, gw, c.Store, c.Total(), per(c.Harness), gwPer, per(c.Store), per(c.Total()), 100*c.Busy)
	}
	tw.Flush()
	fmt.Fprintln(ew, "\nharness = this process: the clients (and the proxy of \"(a) in the client's process\"); gateway = the",
		"\nserver process between them and the store: Brand's gateway, or the limit server of (a), (a'), (a''), (b), (b') or (b'');",
		"\nstore = MinIO; busy = all three ÷ (wall time × CPUs).")
	return ew.err
}

// writeCeilings relates the cold epochs to the cold-path ceilings: (a), a
// hop that keeps nothing; (a′), a hop that keeps what it reads, as any cache
// must; (a″), one that also checks every sample's CRC32C. (a′) ÷ (a) is
// what caching itself costs on this machine, (a″) ÷ (a′) what checking
// costs, and Brand ÷ (a″) what Brand's own work (shuffled batches, per-batch
// requests, eviction) costs on top.
func (rep *Report) writeCeilings(ew *errWriter) {
	find := rep.limitRow
	proxy, sf, sv, inProc := find(ConfigProxy), find(ConfigStoreForward), find(ConfigStoreVerify), find(ConfigProxyInProcess)
	if proxy == nil || sf == nil {
		return
	}
	fmt.Fprintf(ew, "\nCold-path ceilings: store-and-forward (a') ÷ reverse proxy (a) = %.3f (what keeping the bytes costs)\n",
		sf.SamplesPerSec/proxy.SamplesPerSec)
	if sv != nil {
		fmt.Fprintf(ew, "  (a'') ÷ (a') = %.3f (what checking CRC32C costs), (a'') ÷ (a) = %.3f\n",
			sv.SamplesPerSec/sf.SamplesPerSec, sv.SamplesPerSec/proxy.SamplesPerSec)
	}
	if inProc != nil {
		fmt.Fprintf(ew, "  (a) with the proxy in the client's process ÷ (a) = %.3f (what a process of its own costs)\n",
			inProc.SamplesPerSec/proxy.SamplesPerSec)
	}
	for _, r := range rep.Rows {
		if r.Config == ConfigBrand && r.Epoch != nil && *r.Epoch == 0 {
			fmt.Fprintf(ew, "  %s ÷ (a') = %.3f, ÷ (a) = %.3f", r.Label, r.SamplesPerSec/sf.SamplesPerSec, r.SamplesPerSec/proxy.SamplesPerSec)
			if sv != nil {
				fmt.Fprintf(ew, ", ÷ (a'') = %.3f", r.SamplesPerSec/sv.SamplesPerSec)
			}
			fmt.Fprintln(ew)
		}
	}
}

// writeWarmCeilings relates the warm epochs of a cache that holds the whole
// dataset to (b), a server writing whole chunks from memory, (b′), the
// same server answering requests of a batch's size, and (b″), the same
// server answering a warm epoch's shuffled batches as the gateway writes
// them: (b′) ÷ (b) is what serving in batches costs whatever the server
// does, (b″) ÷ (b′) what a shuffled order's scattered samples cost, and
// Brand ÷ (b″) what the gateway's own work costs on top. The warm epochs
// at the best read-ahead depth compare with the limits at their best
// concurrency.
func (rep *Report) writeWarmCeilings(ew *errWriter) {
	mem, memb, mems := rep.limitRow(ConfigMemory), rep.limitRow(ConfigMemoryBatches), rep.limitRow(ConfigMemoryShuffled)
	if mem == nil || memb == nil {
		return
	}
	fmt.Fprintf(ew, "\nWarm-path ceilings: batch-sized requests from memory (b') ÷ whole chunks (b) = %.3f (what requests of a batch's size cost)\n",
		memb.SamplesPerSec/mem.SamplesPerSec)
	if mems != nil {
		fmt.Fprintf(ew, "  shuffled batches (b'') ÷ (b') = %.3f (what a shuffled order's scattered samples cost)\n",
			mems.SamplesPerSec/memb.SamplesPerSec)
	}
	for _, r := range rep.Rows {
		label := r.Label
		switch {
		case r.Config == ConfigBrand && r.Epoch != nil && *r.Epoch > 0 && r.CacheFraction >= 1:
		case r.Config == ConfigBrandAhead:
			label = fmt.Sprintf("%s (%d of %s)", label, r.Concurrency, sweepLevels(r.Sweep))
		default:
			continue
		}
		fmt.Fprintf(ew, "  %s", label)
		if mems != nil {
			fmt.Fprintf(ew, " ÷ (b'') = %.3f,", r.SamplesPerSec/mems.SamplesPerSec)
		}
		fmt.Fprintf(ew, " ÷ (b') = %.3f, ÷ (b) = %.3f\n", r.SamplesPerSec/memb.SamplesPerSec, r.SamplesPerSec/mem.SamplesPerSec)
	}
}

// sweepLevels lists a sweep's concurrency levels as "1/2/4/8".
func sweepLevels(points []SweepPoint) string {
	s := make([]string, len(points))
	for i, p := range points {
		s[i] = strconv.Itoa(p.Concurrency)
	}
	return strings.Join(s, "/")
}

// limitRow returns the measured row of a single-row configuration, or nil.
func (rep *Report) limitRow(config string) *Row {
	for i := range rep.Rows {
		if r := &rep.Rows[i]; r.Config == config && r.SamplesPerSec > 0 {
			return r
		}
	}
	return nil
}

// serverProcess reports whether a separate server process (a gateway or a
// limit server) served the row's client.
func (r *Row) serverProcess() bool {
	switch r.Config {
	case ConfigBrand, ConfigBrandAhead, ConfigBrandDisk, ConfigBrandRestart, ConfigProxy, ConfigStoreForward, ConfigStoreVerify, ConfigMemory, ConfigMemoryBatches, ConfigMemoryShuffled,
		ConfigPyBrand, ConfigPyClient, ConfigGoClient:
		return true
	}
	return false
}

// count tallies the targets by status.
func (rep *Report) count() (pass, miss, na int) {
	for _, t := range rep.Targets {
		switch t.Status {
		case Pass:
			pass++
		case Miss:
			miss++
		default:
			na++
		}
	}
	return pass, miss, na
}

// errWriter keeps the first write error so a report is written with plain
// Fprintf calls and checked once.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	if err != nil {
		e.err = fmt.Errorf("bench: writing the report: %w", err)
	}
	return n, err
}

// sizeString formats a byte count in binary units ("1.9 GiB").
func sizeString(n int64) string {
	if n < 0 {
		return "-" + humanize.IBytes(uint64(-n))
	}
	return humanize.IBytes(uint64(n))
}

// percentString formats a fraction as a percentage ("25 %").
func percentString(f float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.1f", 100*f), "0"), ".") + " %"
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
