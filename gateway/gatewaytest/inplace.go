package gatewaytest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/s3backend"
)

// InPlaceStore is a store of .lines files indexed in place: 3 files of
// 40 lines each, chunks of about 300 bytes (several a file). It returns
// the store and each sample's line by key.
func InPlaceStore(t testing.TB, f formattest.Lines) (*s3backend.Local, map[string]string) {
	t.Helper()
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	files := map[string][]string{}
	for f := range 3 {
		for l := range 40 {
			line := fmt.Sprintf("file %d line %d %s", f, l, strings.Repeat("x", (f*40+l)%23))
			files[fmt.Sprintf("data/f%d.lines", f)] = append(files[fmt.Sprintf("data/f%d.lines", f)], line)
			want[fmt.Sprintf("data/f%d/%d", f, l)] = line
		}
	}
	for k, b := range formattest.Write(files) {
		if _, err := st.Put(context.Background(), k, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dataset.IndexInPlace(context.Background(), st, st, dataset.InPlaceOptions{
		Formats: []format.Format{f}, Options: format.Options{ChunkBytes: 300}}); err != nil {
		t.Fatal(err)
	}
	return st, want
}

// AppendFile adds a .lines file of 20 lines, name, beside an
// InPlaceStore's files and appends it to the dataset (brand index
// --append): a writer's next batch of files.
func AppendFile(t testing.TB, st s3backend.Store, name string) {
	t.Helper()
	var lines []string
	for l := range 20 {
		lines = append(lines, fmt.Sprintf("%s line %d", name, l))
	}
	for k, b := range formattest.Write(map[string][]string{"data/" + name + ".lines": lines}) {
		if _, err := st.Put(context.Background(), k, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dataset.AppendInPlace(context.Background(), st, st, dataset.AppendOptions{
		Formats: []format.Format{formattest.Lines{}}, Options: format.Options{ChunkBytes: 300}}); err != nil {
		t.Fatal(err)
	}
}

// Dataset is base's one dataset as GET /datasets lists it.
func Dataset(t testing.TB, base string) api.DatasetInfo {
	t.Helper()
	resp, err := http.Get(base + "/datasets")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var l api.DatasetList
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &l); err != nil || len(l.Datasets) != 1 {
		t.Fatalf("/datasets: %v: %s", err, b)
	}
	return l.Datasets[0]
}
