package feedback

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/brandgw/brand/internal/quote"
	"github.com/brandgw/brand/internal/server/reqbody"
)

// The JSON form, {"keys"|"ids": [...], "losses": [...]}, read as it
// arrives by a scanner of just that grammar. encoding/json's Decoder
// would do it token by token, but it allocates an error value for every
// number that ends an array element (it peeks the comma as if past a
// top-level value): a million records cost 8 million allocations, 190 MB
// of garbage and 0.4 s, where this scanner allocates only the records'
// blocks (and a string a key, to look it up) and takes a tenth of the
// time. Strings with escapes are still unquoted by encoding/json.

// The JSON form's fields.
const (
	fieldKeys   = "keys"
	fieldIDs    = "ids"
	fieldLosses = "losses"
)

// json reads {"keys"|"ids": [...], "losses": [...]} into recs, in either order: a
// key is looked up as it arrives, and the second array fills in the
// records the first began. A null field is an absent one. Unknown or
// repeated fields and anything after the object are refused.
func (d decoder) json(r io.Reader, recs *records) error {
	sc := &scanner{r: bufio.NewReaderSize(r, 64<<10)}
	if err := sc.eat('{', "a JSON object"); err != nil {
		return err
	}
	seen := map[string]bool{}
	lengths := map[string]int{} // the arrays read (not null), by field
	more, err := sc.first('}')
	for ; more && err == nil; more, err = sc.another('}') {
		name, err := sc.str()
		if err != nil {
			return err
		}
		field := string(name)
		switch {
		case field != fieldKeys && field != fieldIDs && field != fieldLosses:
			return fmt.Errorf("%w: unknown field %s: feedback has \"keys\" or \"ids\", and \"losses\"", ErrBadFeedback, quote.Input(field))
		case seen[field]:
			return fmt.Errorf("%w: field %s given twice", ErrBadFeedback, quote.Input(field))
		}
		seen[field] = true
		if err := sc.eat(':', "':'"); err != nil {
			return err
		}
		if null, err := sc.null(); err != nil || null {
			if err != nil {
				return err
			}
			continue // absent
		}
		if _, named := lengths[other(field)]; named {
			return fmt.Errorf("%w: give either keys or ids", ErrBadFeedback)
		}
		if err := sc.eat('[', fmt.Sprintf("%q as an array", field)); err != nil {
			return err
		}
		if lengths[field], err = d.array(sc, field, recs, len(lengths) == 0); err != nil {
			return err
		}
	}
	if err != nil {
		return err
	}
	if err := reqbody.End(sc.r); err != nil {
		if errors.Is(err, reqbody.ErrBadJSON) {
			err = fmt.Errorf("%w: %w", ErrBadFeedback, err)
		}
		return err
	}
	_, keys := lengths[fieldKeys]
	_, ids := lengths[fieldIDs]
	if !keys && !ids {
		return fmt.Errorf("%w: give either keys or ids", ErrBadFeedback)
	}
	if named := lengths[fieldKeys] + lengths[fieldIDs]; named != lengths[fieldLosses] {
		return fmt.Errorf("%w: %d sample IDs but %d losses", ErrBadFeedback, named, lengths[fieldLosses])
	}
	for k := range recs.n {
		if err := d.check(k, *recs.at(k)); err != nil {
			return err
		}
	}
	return nil
}

// other is the field that names samples the other way: keys for ids, ids
// for keys; none for losses.
func other(field string) string {
	switch field {
	case fieldKeys:
		return fieldIDs
	case fieldIDs:
		return fieldKeys
	}
	return ""
}

