package query

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDocsNameEveryJobParameter: docs/http-api.md's table of job
// parameters names every parameter the epoch, batch and manifest
// endpoints accept (JobParams, from the one table of every parameter)
// and none they do not. The reproduction: the table omitted
// columns, so a user read of no way to serve a view of a Parquet
// dataset's fields.
func TestDocsNameEveryJobParameter(t *testing.T) {
	b, err := os.ReadFile("../../../docs/http-api.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "\n## Job parameters\n")
	if start < 0 {
		t.Fatal("docs/http-api.md has no \"## Job parameters\"")
	}
	section := doc[start+1:]
	if end := strings.Index(section[3:], "\n#"); end >= 0 {
		section = section[:end+3]
	}
	var named []string
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue // not a row, or the header
		}
		first := strings.SplitN(line, "|", 3)[1]
		for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(first, -1) {
			named = append(named, m[1])
		}
	}
	want := slices.Sorted(slices.Values(JobParams))
	slices.Sort(named)
	if !slices.Equal(named, want) {
		var missing, extra []string
		for _, p := range want {
			if !slices.Contains(named, p) {
				missing = append(missing, p)
			}
		}
		for _, p := range named {
			if !slices.Contains(want, p) {
				extra = append(extra, p)
			}
		}
		t.Errorf("docs/http-api.md's job parameters: missing %v, naming %v that the job endpoints do not take (the table, sorted: %v)", missing, extra, named)
	}
}
