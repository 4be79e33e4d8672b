package gateway

import (
	"fmt"
	"net/url"
	"strconv"
)

// Job is the set of parameters that, with an epoch and a batch number,
// determines a batch. Any replica given the same Job and index serves the
// same bytes.
type Job struct {
	Dataset   string
	Seed      uint64
	BatchSize int
	Window    int // chunks per shuffle window
	World     int
	Rank      int
	DropLast  bool
}

// Defaults are the job parameters used when a request does not give them,
// so that plain curl needs none.
type Defaults struct {
	Seed      uint64
	BatchSize int  // default 32
	Window    int  // default 8
	DropLast  bool // default false
}

// Limits bound what one request may ask for.
type Limits struct {
	MaxBatchSize int    // default 65536
	MaxWindow    int    // default 65536
	MaxWorld     int    // default 65536
	MaxEpoch     uint64 // epochs are 0..MaxEpoch; default 1<<31-1
}

func (d *Defaults) fill() {
	if d.BatchSize == 0 {
		d.BatchSize = 32
	}
	if d.Window == 0 {
		d.Window = 8
	}
}

func (l *Limits) fill() {
	if l.MaxBatchSize == 0 {
		l.MaxBatchSize = 65536
	}
	if l.MaxWindow == 0 {
		l.MaxWindow = 65536
	}
	if l.MaxWorld == 0 {
		l.MaxWorld = 65536
	}
	if l.MaxEpoch == 0 {
		l.MaxEpoch = 1<<31 - 1
	}
}

// parseJob reads job parameters from a query, applying defaults and
// checking bounds. Unknown parameters are rejected so a typo such as
// "batchsize" does not silently fall back to a default.
func parseJob(q url.Values, d Defaults, l Limits, defaultDataset string) (Job, error) {
	known := map[string]bool{"dataset": true, "seed": true, "batch_size": true, "window": true,
		"world": true, "rank": true, "drop_last": true, "format": true}
	for k := range q {
		if !known[k] {
			return Job{}, fmt.Errorf("%w: unknown query parameter %q (known: dataset, seed, batch_size, window, world, rank, drop_last, format)", ErrBadRequest, k)
		}
	}
	j := Job{Dataset: defaultDataset, Seed: d.Seed, BatchSize: d.BatchSize, Window: d.Window, World: 1, DropLast: d.DropLast}
	if v := q.Get("dataset"); v != "" {
		j.Dataset = v
	}
	var err error
	if v := q.Get("seed"); v != "" {
		if j.Seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			return Job{}, fmt.Errorf("%w: seed must be an unsigned 64-bit integer, got %q", ErrBadRequest, v)
		}
	}
	ints := []struct {
		name    string
		dst     *int
		min     int
		max     int
		maxHint string
	}{
		{"batch_size", &j.BatchSize, 1, l.MaxBatchSize, "the server's --max-batch-size"},
		{"window", &j.Window, 1, l.MaxWindow, "the server limit"},
		{"world", &j.World, 1, l.MaxWorld, "the server limit"},
		{"rank", &j.Rank, 0, 0, ""},
	}
	for _, p := range ints {
		v := q.Get(p.name)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil {
			return Job{}, fmt.Errorf("%w: %s must be an integer, got %q", ErrBadRequest, p.name, v)
		}
		if n < p.min || (p.max > 0 && n > p.max) {
			if p.max > 0 {
				return Job{}, fmt.Errorf("%w: %s must be between %d and %d (%s), got %d", ErrBadRequest, p.name, p.min, p.max, p.maxHint, n)
			}
			return Job{}, fmt.Errorf("%w: %s must be at least %d, got %d", ErrBadRequest, p.name, p.min, n)
		}
		*p.dst = n
	}
	if j.Rank >= j.World {
		return Job{}, fmt.Errorf("%w: rank %d out of range: with world=%d, rank must be 0..%d", ErrNotFound, j.Rank, j.World, j.World-1)
	}
	if v := q.Get("drop_last"); v != "" {
		if j.DropLast, err = strconv.ParseBool(v); err != nil {
			return Job{}, fmt.Errorf("%w: drop_last must be true or false, got %q", ErrBadRequest, v)
		}
	}
	if f := q.Get("format"); f != "" && f != "json" && f != "tar" {
		return Job{}, fmt.Errorf("%w: format must be tar or json, got %q", ErrBadRequest, f)
	}
	return j, nil
}

// parseNumber reads a path number such as the N of /epoch/N.
func parseNumber(name, v string, maxValue uint64) (uint64, error) {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s must be a non-negative integer, got %q", ErrBadRequest, name, v)
	}
	if n > maxValue {
		return 0, fmt.Errorf("%w: %s %d out of range: valid %s numbers are 0..%d", ErrNotFound, name, n, name, maxValue)
	}
	return n, nil
}
