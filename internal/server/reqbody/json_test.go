package reqbody

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestDecodeJSON: one JSON object, white space around it, is decoded;
// anything else wraps ErrBadJSON and says what (an empty body io.EOF, a
// value of the wrong type its *json.UnmarshalTypeError).
func TestDecodeJSON(t *testing.T) {
	type body struct {
		A int    `json:"a"`
		B string `json:"b"`
	}
	tests := []struct {
		name, in string
		want     body
		says     string // "" for none: decoded
		is       error
	}{
		{"an object", `{"a": 1, "b": "x"}`, body{1, "x"}, "", nil},
		{"white space around it", " \n{\"a\": 2}\r\n\t ", body{A: 2}, "", nil},
		{"empty", "", body{}, "empty body", io.EOF},
		{"white space alone", " \n ", body{}, "empty body", io.EOF},
		{"garbage after it", `{"a": 1} x`, body{}, "data after the JSON object", nil},
		{"a second object", `{"a": 1}{"a": 2}`, body{}, "data after the JSON object", nil},
		{"a stray brace", `{"a": 1}}`, body{}, "data after the JSON object", nil},
		{"a NUL after it", "{\"a\": 1}\x00", body{}, "data after the JSON object", nil},
		{"a member twice", `{"a": 1, "a": 2}`, body{}, "duplicate", nil},
		{"an unknown field", `{"c": 1}`, body{}, `unknown field "c"`, nil},
		{"not JSON", `a=1`, body{}, "invalid character", nil},
		{"cut short", `{"a": 1`, body{}, "unexpected EOF", nil},
		{"a value of the wrong type", `{"a": "one"}`, body{}, "string", &json.UnmarshalTypeError{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got body
			err := DecodeJSON(strings.NewReader(tt.in), &got)
			if tt.says == "" {
				if err != nil || got != tt.want {
					t.Fatalf("DecodeJSON = %+v, %v; want %+v", got, err, tt.want)
				}
				return
			}
			if !errors.Is(err, ErrBadJSON) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("DecodeJSON: %v; want ErrBadJSON saying %q", err, tt.says)
			}
			var te *json.UnmarshalTypeError
			if tt.is == io.EOF && !errors.Is(err, io.EOF) || tt.is != nil && tt.is != io.EOF && !errors.As(err, &te) {
				t.Fatalf("DecodeJSON: %v; want it to wrap %T", err, tt.is)
			}
		})
	}
}

// TestDecodeJSONReadError: an error reading the body is returned as it
// is, for the caller's status (a body over its bound is ErrTooLarge).
func TestDecodeJSONReadError(t *testing.T) {
	err := DecodeJSON(io.MultiReader(strings.NewReader(`{"a":`), errReader{ErrTooLarge}), &struct{ A int }{})
	if !errors.Is(err, ErrTooLarge) || errors.Is(err, ErrBadJSON) {
		t.Fatalf("DecodeJSON over a failing body: %v; want ErrTooLarge alone", err)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// TestDecodeLargeJSON: DecodeLargeJSON takes what DecodeJSON takes and
// refuses what it refuses, each refusal wrapping ErrBadJSON and saying
// what (in go-json-experiment's words), an error reading the body
// returned as it is.
func TestDecodeLargeJSON(t *testing.T) {
	type body struct {
		A int      `json:"a"`
		B []string `json:"b"`
	}
	tests := []struct {
		name, in string
		want     body
		says     string // "" for none: decoded
	}{
		{"an object", `{"a": 1, "b": ["x", "y"]}`, body{1, []string{"x", "y"}}, ""},
		{"white space around it", " \n{\"a\": 2}\r\n\t ", body{A: 2}, ""},
		{"a name in another case", `{"A": 3}`, body{A: 3}, ""},
		{"empty", "", body{}, "empty body"},
		{"white space alone", " \n ", body{}, "empty body"},
		{"garbage after it", `{"a": 1} x`, body{}, "data after the JSON object"},
		{"a second object", `{"a": 1}{"a": 2}`, body{}, "data after the JSON object"},
		{"a stray brace", `{"a": 1}}`, body{}, "data after the JSON object"},
		{"a NUL after it", "{\"a\": 1}\x00", body{}, "data after the JSON object"},
		{"a member twice", `{"a": 1, "a": 2}`, body{}, "duplicate"},
		{"an unknown field", `{"c": 1}`, body{}, `unknown object member name "c"`},
		{"not JSON", `a=1`, body{}, "invalid character"},
		{"cut short", `{"a": 1`, body{}, "unexpected EOF"},
		{"a value of the wrong type", `{"a": "one"}`, body{}, "JSON string into Go int"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got body
			err := DecodeLargeJSON(strings.NewReader(tt.in), &got)
			if tt.says == "" {
				if err != nil || got.A != tt.want.A || strings.Join(got.B, ",") != strings.Join(tt.want.B, ",") {
					t.Fatalf("DecodeLargeJSON = %+v, %v; want %+v", got, err, tt.want)
				}
				return
			}
			if !errors.Is(err, ErrBadJSON) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("DecodeLargeJSON: %v; want ErrBadJSON saying %q", err, tt.says)
			}
			if tt.says == "empty body" && !errors.Is(err, io.EOF) {
				t.Fatalf("DecodeLargeJSON of an empty body: %v; want it to wrap io.EOF", err)
			}
			if DecodeJSON(strings.NewReader(tt.in), &body{}) == nil {
				t.Fatalf("DecodeJSON takes %q, which DecodeLargeJSON refuses", tt.in)
			}
		})
	}
	err := DecodeLargeJSON(io.MultiReader(strings.NewReader(`{"a":`), errReader{ErrTooLarge}), &body{})
	if !errors.Is(err, ErrTooLarge) || errors.Is(err, ErrBadJSON) {
		t.Fatalf("DecodeLargeJSON over a failing body: %v; want ErrTooLarge alone", err)
	}
}