// array reads the elements of field's array, the '[' read, into recs:
// new records if first, else the records the other array began, which
// it must match in number. It returns how many it read.
func (d decoder) array(sc *scanner, field string, recs *records, first bool) (int, error) {
	n := 0
	more, err := sc.first(']')
	for ; more && err == nil; more, err = sc.another(']') {
		var rec *record
		switch {
		case first:
			rec, err = d.more(recs)
		case n >= recs.n:
			err = fmt.Errorf("%w: more %s than the %d of the other array", ErrBadFeedback, field, recs.n)
		default:
			rec = recs.at(n)
		}
		if err != nil {
			return n, err
		}
		switch field {
		case fieldIDs:
			rec.id, err = sc.id()
		case fieldLosses:
			rec.loss, err = sc.loss()
		case fieldKeys:
			rec.id, err = d.key(sc)
		}
		if err != nil {
			// ie escapes (errors.As takes its address), so it is allocated
			// where it is declared: declared before the err check, it cost
			// 16 bytes an element, 32 MB of garbage for a million records.
			var ie indexError
			if errors.As(err, &ie) {
				return n, ie.err // the index could not answer: not the body's fault
			}
			return n, fmt.Errorf("%w: %s[%d]: %w", ErrBadFeedback, field, n, err)
		}
		n++
	}
	if err != nil {
		return n, err
	}
	if !first && n != recs.n {
		return n, fmt.Errorf("%w: %d %s but %d entries in the other array", ErrBadFeedback, n, field, recs.n)
	}
	return n, nil
}

// key reads a sample key and returns its ID.
func (d decoder) key(sc *scanner) (uint32, error) {
	k, err := sc.str()
	if err != nil {
		return 0, err
	}
	ctx := d.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	// On a node whose index holds only its own chunks' tables, this
	// reads the key's chunk's table, unless a batch read it lately.
	id, ok, err := d.ds.Index.Lookup(ctx, string(k))
	if err != nil {
		return 0, indexError{fmt.Errorf("looking up sample key %s in dataset %s: %w", quote.Input(string(k)), d.ds.Name, err)}
	}
	if !ok {
		return 0, fmt.Errorf("unknown sample key %s in dataset %s", quote.Input(string(k)), d.ds.Name)
	}
	return uint32(id), nil
}

// indexError is a key lookup that failed to read the index.
type indexError struct{ err error }

func (e indexError) Error() string { return e.err.Error() }

// scanner reads JSON values of the feedback grammar from a buffered
// body. What it returns is valid until its next read; its errors say
// where the body went wrong, and the decoder marks them ErrBadFeedback.
type scanner struct {
	r   *bufio.Reader
	at  int64  // bytes consumed, for messages
	lit []byte // the last literal or string read
}

// errEnd reports a body that ends inside the object.
var errEnd = errors.New("the body ends inside the JSON object")

// peek skips whitespace and returns the next byte, unread.
func (sc *scanner) peek() (byte, error) {
	for {
		c, err := sc.r.ReadByte()
		if err != nil {
			return 0, err
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			sc.at++
			continue
		}
		return c, sc.r.UnreadByte()
	}
}

// unexpected describes what was found where want was expected.
func (sc *scanner) unexpected(want string, c byte, err error) error {
	switch {
	case err == io.EOF:
		return fmt.Errorf("%w, where %s was expected", errEnd, want)
	case err != nil:
		return err
	}
	return fmt.Errorf("byte %d: %q where %s was expected", sc.at, c, want)
}

// eat reads the byte c, after whitespace.
func (sc *scanner) eat(c byte, want string) error {
	got, err := sc.peek()
	if err != nil || got != c {
		return sc.unexpected(want, got, err)
	}
	sc.r.ReadByte()
	sc.at++
	return nil
}

// first reads the start of a list's contents: false if it is empty
// (the closing byte read).
func (sc *scanner) first(closing byte) (bool, error) {
	c, err := sc.peek()
	if err != nil {
		return false, sc.unexpected("a value", c, err)
	}
	if c == closing {
		return false, sc.eat(closing, "")
	}
	return true, nil
}

// another reads what follows a list's element: true after a comma,
// false after the closing byte.
func (sc *scanner) another(closing byte) (bool, error) {
	c, err := sc.peek()
	if err == nil && (c == ',' || c == closing) {
		sc.r.ReadByte()
		sc.at++
		return c == ',', nil
	}
	return false, sc.unexpected(fmt.Sprintf("',' or %q", closing), c, err)
}

