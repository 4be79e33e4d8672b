package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/testsupport/cmdtest"
)

func TestProxyKind(t *testing.T) {
	for _, c := range []struct{ method, target, want string }{
		{"GET", "/formats/?list-type=2&prefix=data%2F", "LIST"},
		{"GET", "/formats", "LIST"},
		{"GET", "/formats/parquet/data/train-00000-of-00002.parquet", "GET parquet"},
		{"PUT", "/formats/parquet-index/_brand/index", "PUT parquet-index"},
		{"HEAD", "/formats/", "HEAD"},
	} {
		if got := proxyKind(httptest.NewRequest(c.method, c.target, nil)); got != c.want {
			t.Errorf("%s %s: %q, want %q", c.method, c.target, got, c.want)
		}
	}
}

// TestFormatsRun runs the formats benchmark on a tiny configuration
// (under a minute; (3), which starts a Python with torch for each pass,
// is left out): brand index reads every file's tail and no more, each
// format's epochs read every photo, the projected Parquet job reads
// exactly the projected columns' bytes, warm epochs read nothing from
// the store, and the reports are written. It checks no speed.
func TestFormatsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds brand and starts MinIO and six gateways")
	}
	cfg := FormatsConfig{IndexFiles: 40, IndexRowsPerFile: 2, LargeFiles: 1, LargeFileBytes: 4 << 20, Images: 120, RowsPerFile: 50, RowsPerGroup: 20,
		ChunkSize: 1 << 20, EmbeddingBytes: 1 << 10, BatchSize: 16, Rounds: 2, WarmEpochs: 2, StoreReplays: 2, NoTorch: true,
		Harness: Harness{GatewayBinary: cmdtest.Build(t, "brand"), WorkDir: t.TempDir(), Command: "go test -run TestFormatsRun"}}
	var log bytes.Buffer
	cfg.Log = &log
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := RunFormats(ctx, cfg)
	if err != nil {
		t.Fatalf("RunFormats: %v\nlog:\n%s", err, log.String())
	}

	if len(rep.Index) != 2 {
		t.Fatalf("%d index runs, want 2", len(rep.Index))
	}
	for _, run := range rep.Index {
		// One optimistic read of each file's last 64 KiB (the whole file
		// when smaller), nothing else of the data.
		if run.GetRequests != int64(run.Files) || run.GetBytes > int64(run.Files)*(64<<10) || run.ListRequests < 1 || run.Written <= 0 || run.Seconds <= 0 {
			t.Errorf("index of %s: %+v; want one tail read a file", run.Name, run)
		}
	}
	if rep.Index[1].Fraction >= rep.Index[0].Fraction {
		t.Errorf("larger files, larger fraction read: %+v", rep.Index)
	}
	// (1)'s MinIO is gone once (1) is measured: nothing after reads its
	// files, and by default they are 50 GiB.
	if _, err := os.Stat(filepath.Join(cfg.WorkDir, "formats-index-minio")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("(1)'s MinIO directory after the run: %v, want it removed", err)
	}
	if len(rep.Datasets) != 3 || rep.ProjectedBytes <= 0 || rep.ProjectedBytes >= rep.Datasets[1].Bytes {
		t.Fatalf("datasets %+v, projected %d", rep.Datasets, rep.ProjectedBytes)
	}
	// Every object read once before the rounds, to no epoch's account
	// (the cold rows' store bytes below are the epochs' own).
	if sum := rep.Datasets[0].Bytes + rep.Datasets[1].Bytes + rep.Datasets[2].Bytes; rep.Primed < sum {
		t.Errorf("primed %d bytes of datasets of %d", rep.Primed, sum)
	}
	count := map[string]int{}
	for _, row := range rep.Rows {
		count[row.Format]++
		want := cfg.Images
		if !row.Cold {
			want *= cfg.WarmEpochs
		}
		if row.Loader != loaderGo || row.Samples != want || row.SamplesPerSec <= 0 || row.VsTar <= 0 {
			t.Errorf("%+v: want %d samples read by the Go client", row, want)
		}
		switch {
		case !row.Cold && row.StoreBytes != 0:
			t.Errorf("%s warm: %d store bytes, want none", row.Format, row.StoreBytes)
		case row.Cold && row.Format == formatParquet && row.StoreBytes != rep.ProjectedBytes:
			t.Errorf("parquet cold: %d store bytes, want the projected columns' %d", row.StoreBytes, rep.ProjectedBytes)
		case row.Cold && row.Format == formatMDS && row.StoreBytes != rep.Datasets[2].ShardBytes:
			t.Errorf("mds cold: %d store bytes, want the shards' %d", row.StoreBytes, rep.Datasets[2].ShardBytes)
		case row.Cold && row.Format == formatTar && row.StoreBytes != rep.Datasets[0].Bytes:
			t.Errorf("tar cold: %d store bytes, want the chunks' %d", row.StoreBytes, rep.Datasets[0].Bytes)
		}
	}
	for _, f := range formatOrder {
		if count[f] != 2*cfg.Rounds {
			t.Errorf("%d rows of %s, want %d", count[f], f, 2*cfg.Rounds)
		}
	}
	// Each format's first cold epoch replayed against MinIO alone: the
	// same GETs and bytes as the epoch's.
	if len(rep.Replays) != len(formatOrder) {
		t.Fatalf("replays %+v, want one a format", rep.Replays)
	}
	for i, rp := range rep.Replays {
		var first *FormatRow
		for j := range rep.Rows {
			if row := &rep.Rows[j]; row.Format == rp.Format && row.Cold && row.Round == 0 {
				first = row
			}
		}
		if rp.Format != formatOrder[i] || first == nil || int64(rp.GETs) != first.StoreRequests || rp.Bytes != first.StoreBytes ||
			len(rp.MinIOCPU) != cfg.StoreReplays {
			t.Errorf("replay %+v of the cold epoch %+v", rp, first)
		}
	}
	if len(rep.Summary) != 6 || len(rep.Targets) != 8 || rep.PythonSkipped == "" {
		t.Errorf("%d summary rows, %d targets, (3) skipped %q", len(rep.Summary), len(rep.Targets), rep.PythonSkipped)
	}
	for _, tg := range rep.Targets {
		if tg.Status != Pass && tg.Status != Miss && tg.Status != NA {
			t.Errorf("target %q: %q", tg.Name, tg.Status)
		}
	}

	var text, js, img bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "| Go client | cold | parquet |") || !strings.Contains(text.String(), "The store alone") {
		t.Errorf("the text report:\n%s", text.String())
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back FormatsReport
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Rows) != len(rep.Rows) {
		t.Errorf("the JSON report: %v, %d rows", err, len(back.Rows))
	}
	if err := writeChart(&img, rep); err != nil {
		t.Fatal(err)
	}
}

