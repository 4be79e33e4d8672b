package reqbody

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/quote"
)

// ErrBadJSON marks a request body that is not the one JSON value its
// route takes: not JSON, empty, a member named twice in an object, a
// field the route does not know, or anything but white space after the
// value: the asker must change it.
var ErrBadJSON = errkind.New(errkind.Invalid, "the body is not one JSON object")

// DecodeJSON reads a request's body whole (bounded by Apply) and decodes
// the one JSON value it holds into v: every route that takes a JSON body
// reads it here, so that none takes data after its value (a second
// object, a stray brace, which json.Decoder.Decode alone leaves unread
// and a handler would never see), a member given twice in an object
// (encoding/json keeps the last and silently drops the first, RFC 7493
// §2.3), or a field v does not have. An empty body wraps io.EOF; a value
// of the wrong type keeps its *json.UnmarshalTypeError for the caller to
// name; a read error (ErrTooLarge, a deadline) is returned as it is.
func DecodeJSON(body io.Reader, v any) error {
	data, err := io.ReadAll(body)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return fmt.Errorf("%w: empty body: %w", ErrBadJSON, io.EOF)
	}
	if err := duplicateName(data); err != nil {
		return fmt.Errorf("%w: %w", ErrBadJSON, quote.Error(err)) // it names the member
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %w", ErrBadJSON, quote.Error(err)) // an unknown field is named whole
	}
	return End(bytes.NewReader(data[dec.InputOffset():]))
}

// DecodeLargeJSON is DecodeJSON for a body of megabytes (an exclusion
// list's million keys): the same rules, in one pass of
// go-json-experiment's decoder, where DecodeJSON makes three (names
// twice, validity, values) and encoding/json's is the slowest of them:
// a 12 MB list in about a third of DecodeJSON's time. It streams: the
// body is decoded as it is read, never held whole beside what is decoded
// from it (a 252 MB list held both, twice the memory). Names match as
// encoding/json matches them (case-insensitively); a value of the wrong
// type is a *json.SemanticError of that package, not encoding/json's
// *json.UnmarshalTypeError.
func DecodeLargeJSON(body io.Reader, v any) error {
	in := &readErr{r: body}
	dec := jsontext.NewDecoder(in)
	if err := jsonv2.UnmarshalDecode(dec, v, jsonv2.RejectUnknownMembers(true), jsonv2.MatchCaseInsensitiveNames(true)); err != nil {
		switch {
		case in.err != nil:
			return in.err
		case errors.Is(err, io.EOF):
			return fmt.Errorf("%w: empty body: %w", ErrBadJSON, io.EOF)
		}
		return fmt.Errorf("%w: %w", ErrBadJSON, quote.Error(err)) // an unknown member is named whole
	}
	if err := End(bufio.NewReader(io.MultiReader(bytes.NewReader(dec.UnreadBuffer()), in))); err != nil {
		if in.err != nil {
			return in.err
		}
		return err
	}
	return nil
}

// readErr is a body that keeps the error of its read, other than its end,
// for the caller to return as it is: the decoder folds it into one of
// its own.
type readErr struct {
	r   io.Reader
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && err != io.EOF && r.err == nil {
		r.err = err
	}
	return n, err
}

// End reads what follows a JSON value to its end: white space alone, or
// an error wrapping ErrBadJSON naming the first byte that is not. A
// reader of its own grammar (feedback's streaming scanner) ends here as
// DecodeJSON does.
func End(r io.ByteReader) error {
	for {
		c, err := r.ReadByte()
		switch {
		case err == io.EOF:
			return nil
		case err != nil:
			return err
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return fmt.Errorf("%w: data after the JSON object (%q)", ErrBadJSON, c)
	}
}

// duplicateName reports a member name given twice in one object of the
// JSON values data holds. A syntax error is left to the decoder that
// follows, which names it with its offset.
func duplicateName(data []byte) error {
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	for {
		err := dec.SkipValue()
		if err == io.EOF {
			return nil
		}
		if errors.Is(err, jsontext.ErrDuplicateName) {
			return err
		}
		if err != nil {
			return nil
		}
	}
}
