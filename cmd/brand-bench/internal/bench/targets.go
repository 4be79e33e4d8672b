package bench

import (
	"fmt"
	"math"
)

// Target is one of the project's performance targets, evaluated on ratios
// measured in the same run.
type Target struct {
	Name   string  `json:"name"`
	Want   string  `json:"want"`   // the condition on Ratio, e.g. "≥ 0.90"
	Ratio  float64 `json:"ratio"`  // the measured ratio
	Status string  `json:"status"` // PASS, MISS, or N/A when it does not apply
	Note   string  `json:"note,omitempty"`
}

// Target statuses.
const (
	Pass = "PASS"
	Miss = "MISS"
	NA   = "N/A"
)

func atLeast(name string, got, want float64) Target {
	t := Target{Name: name, Want: fmt.Sprintf("≥ %.2f", want), Ratio: got, Status: Miss}
	if got >= want {
		t.Status = Pass
	}
	return t
}

func atMost(name string, got, want float64) Target {
	t := Target{Name: name, Want: fmt.Sprintf("≤ %.2f", want), Ratio: got, Status: Miss}
	if got <= want {
		t.Status = Pass
	}
	return t
}

// throughput is samples/s over several rows together.
func throughput(rows []Row) float64 {
	var n int64
	var sec float64
	for _, r := range rows {
		n += r.Samples
		sec += r.Seconds
	}
	return ratio(float64(n), sec)
}

