// Package golden reads and writes a package's golden file: inputs with
// the outputs they must produce, forever, checked by the Go tests, the
// docs' worked examples and the Python references alike.
//
// Every golden file of the module has one layout, so that a diff of one
// shows which output of which case changed: a JSON object whose fields
// are a comment (or other plain values), one per line, and lists of
// cases, each case an object with one field per line, in the order its
// struct declares them (a field omitempty leaves out stays out):
//
//	{
//	  "comment": "…",
//	  "cases": [
//	    {
//	      "name": "worked-example",
//	      "counts": [3,2,4]
//	    }
//	  ]
//	}
//
// A package keeps its own -update flag (the test binary's flag set is
// its own), its cases' types and its comparisons; Write and Read are the
// rest. It is test support, as net/http's httptest is: the server links
// none of it.
package golden

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
)

// Write writes v, a struct of plain fields and lists of structs, to path
// in the layout above.
func Write(t testing.TB, path string, v any) {
	t.Helper()
	if err := os.WriteFile(path, Encode(t, v), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("rewrote %s", path)
}

// Read decodes the golden file at path into v (a pointer); a missing
// file says how to make it.
func Read(t testing.TB, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (generate with -update)", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// Encode returns v in the layout above: each field of the struct v on a
// line of its own, except that a list of structs holds one object per
// case with a line per field.
func Encode(t testing.TB, v any) []byte {
	t.Helper()
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Struct {
		t.Fatalf("golden: Encode of a %s, not a struct", rv.Kind())
	}
	var buf bytes.Buffer
	buf.WriteString("{")
	for i, f := range fields(t, rv) {
		if i > 0 {
			buf.WriteString(",")
		}
		if f.list.IsValid() {
			fmt.Fprintf(&buf, "\n  %q: [", f.key)
			for j := range f.list.Len() {
				if j > 0 {
					buf.WriteString(",")
				}
				buf.WriteString("\n    {")
				for k, g := range fields(t, f.list.Index(j)) {
					if k > 0 {
						buf.WriteString(",")
					}
					fmt.Fprintf(&buf, "\n      %q: %s", g.key, g.value)
				}
				buf.WriteString("\n    }")
			}
			buf.WriteString("\n  ]")
			continue
		}
		fmt.Fprintf(&buf, "\n  %q: %s", f.key, f.value)
	}
	buf.WriteString("\n}\n")
	if !json.Valid(buf.Bytes()) {
		t.Fatal("golden: Encode made invalid JSON")
	}
	return buf.Bytes()
}

// field is one field of a struct as encoding/json writes it: its key and
// either its value or, for a list of structs, the list.
type field struct {
	key   string
	value json.RawMessage
	list  reflect.Value
}

// fields lists the fields encoding/json writes of the struct v, in the
// order the struct declares them.
func fields(t testing.TB, v reflect.Value) []field {
	t.Helper()
	b, err := json.Marshal(v.Interface())
	if err != nil {
		t.Fatal(err)
	}
	var written map[string]json.RawMessage
	if err := json.Unmarshal(b, &written); err != nil {
		t.Fatal(err)
	}
	var out []field
	for i := range v.NumField() {
		sf := v.Type().Field(i)
		key, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if key == "" || key == "-" {
			key = sf.Name
		}
		value, ok := written[key]
		if !ok {
			continue // omitempty, or unexported
		}
		f := field{key: key, value: value}
		if fv := v.Field(i); fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.Struct {
			f.list = fv
		}
		out = append(out, f)
	}
	return out
}
