package bench

import (
	"runtime"
	"time"
)

// CPUUse is the CPU time each process of a configuration spent while it
// was measured. On a machine whose cores the client, the gateway and the
// store share, throughput is bounded by the sum: a configuration that
// keeps every core busy can only go faster by spending less CPU per byte,
// and these figures show which process spends it.
type CPUUse struct {
	// Harness is this process: the consuming clients, and the proxy of
	// "(a) in the client's process".
	Harness float64 `json:"harness_s"`
	// Gateway is the server process between the client and the store:
	// `brand serve` for Brand's rows, `brand-bench limit` for the limits'.
	Gateway float64 `json:"gateway_s,omitempty"`
	// Store is the S3 server (MinIO) the harness started; 0 for an
	// external one.
	Store float64 `json:"store_s"`
	// Busy is the sum of the three over (wall time × CPUs): 1 means every
	// core was busy for the whole measurement.
	Busy float64 `json:"busy"`
}

// Total is the CPU time of all three processes.
func (c CPUUse) Total() float64 { return c.Harness + c.Gateway + c.Store }

// cpuMeter samples the CPU time of the processes of a measurement.
type cpuMeter struct {
	store   int // pid of the S3 server, 0 if not ours
	gateway int // pid of the gateway, 0 if none
}

// cpuMark is a reading of a cpuMeter.
type cpuMark struct {
	at                      time.Time
	harness, gateway, store time.Duration
}

func (m cpuMeter) mark() cpuMark {
	k := cpuMark{at: time.Now(), harness: processCPU(0)}
	if m.gateway != 0 {
		k.gateway = processCPU(m.gateway)
	}
	if m.store != 0 {
		k.store = processCPU(m.store)
	}
	return k
}

// since returns the CPU used between start and now.
func (m cpuMeter) since(start cpuMark) CPUUse {
	end := m.mark()
	u := CPUUse{
		Harness: (end.harness - start.harness).Seconds(),
		Gateway: (end.gateway - start.gateway).Seconds(),
		Store:   (end.store - start.store).Seconds(),
	}
	if wall := end.at.Sub(start.at).Seconds(); wall > 0 {
		u.Busy = u.Total() / (wall * float64(runtime.NumCPU()))
	}
	return u
}