// targets evaluates every target the run has the figures for.
func (r *runner) targets() []Target {
	rows := r.rep.Rows
	find := func(config string) *Row {
		for i := range rows {
			if rows[i].Config == config {
				return &rows[i]
			}
		}
		return nil
	}
	proxy, memory, objects, wds := find(ConfigProxy), find(ConfigMemory), find(ConfigObjects), find(ConfigWebDataset)
	verify, memb, mems := find(ConfigStoreVerify), find(ConfigMemoryBatches), find(ConfigMemoryShuffled)
	var out []Target

	for _, f := range r.cfg.Brand.CacheFractions {
		run := r.runs[runKey{f, "next-use"}]
		if run == nil {
			continue
		}
		brand := run.rows(GroupBrand)
		cold, warm := brand[0].SamplesPerSec, throughput(brand[1:r.cfg.Brand.Epochs])
		at := ", cache " + percentString(f)
		if proxy != nil {
			out = append(out, atLeast("cold epoch ÷ limit (a) reverse proxy"+at, cold/proxy.SamplesPerSec, 0.9))
		}
		if t, ok := gatewayCPUTarget("gateway CPU per GB, cold epoch ÷ limit (a'') store-and-forward + CRC32C's"+at, &brand[0], verify, 1.15); ok {
			out = append(out, t)
		}
		if memory != nil && f == 1 {
			out = append(out, atLeast("warm epochs ÷ limit (b) memory server"+at, warm/memory.SamplesPerSec, 0.85))
			if a := find(ConfigBrandAhead); a != nil {
				t := atLeast("warm epoch at best ahead ÷ limit (b) memory server"+at, a.SamplesPerSec/memory.SamplesPerSec, 0.85)
				t.Note = fmt.Sprintf("%d batches ahead (of %s) against %d streams (of %s)", a.Concurrency, sweepLevels(a.Sweep), memory.Concurrency, sweepLevels(memory.Sweep))
				out = append(out, t)
			}
		}
		if f == 1 {
			if a := find(ConfigBrandAhead); a != nil {
				if mems != nil {
					out = append(out, atLeast("warm epoch at best ahead ÷ limit (b'') shuffled batches from memory"+at, a.SamplesPerSec/mems.SamplesPerSec, 0.9))
				}
				for _, lim := range []struct {
					name string
					row  *Row
				}{{"(b') batch-sized requests from memory", memb}, {"(b'') shuffled batches from memory", mems}} {
					if t, ok := gatewayCPUTarget("gateway CPU per GB, warm at best ahead ÷ limit "+lim.name+"'s"+at, a, lim.row, 1.15); ok {
						out = append(out, t)
					}
				}
			}
		}
		if objects != nil {
			if r.cfg.smallSamples() {
				out = append(out, atLeast("cold epoch ÷ per-object (c), small samples"+at, cold/objects.SamplesPerSec, 10))
			} else {
				out = append(out, atLeast("cold epoch ÷ per-object (c)"+at, cold/objects.SamplesPerSec, 3))
				if f == 1 {
					out = append(out, atLeast("warm epochs ÷ per-object (c)"+at, warm/objects.SamplesPerSec, 6))
				}
			}
		}
		if wds != nil {
			t := atLeast("warm epochs ÷ WebDataset (d)"+at, warm/wds.SamplesPerSec, 1)
			t.Want = "> 1.00"
			if t.Ratio == 1 {
				t.Status = Miss
			}
			out = append(out, t)
			out = append(out, atLeast("cold epoch ÷ WebDataset (d)"+at, cold/wds.SamplesPerSec, 0.9))
		}
	}

	out = append(out, r.pythonTargets(find)...)

	// Read amplification and peak RSS, for every gateway run.
	for _, k := range r.runOrder() {
		run := r.runs[k]
		at := fmt.Sprintf(", cache %s, %s", percentString(k.fraction), k.policy)
		worst, worstEpoch := 0.0, 0
		for e, row := range run.rows(GroupBrand) {
			if row.ReadAmplification > worst {
				worst, worstEpoch = row.ReadAmplification, e
			}
		}
		t := atMost("read amplification, worst epoch"+at, worst, 1.01)
		t.Note = fmt.Sprintf("epoch %d", worstEpoch)
		if run.cacheBytes < r.rep.Dataset.WorkingSetBytes {
			t.Status = NA
			t.Note = fmt.Sprintf("the cache (%s) is below the job's working set (%s): the windows a batch spans and the prefetch window", sizeString(run.cacheBytes), sizeString(r.rep.Dataset.WorkingSetBytes))
		}
		out = append(out, t)
		var peak int64
		for _, ep := range run.epochs {
			peak = max(peak, ep.peakRSS)
		}
		budget := 1.25*float64(run.cacheBytes) + 200*(1<<20)
		t = atMost("gateway peak RSS ÷ (1.25 × cache + 200 MiB)"+at, float64(peak)/budget, 1)
		t.Note = fmt.Sprintf("peak %s, budget %s", sizeString(peak), sizeString(int64(budget)))
		if peak == 0 {
			t.Status, t.Note = NA, "peak RSS is not reported on this platform"
		}
		out = append(out, t)
	}

	if p := r.rep.Policy; p != nil {
		t := atMost("next-use backend bytes ÷ planner optimum, epochs 1+", safeRatio(p.NextUseBytes, p.OptimalBytes), 1.05)
		t.Note = fmt.Sprintf("next-use %s, optimum %s", sizeString(p.NextUseBytes), sizeString(p.OptimalBytes))
		out = append(out, t)
		t = atMost("next-use backend bytes ÷ lru, epochs 1+", safeRatio(p.NextUseBytes, p.LRUBytes), 0.70)
		t.Note = fmt.Sprintf("next-use %s, lru %s", sizeString(p.NextUseBytes), sizeString(p.LRUBytes))
		out = append(out, t)
		for _, policy := range []string{"lru", "next-use"} {
			worst := Boundary{}
			for _, b := range p.Boundaries {
				if b.Policy == policy && b.Ratio >= worst.Ratio {
					worst = b
				}
			}
			t := atMost("epoch boundary p99 (10 batch requests) ÷ epoch median, "+policy, worst.Ratio, 2)
			t.Note = fmt.Sprintf("worst: entering epoch %d, p99 %.1f ms, median %.1f ms; mid-epoch control %.2f", worst.Epoch, worst.P99Ms, worst.MedianMs, worst.Control)
			out = append(out, t)
			var dev float64
			devEpoch := 0
			for _, e := range p.Epochs {
				live, sim := e.NextUseHit, e.OptimalHit
				if policy == "lru" {
					live, sim = e.LRUHit, e.SimLRUHit
				}
				if d := math.Abs(live - sim); d >= dev {
					dev, devEpoch = d, e.Epoch
				}
			}
			t = atMost("|live − simulated hit ratio| in points, "+policy, 100*dev, 2)
			t.Note = fmt.Sprintf("worst: epoch %d", devEpoch)
			out = append(out, t)
		}
	}
	return out
}