// TestFormatTargetsMedian checks that a rate target is judged on the
// median round, with the worst beside it: one slow round of three passes
// when the other two do, and a median under the bound misses.
func TestFormatTargetsMedian(t *testing.T) {
	rows := func(vs ...float64) []FormatRow {
		var rs []FormatRow
		for i, v := range vs {
			rs = append(rs, FormatRow{Round: i, Format: formatParquet, Loader: loaderGo, Cold: true, VsTar: v})
		}
		return rs
	}
	for _, tt := range []struct {
		vs     []float64
		status string
		ratio  float64
		note   string
	}{
		{[]float64{0.80, 0.95, 0.93}, Pass, 0.93, "rounds: 0.800 / 0.950 / 0.930; the worst 0.800"},
		{[]float64{0.85, 0.95, 0.88}, Miss, 0.88, "rounds: 0.850 / 0.950 / 0.880; the worst 0.850"},
		{[]float64{0.86, 0.95}, Pass, 0.905, "rounds: 0.860 / 0.950; the worst 0.860"},
	} {
		r := &FormatsReport{Rows: rows(tt.vs...)}
		ts := r.targets()
		if len(ts) == 0 || !strings.HasPrefix(ts[0].Name, "(2) parquet ÷ tar samples/s, cold") {
			t.Fatalf("%v: targets %+v; want the cold rate's first", tt.vs, ts)
		}
		got := ts[0]
		if got.Status != tt.status || got.Ratio < tt.ratio-1e-9 || got.Ratio > tt.ratio+1e-9 || got.Note != tt.note {
			t.Errorf("%v: %s %.3f %q; want %s %.3f %q", tt.vs, got.Status, got.Ratio, got.Note, tt.status, tt.ratio, tt.note)
		}
		if !strings.Contains(got.Name, "median") {
			t.Errorf("%v: the target's name %q does not say it is the median round", tt.vs, got.Name)
		}
	}
}
