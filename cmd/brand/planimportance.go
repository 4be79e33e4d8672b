package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/importance/snapshots"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/s3backend"
)

// planImportance is what `brand plan` needs to add importance mode to a
// plan: a snapshot, from a local file or from the dataset's store, and the
// hot chunk count the job passes.
type planImportance struct {
	file    string // a local copy of a snapshot object
	job     string
	version string // a snapshot in the store, under the job's name
	hot     int
}

func (p *planImportance) register(fs *flag.FlagSet) {
	fs.StringVar(&p.file, "snapshot", "", "plan importance mode too, from this local copy of a snapshot object (_brand/importance/<job>/<version>.brandimp)")
	fs.StringVar(&p.job, "job", "", "the importance job name (with --importance; checked against --snapshot's)")
	fs.StringVar(&p.version, "importance", "", "plan importance mode too, from this snapshot version of --job in the dataset's store")
	fs.IntVar(&p.hot, "hot", 0, "with --snapshot or --importance: hot chunks, as the job's hot parameter")
}

// load returns the importance mode to plan, or nil when none was asked for.
func (p *planImportance) load(ctx context.Context, store s3backend.Store, ix *chunkindex.Index) (*planner.Importance, error) {
	switch {
	case p.file == "" && p.version == "":
		if p.job != "" || p.hot != 0 {
			return nil, errors.New("--job and --hot plan importance mode: give --snapshot FILE or --importance VERSION too")
		}
		return nil, nil
	case p.file != "" && p.version != "":
		return nil, errors.New("--snapshot and --importance both name a snapshot: give one")
	case p.hot < 0:
		return nil, fmt.Errorf("--hot %d: must be at least 0", p.hot)
	}
	var snap *importance.Snapshot
	if p.file == "" {
		if err := importance.ValidJobName(p.job); err != nil {
			return nil, fmt.Errorf("--importance needs --job, the name the snapshot was sealed under: %w", err)
		}
		var err error
		if snap, err = snapshots.Read(ctx, store, ix, p.job, p.version); err != nil {
			return nil, fmt.Errorf("reading the importance snapshot: %w", err)
		}
	} else {
		b, err := os.ReadFile(p.file)
		if err != nil {
			return nil, fmt.Errorf("reading the importance snapshot: %w", err)
		}
		if snap, err = importance.Decode(b, ix); err != nil {
			return nil, fmt.Errorf("importance snapshot %s: %w", p.file, err)
		}
		if p.job != "" && snap.Job() != p.job {
			return nil, fmt.Errorf("importance snapshot %s is job %s's, not %s", p.file, snap.Job(), p.job)
		}
	}
	return &planner.Importance{Snapshot: snap, Hot: p.hot}, nil
}
