package s3proto

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RangeOutcome is what a Range header asks of an object.
type RangeOutcome int

const (
	// RangeNone: no range, or one S3 ignores (malformed, or several
	// ranges): the whole object, 200.
	RangeNone RangeOutcome = iota
	// RangeSatisfiable: the bytes asked for, 206.
	RangeSatisfiable
	// RangeUnsatisfiable: InvalidRange, 416.
	RangeUnsatisfiable
)

// ParseRange reads a Range header against an object of size bytes as S3
// does: bytes=a-b (b past the end is clamped), bytes=a-, bytes=-n (the
// last n bytes; all of them if n exceeds the size). A range starting at or
// past the end, a suffix of 0 bytes and any range of an empty object are
// unsatisfiable. Positions are decimal digits of any length: one past
// 2^63 is past the end of every object, not a malformed header.
func ParseRange(header string, size int64) (start, length int64, out RangeOutcome) {
	spec, ok := strings.CutPrefix(strings.TrimSpace(header), "bytes=")
	if !ok || strings.Contains(spec, ",") {
		return 0, size, RangeNone
	}
	a, b, ok := strings.Cut(strings.TrimSpace(spec), "-")
	if !ok {
		return 0, size, RangeNone
	}
	if a == "" {
		n, ok := position(b)
		if !ok {
			return 0, size, RangeNone
		}
		if n == 0 || size == 0 {
			return 0, 0, RangeUnsatisfiable
		}
		n = min(n, size)
		return size - n, n, RangeSatisfiable
	}
	first, ok := position(a)
	if !ok {
		return 0, size, RangeNone
	}
	last := size - 1
	if b != "" {
		if last, ok = position(b); !ok || last < first {
			return 0, size, RangeNone
		}
	}
	if first >= size {
		return 0, 0, RangeUnsatisfiable
	}
	last = min(last, size-1)
	return first, last - first + 1, RangeSatisfiable
}

// position reads a byte position: decimal digits, at most math.MaxInt64
// (a larger one is as far past every object's end).
func position(s string) (int64, bool) {
	if s == "" {
		return 0, false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return math.MaxInt64, true // only overflow is left
	}
	return n, true
}

// ContentRange is the Content-Range of a 206 answer.
func ContentRange(start, length, size int64) string {
	return fmt.Sprintf("bytes %d-%d/%d", start, start+length-1, size)
}

// Condition is the outcome of a request's preconditions.
type Condition int

const (
	Proceed         Condition = iota // answer the request
	NotModified                      // 304
	ConditionFailed                  // 412 PreconditionFailed
)

// CheckPreconditions evaluates If-Match, If-Unmodified-Since,
// If-None-Match and If-Modified-Since in RFC 7232's order, with S3's
// documented exceptions: an If-Match that holds makes a failing
// If-Unmodified-Since irrelevant, and an If-None-Match that does not match
// makes If-Modified-Since irrelevant. Dates that do not parse are
// ignored; times compare at whole seconds, as Last-Modified carries them.
func CheckPreconditions(h http.Header, etag string, lastModified time.Time, method string) Condition {
	lm := lastModified.Truncate(time.Second)
	safe := method == http.MethodGet || method == http.MethodHead
	if im := h.Get("If-Match"); im != "" {
		if !matchETag(im, etag, false) {
			return ConditionFailed
		}
	} else if t, err := http.ParseTime(h.Get("If-Unmodified-Since")); err == nil && lm.After(t) {
		return ConditionFailed
	}
	if inm := h.Get("If-None-Match"); inm != "" {
		if matchETag(inm, etag, true) {
			if safe {
				return NotModified
			}
			return ConditionFailed
		}
	} else if t, err := http.ParseTime(h.Get("If-Modified-Since")); err == nil && safe && !lm.After(t) {
		return NotModified
	}
	return Proceed
}

// matchETag reports whether a list of entity tags (or "*") matches etag;
// weak comparison ignores W/ prefixes, strong comparison never matches a
// weak tag.
func matchETag(list, etag string, weak bool) bool {
	if strings.TrimSpace(list) == "*" {
		return true
	}
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimSpace(t)
		isWeak := strings.HasPrefix(t, "W/")
		if isWeak && !weak {
			continue
		}
		t = strings.TrimPrefix(t, "W/")
		// Clients that send the tag unquoted are matched too, as S3 does.
		if strings.Trim(t, `"`) == strings.Trim(etag, `"`) {
			return true
		}
	}
	return false
}