// runOrder lists the gateway runs in the order they were made.
func (r *runner) runOrder() []runKey {
	var out []runKey
	seen := map[runKey]bool{}
	for _, row := range r.rep.Rows {
		k := runKey{row.CacheFraction, row.Policy}
		if row.Config == ConfigBrand && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// safeRatio is a/b, with 0/0 = 1 (both read nothing) and a/0 = a, as if
// the reference had read one byte, so that the ratio stays finite (JSON has
// no infinity) and fails any target.
func safeRatio(a, b int64) float64 {
	switch {
	case b != 0:
		return float64(a) / float64(b)
	case a == 0:
		return 1
	default:
		return float64(a)
	}
}

// pythonTargets are the python group's: BrandDataset against (p), and the
// Python client against the Go client on one gateway.
func (r *runner) pythonTargets(find func(string) *Row) []Target {
	var out []Target
	p := find(ConfigPyObjects)
	coldWant, warmWant, size := 5.0, 8.0, ""
	if r.cfg.smallSamples() {
		coldWant, warmWant, size = 25, 40, ", small samples"
	}
	for _, row := range r.rep.Rows {
		if row.Config != ConfigPyBrand || p == nil {
			continue
		}
		at := ", cache " + percentString(row.CacheFraction)
		name, want := "PyTorch: Brand cold epoch ÷ (p) boto3 per sample", coldWant
		if row.Epoch != nil && *row.Epoch > 0 {
			name, want = "PyTorch: Brand warm epoch ÷ (p) boto3 per sample", warmWant
		}
		t := atLeast(name+size+at, row.SamplesPerSec/p.SamplesPerSec, want)
		t.Note = fmt.Sprintf("%.0f against %.0f samples/s; %d DataLoader workers against %d", row.SamplesPerSec, p.SamplesPerSec, row.Concurrency, p.Concurrency)
		out = append(out, t)
	}
	if g, py := find(ConfigGoClient), find(ConfigPyClient); g != nil && py != nil {
		t := atLeast("Python client warm ÷ Go client, same gateway", py.SamplesPerSec/g.SamplesPerSec, 0.8)
		t.Note = fmt.Sprintf("%.0f against %.0f samples/s; CPU %.2f against %.2f s/GB", py.SamplesPerSec, g.SamplesPerSec,
			cpuPerGB(py), cpuPerGB(g))
		out = append(out, t)
	}
	return out
}

// cpuPerGB is the client's CPU seconds per GB of a row, 0 if unmeasured.
func cpuPerGB(r *Row) float64 {
	if r.CPU == nil || r.Bytes == 0 {
		return 0
	}
	return r.CPU.Harness / (float64(r.Bytes) / 1e9)
}

// gatewayCPUTarget is the target that the server process's CPU per GB delivered
// in row be at most want × limit's; false when either was not measured.
func gatewayCPUTarget(name string, row, limit *Row, want float64) (Target, bool) {
	if row == nil || limit == nil || row.CPU == nil || limit.CPU == nil || row.Bytes == 0 || limit.Bytes == 0 {
		return Target{}, false
	}
	got := row.CPU.Gateway / float64(row.Bytes) * 1e9
	ceiling := limit.CPU.Gateway / float64(limit.Bytes) * 1e9
	t := atMost(name, ratio(got, ceiling), want)
	t.Note = fmt.Sprintf("%.3f against %.3f CPU-s/GB", got, ceiling)
	return t, true
}
