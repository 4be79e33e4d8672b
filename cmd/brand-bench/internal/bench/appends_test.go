package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/testsupport/cmdtest"
)

// TestAppendsRun runs the appends benchmark on a tiny configuration: 3
// files, 3 appended under a running job, 2 rounds. brand index --append
// reads each new file's tail once and no more of the data, the record
// adds every new row and starts where the loop had not read, a batch
// holding a new row reaches the loop at or after the record's step, and
// the reports are written. It checks no speed.
func TestAppendsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds brand and starts MinIO and a gateway")
	}
	cfg := AppendsConfig{Files: 3, NewFiles: 3, RowsPerFile: 8, RowBytes: 64, BatchSize: 4, Window: 2,
		StepTime: 10 * time.Millisecond, WarmSteps: 2, IndexPoll: 100 * time.Millisecond, Rounds: 2, ExcludeFiles: 2, ExcludeRows: 3,
		Harness: Harness{GatewayBinary: cmdtest.Build(t, "brand"), WorkDir: t.TempDir(), Command: "go test -run TestAppendsRun"}}
	var log bytes.Buffer
	cfg.Log = &log
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := RunAppends(ctx, cfg)
	if err != nil {
		t.Fatalf("RunAppends: %v\nlog:\n%s", err, log.String())
	}
	t.Log(log.String())
	if rep.Base.Files != 3 || rep.Base.GetRequests != 3 {
		t.Errorf("the first brand index: %+v; want one tail read of each of 3 files", rep.Base)
	}
	if len(rep.Rounds) != cfg.Rounds {
		t.Fatalf("%d rounds, want %d", len(rep.Rounds), cfg.Rounds)
	}
	for i, r := range rep.Rounds {
		ix := r.Index
		// One read of each new file's tail (the whole file, at this
		// size), nothing of the old ones.
		if ix.GetRequests != int64(cfg.NewFiles) || ix.GetBytes != r.NewBytes || ix.ListRequests < 1 || ix.Written <= 0 || r.IndexGets < 1 {
			t.Errorf("round %d: brand index --append %+v, %d index GETs; want one read of each of %d new files", i, ix, r.IndexGets, cfg.NewFiles)
		}
		if r.FilesBefore != cfg.Files+i*cfg.NewFiles || r.NewSamples != cfg.NewFiles*cfg.RowsPerFile || r.Record.Index == "" || r.Record.IndexID == r.Record.Index {
			t.Errorf("round %d: %+v", i, r)
		}
		if r.Posts < 2 || r.Record.FromStep < uint64(cfg.WarmSteps) || uint64(r.FirstStep) < r.Record.FromStep || r.FirstRows < 1 {
			t.Errorf("round %d: %d POSTs, record from step %d, first new row at step %d (%d rows); want a record after the steps read and a new row at or after it",
				i, r.Posts, r.Record.FromStep, r.FirstStep, r.FirstRows)
		}
		if r.ReloadSeconds < 0 || r.PostSeconds <= 0 || r.FirstSeconds < 0 || r.TotalSeconds < r.Index.Seconds {
			t.Errorf("round %d: times %+v", i, r)
		}
	}
	// (5): the list empties the chunks of the files it names whole, and
	// the epoch under it reads the store for the others' alone, as /plan
	// predicts; the rows named one a file save nothing.
	x := rep.Exclusion
	if x == nil {
		t.Fatal("no exclusion run")
	}
	saved := x.Plain.StoreBytes - x.Listed.StoreBytes
	if x.Keys != 2*cfg.RowsPerFile+3 || x.Record.EmptyChunks != 2 || x.Listed.Samples != x.Plain.Samples-x.Keys ||
		saved <= 0 || saved > x.EmptiedBytes || x.Plain.StoreRequests-x.Listed.StoreRequests != 2 {
		t.Errorf("(5): %+v; want 2 chunks emptied and their reads saved", x)
	}
	if x.Plain.PlanBytes != x.Plain.StoreBytes || x.Listed.PlanBytes != x.Listed.StoreBytes {
		t.Errorf("(5): /plan predicted %d and %d store bytes, the epochs read %d and %d", x.Plain.PlanBytes, x.Listed.PlanBytes, x.Plain.StoreBytes, x.Listed.StoreBytes)
	}
	var text, js bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "| 3 files, 24 rows, ") || strings.Count(text.String(), "**") != 2*cfg.Rounds+2 || !strings.Contains(text.String(), "| saved ") {
		t.Errorf("the text report:\n%s", text.String())
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back AppendsReport
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Rounds) != len(rep.Rounds) {
		t.Errorf("the JSON report: %v, %d rounds", err, len(back.Rounds))
	}
}
