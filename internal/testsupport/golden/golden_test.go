package golden

import (
	"path/filepath"
	"reflect"
	"testing"
)

type testCase struct {
	Name   string `json:"name"`
	Counts []int  `json:"counts"`
	Skip   []int  `json:"skip,omitempty"`
	Inner  []struct {
		A int `json:"a"`
	} `json:"inner"`
}

type testFile struct {
	Comment string     `json:"comment"`
	Cases   []testCase `json:"cases"`
	None    []testCase `json:"none"`
	Seed    uint64     `json:"seed"`
}

// TestEncode: a line per plain field, an object per case with a line per
// field in the struct's order, omitempty honoured, a nested list of
// structs kept on its field's line, an empty list written empty.
func TestEncode(t *testing.T) {
	f := testFile{Comment: "c", Seed: 1 << 63, Cases: []testCase{
		{Name: "a", Counts: []int{3, 2}},
		{Name: "b", Skip: []int{1}, Inner: []struct {
			A int `json:"a"`
		}{{A: 1}}},
	}}
	want := `{
  "comment": "c",
  "cases": [
    {
      "name": "a",
      "counts": [3,2],
      "inner": null
    },
    {
      "name": "b",
      "counts": null,
      "skip": [1],
      "inner": [{"a":1}]
    }
  ],
  "none": [
  ],
  "seed": 9223372036854775808
}
`
	if got := string(Encode(t, f)); got != want {
		t.Errorf("Encode:\n%s\nwant:\n%s", got, want)
	}
	path := filepath.Join(t.TempDir(), "golden.json")
	Write(t, path, f)
	var back testFile
	Read(t, path, &back)
	f.None = []testCase{}
	if !reflect.DeepEqual(back, f) {
		t.Errorf("read back %+v, wrote %+v", back, f)
	}
}
