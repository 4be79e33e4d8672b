package layertest

import (
	"reflect"
	"testing"
)

func TestViolations(t *testing.T) {
	const m = Module + "/"
	graph := map[string][]string{
		m + "a":         {m + "b", "fmt"},
		m + "b":         {m + "low/c", m + "up/x"},
		m + "low/c":     {"fmt"},
		m + "up/x":      {m + "up/x/y", m + "upper"},
		m + "up/x/y":    nil,
		m + "upper":     nil,
		m + "up":        nil,
		m + "d":         {m + "up", m + "a"},
		"fmt":           nil,
		m + "upward/ok": nil,
	}
	tests := []struct {
		roots, never []string
		want         [][]string
	}{
		{[]string{m + "a"}, []string{"up"}, [][]string{{m + "a", m + "b", m + "up/x"}}}, // the first package under the path; "upper" is not under "up"
		{[]string{m + "a"}, []string{"low"}, [][]string{{m + "a", m + "b", m + "low/c"}}},
		{[]string{m + "a"}, []string{"d"}, nil},
		{[]string{m + "low/c"}, []string{"up", "low"}, nil}, // a root is not its own violation
		{[]string{m + "d"}, []string{"up"}, [][]string{{m + "d", m + "a", m + "b", m + "up/x"}, {m + "d", m + "up"}}},
		{[]string{m + "a", m + "d"}, []string{"upper"}, [][]string{{m + "a", m + "b", m + "up/x", m + "upper"}, {m + "d", m + "a", m + "b", m + "up/x", m + "upper"}}},
	}
	for _, tt := range tests {
		if got := Violations(graph, tt.roots, tt.never); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Violations(%v, %v) = %v, want %v", tt.roots, tt.never, got, tt.want)
		}
	}
}