// null reads null, if that is what comes next.
func (sc *scanner) null() (bool, error) {
	if c, err := sc.peek(); err != nil || c != 'n' {
		return false, err
	}
	word, err := sc.r.Peek(4)
	if err != nil || string(word) != "null" {
		return false, fmt.Errorf("byte %d: not a JSON value", sc.at)
	}
	sc.r.Discard(4)
	sc.at += 4
	return true, nil
}

// literal reads the bytes of a number, or of a bare word, into sc.lit.
func (sc *scanner) literal() ([]byte, error) {
	if c, err := sc.peek(); err != nil || c == '"' || c == '[' || c == '{' || c == ',' || c == ']' {
		return nil, sc.unexpected("a number", c, err)
	}
	sc.lit = sc.lit[:0]
	for {
		c, err := sc.r.ReadByte()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if c != '-' && c != '+' && c != '.' && c != 'e' && c != 'E' && (c < '0' || c > '9') && (c < 'a' || c > 'z') {
			sc.r.UnreadByte()
			break
		}
		sc.lit = append(sc.lit, c)
		sc.at++
	}
	return sc.lit, nil
}

// id reads a sample ID: an integer literal in [0, 2^32).
func (sc *scanner) id() (uint32, error) {
	b, err := sc.literal()
	if err != nil {
		return 0, err
	}
	if len(b) == 0 || len(b) > 1 && b[0] == '0' {
		return 0, fmt.Errorf("%s is not a sample ID (an integer >= 0)", quote.Input(string(b)))
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%s is not a sample ID (an integer >= 0)", quote.Input(string(b)))
		}
		if n = 10*n + uint64(c-'0'); n > math.MaxUint32 {
			return 0, fmt.Errorf("%s is not a sample ID (below 2^32)", quote.Input(string(b)))
		}
	}
	return uint32(n), nil
}

// loss reads a loss: a JSON number, parsed as float64 and rounded to
// float32 as the whole-body decoder of earlier releases did. Its range
// is checked with the record.
func (sc *scanner) loss() (float32, error) {
	b, err := sc.literal()
	if err != nil {
		return 0, err
	}
	if !isNumber(b) {
		return 0, fmt.Errorf("%s is not a loss (a number)", quote.Input(string(b)))
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return 0, fmt.Errorf("%s is not a loss: out of range", quote.Input(string(b)))
	}
	return float32(f), nil
}

// isNumber reports whether b is a JSON number:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func isNumber(b []byte) bool {
	i := 0
	digits := func() bool {
		start := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i > start
	}
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case !digits():
		return false
	}
	if i < len(b) && b[i] == '.' {
		if i++; !digits() {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		if i++; i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	return i == len(b)
}

// str reads a JSON string and returns its contents. One with escapes is
// unquoted by encoding/json.
func (sc *scanner) str() ([]byte, error) {
	if err := sc.eat('"', "a string"); err != nil {
		return nil, err
	}
	sc.lit = append(sc.lit[:0], '"')
	escaped := false
	for {
		c, err := sc.r.ReadByte()
		if err != nil {
			return nil, sc.unexpected("the end of a string", c, err)
		}
		sc.at++
		sc.lit = append(sc.lit, c)
		switch {
		case c < 0x20:
			return nil, fmt.Errorf("byte %d: a control character in a string", sc.at)
		case c == '\\':
			escaped = true
			next, err := sc.r.ReadByte()
			if err != nil {
				return nil, sc.unexpected("the end of a string", next, err)
			}
			sc.at++
			sc.lit = append(sc.lit, next)
		case c == '"' && !escaped:
			return sc.lit[1 : len(sc.lit)-1], nil
		case c == '"':
			var s string
			if err := json.Unmarshal(sc.lit, &s); err != nil {
				return nil, fmt.Errorf("byte %d: %w", sc.at, err)
			}
			sc.lit = append(sc.lit[:0], s...)
			return sc.lit, nil
		}
	}
}
