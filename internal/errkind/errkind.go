// Package errkind gives an error its kind: what went wrong, in the few
// words a caller acts on — a request to fix, a thing that is not there, a
// retry later, a store that no longer matches its index — apart from which
// part of the program said it.
//
// Each package says the kind of its sentinel errors where it defines them,
// as every file system wraps io/fs.ErrNotExist and upspin's errors carry
// an errors.Kind:
//
//	var ErrBusy = errkind.Named(errkind.Busy, "cache_busy", "chunkcache: busy: too many requests waiting for room")
//
// A sentinel is an ordinary error value: errors.Is finds it through any
// wrapping, and a sentinel made by wrapping another (fmt.Errorf with %w)
// has the other's kind. Whoever answers an error — the HTTP faces,
// internal/server/httperr — asks its kind (Has) and needs to know no
// package that defined it; so a new sentinel is answered by its kind the
// day it is written, never a silent 500 for want of a line in a switch.
//
// The kinds are few on purpose: each is a different answer to the one who
// asked. A sentinel whose kind is Internal says so on purpose.
//
// Standard library only; no package-level mutable state.
package errkind

import "strconv"

// Kind is what went wrong, as whoever asked sees it.
type Kind uint8

// The kinds. The HTTP status each is answered with is
// internal/server/httperr's business; it is named here to help the reader.
const (
	// Other is no kind: an error no sentinel of this module is behind
	// (a bug, or a library's error nobody classified). Answered 500.
	Other Kind = iota
	// Invalid: the request is malformed or asks for what can never be
	// (a parameter out of its range, a body over its bound): the asker
	// must change it. 400.
	Invalid
	// Unauthenticated: the request does not prove who sent it. 401.
	Unauthenticated
	// Forbidden: the request proves who sent it, but its credential does
	// not give the right it needs over what it names (a read-only token
	// editing a job). 403.
	Forbidden
	// NotFound: what the request names does not exist (a dataset, a
	// batch past the epoch's end, a schedule). 404.
	NotFound
	// Conflict: the request is well formed but the state it assumes is
	// not the one held (an index or membership version no longer held, an
	// epoch already sealed, a racing edit). 409.
	Conflict
	// Unprocessable: the request is well formed and the store matches
	// its index, but the content cannot be processed (an image its
	// pipeline cannot decode); retrying will not help. 422.
	Unprocessable
	// Busy: this server cannot take the request now — not ready, at one
	// of its bounds, shutting down, waiting for another member — and
	// says so in its own words, naming nothing internal; retry later.
	// 503, the error's message sent as it is.
	Busy
	// Unavailable: something the server depends on (the object store) is
	// unavailable, or a load must be tried again; retry later. 503, the
	// error's message (which names the store) kept for the log.
	Unavailable
	// Upstream: the store no longer matches the index the server reads
	// it by (an object changed, vanished, or is shorter than indexed; a
	// table read from the stored index is damaged); retrying will not
	// help. 502.
	Upstream
	// Corrupt: bytes read from the store fail the checksum their index
	// gives them. 502, told as a checksum failure.
	Corrupt
	// NotImplemented: a feature the server was built without, or a
	// request it does not model. 501.
	NotImplemented
	// Internal: a failure inside the server, or of its own files (an
	// index it cannot decode, a model it cannot load), nothing the asker
	// can fix. 500, the error's message kept for the log.
	Internal
)

var names = [...]string{
	Other:           "other",
	Invalid:         "invalid",
	Unauthenticated: "unauthenticated",
	Forbidden:       "forbidden",
	NotFound:        "not found",
	Conflict:        "conflict",
	Unprocessable:   "unprocessable",
	Busy:            "busy",
	Unavailable:     "unavailable",
	Upstream:        "upstream",
	Corrupt:         "corrupt",
	NotImplemented:  "not implemented",
	Internal:        "internal",
}

func (k Kind) String() string {
	if int(k) < len(names) {
		return names[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Error is a sentinel error of a kind. Compare it by identity
// (errors.Is), as any sentinel.
type Error struct {
	kind Kind
	name string
	text string
}

// New returns a sentinel error of kind k whose message is text: an
// errors.New that says its kind.
func New(k Kind, text string) error { return &Error{kind: k, text: text} }

// Named is New for an error an operator tells apart from the others of
// its kind: name is what the server's metrics count the answers to it
// under (brand_http_errors_total's reason: "cache_busy" is not
// "store_unavailable", though both are 503s). Names are few and fixed
// (internal/server/httperr lists them), so a metric labelled with them
// stays small; several sentinels may share one.
func Named(k Kind, name, text string) error { return &Error{kind: k, name: name, text: text} }

func (e *Error) Error() string { return e.text }

// Kind is e's kind.
func (e *Error) Kind() Kind { return e.kind }

// Name is the name e is counted under, or "".
func (e *Error) Name() string { return e.name }

// kinded is an error that says its kind: an *Error, or an error type of
// a package's own (one that carries fields a sentinel cannot).
type kinded interface {
	error
	Kind() Kind
}

// Has reports whether err, or any error in the tree of errors it wraps
// (Unwrap() error, Unwrap() []error), is of kind k. An error wrapping
// several sentinels has several kinds; whoever answers it decides which
// comes first.
func Has(err error, k Kind) bool {
	found := false
	walk(err, func(e error) bool {
		if ke, ok := e.(kinded); ok && ke.Kind() == k {
			found = true
		}
		return found
	})
	return found
}

// Of returns the kind of the first error in err's tree, in the order
// errors.Is visits it, that has one; Other if none has.
func Of(err error) Kind {
	k := Other
	walk(err, func(e error) bool {
		if ke, ok := e.(kinded); ok && ke.Kind() != Other {
			k = ke.Kind()
			return true
		}
		return false
	})
	return k
}

// named is an error that carries a name: an *Error made by Named, or an
// error type of a package's own counted apart from the sentinel it wraps
// (a chunk damaged at rest is not any store mismatch).
type named interface {
	error
	Name() string
}

// Names returns the names (Named, or an error type's Name) of the errors
// in err's tree, in the order errors.Is visits it.
func Names(err error) []string {
	var out []string
	walk(err, func(e error) bool {
		if ne, ok := e.(named); ok && ne.Name() != "" {
			out = append(out, ne.Name())
		}
		return false
	})
	return out
}

// walk calls visit on err and every error it wraps, depth first as
// errors.Is does, until visit returns true.
func walk(err error, visit func(error) bool) bool {
	for err != nil {
		if visit(err) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if walk(e, visit) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}
