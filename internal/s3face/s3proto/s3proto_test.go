package s3proto

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

type sliceNames []string

func (s sliceNames) Len() int          { return len(s) }
func (s sliceNames) Name(i int) string { return s[i] }

// bruteList is S3's listing written the obvious way: every name, once.
func bruteList(names []string, p ListParams) (keys, prefixes []string) {
	after := p.StartAfter
	if p.V1 {
		after = p.Marker
	}
	seen := map[string]bool{}
	for _, n := range names {
		if !strings.HasPrefix(n, p.Prefix) || (after != "" && n <= after) {
			continue
		}
		if p.Delimiter != "" {
			if j := strings.Index(n[len(p.Prefix):], p.Delimiter); j >= 0 {
				cp := n[:len(p.Prefix)+j+len(p.Delimiter)]
				if !seen[cp] && (after == "" || cp > after) {
					seen[cp] = true
					prefixes = append(prefixes, cp)
				}
				continue
			}
		}
		keys = append(keys, n)
	}
	return keys, prefixes
}

// TestListPagesEqualOneListing: over random name sets, prefixes,
// delimiters and page sizes, the pages a client follows (V2 tokens, V1
// markers) add up to the one-shot listing.
func TestListPagesEqualOneListing(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := "ab/c."
	word := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	for trial := range 3000 {
		set := map[string]bool{}
		for range rng.IntN(60) {
			set[word(1+rng.IntN(6))] = true
		}
		names := make([]string, 0, len(set))
		for n := range set {
			names = append(names, n)
		}
		slices.Sort(names)
		p := ListParams{Prefix: word(rng.IntN(3)), MaxKeys: 1 + rng.IntN(7), V1: trial%2 == 1}
		if rng.IntN(3) > 0 {
			p.Delimiter = []string{"/", ".", "b/"}[rng.IntN(3)]
		}
		if rng.IntN(4) == 0 {
			p.StartAfter = word(2)
			if p.V1 {
				p.Marker = p.StartAfter
			}
		}
		wantKeys, wantPrefixes := bruteList(names, p)
		var keys, prefixes []string
		for pages := 0; ; pages++ {
			page, err := List(sliceNames(names), p)
			if err != nil {
				t.Fatal(err)
			}
			if page.KeyCount() > p.MaxKeys || pages > 100 {
				t.Fatalf("trial %d: page of %d for max %d", trial, page.KeyCount(), p.MaxKeys)
			}
			for _, i := range page.Contents {
				keys = append(keys, names[i])
			}
			prefixes = append(prefixes, page.CommonPrefixes...)
			if !page.IsTruncated {
				break
			}
			if p.V1 {
				p.Marker = page.NextMarker
				if p.Marker == "" {
					p.Marker = names[page.Contents[len(page.Contents)-1]]
				}
			} else {
				p.ContinuationToken = page.NextContinuationToken
			}
		}
		if !slices.Equal(keys, wantKeys) || !slices.Equal(prefixes, wantPrefixes) {
			t.Fatalf("trial %d %+v over %q:\n got %q %q\nwant %q %q", trial, p, names, keys, prefixes, wantKeys, wantPrefixes)
		}
	}
}

// TestListSkipsAPrefixInLogTime: a common prefix over a million names is
// passed with a few lookups, not a walk.
func TestListSkipsAPrefixInLogTime(t *testing.T) {
	names := make(countingNames, 1_000_001)
	page, err := List(&names, ListParams{Delimiter: "/", MaxKeys: 10})
	if err != nil || len(page.CommonPrefixes) != 1 || len(page.Contents) != 1 || page.IsTruncated {
		t.Fatalf("%+v %v", page, err)
	}
	if names[0] > 200 {
		t.Fatalf("%d names read", names[0])
	}
}

// countingNames is "d/000000" … then "z"; element 0 counts reads.
type countingNames []int

func (c *countingNames) Len() int { return len(*c) }
func (c *countingNames) Name(i int) string {
	(*c)[0]++
	if i == len(*c)-1 {
		return "z"
	}
	return fmt.Sprintf("d/%08d", i)
}

func TestParseListParams(t *testing.T) {
	if _, err := ParseListParams(url.Values{"max-keys": {"-1"}}, false); err == nil {
		t.Error("negative max-keys")
	}
	if _, err := ParseListParams(url.Values{"encoding-type": {"base64"}}, false); err == nil {
		t.Error("unknown encoding")
	}
	if _, err := ParseListParams(url.Values{"continuation-token": {"!!"}}, false); err == nil {
		t.Error("bad token")
	}
	p, err := ParseListParams(url.Values{"max-keys": {"5000"}}, false)
	if err != nil || p.MaxKeys != MaxKeys {
		t.Errorf("%+v %v", p, err)
	}
}

// TestURLEncodingRoundTrips: what encoding-type=url writes, the clients'
// decoding (unquote_plus, QueryUnescape) reads back.
func TestURLEncodingRoundTrips(t *testing.T) {
	for _, s := range []string{"a b+c/d", "ünï/日本.jpg", "100%/x", "a&b=c?d#e", "~._-"} {
		e := urlEncode(s)
		if d, err := url.QueryUnescape(e); err != nil || d != s || strings.Contains(e, "%2F") {
			t.Errorf("%q → %q → %q %v", s, e, d, err)
		}
	}
}

func TestParseRange(t *testing.T) {
	tests := []struct {
		h          string
		size       int64
		start, n   int64
		out        RangeOutcome
		contentRng string
	}{
		{"bytes=0-9", 100, 0, 10, RangeSatisfiable, "bytes 0-9/100"},
		{"bytes=90-200", 100, 90, 10, RangeSatisfiable, "bytes 90-99/100"},
		{"bytes=10-", 100, 10, 90, RangeSatisfiable, ""},
		{"bytes=-7", 100, 93, 7, RangeSatisfiable, ""},
		{"bytes=-700", 100, 0, 100, RangeSatisfiable, ""},
		{"bytes=100-", 100, 0, 0, RangeUnsatisfiable, ""},
		{"bytes=-0", 100, 0, 0, RangeUnsatisfiable, ""},
		{"bytes=0-0", 0, 0, 0, RangeUnsatisfiable, ""},
		{"bytes=0-1,5-6", 100, 0, 100, RangeNone, ""},
		{"bytes=9-3", 100, 0, 100, RangeNone, ""},
		{"items=0-1", 100, 0, 100, RangeNone, ""},
		{"bytes=x-", 100, 0, 100, RangeNone, ""},
		// Positions past 2^63 are past every object's end (S3: 416, or
		// the clamped range), not a header to ignore.
		{"bytes=9223372036854775808-", 100, 0, 0, RangeUnsatisfiable, ""},
		{"bytes=99999999999999999999999-", 100, 0, 0, RangeUnsatisfiable, ""},
		{"bytes=9223372036854775807-", 100, 0, 0, RangeUnsatisfiable, ""},
		{"bytes=5-18446744073709551616", 100, 5, 95, RangeSatisfiable, "bytes 5-99/100"},
		{"bytes=-18446744073709551616", 100, 0, 100, RangeSatisfiable, "bytes 0-99/100"},
		{"bytes=+5-9", 100, 0, 100, RangeNone, ""},
		{"bytes=5--9", 100, 0, 100, RangeNone, ""},
	}
	for _, tc := range tests {
		s, n, out := ParseRange(tc.h, tc.size)
		if s != tc.start || n != tc.n || out != tc.out {
			t.Errorf("%q of %d: %d+%d %v", tc.h, tc.size, s, n, out)
		}
		if tc.contentRng != "" && ContentRange(s, n, tc.size) != tc.contentRng {
			t.Errorf("%q: %s", tc.h, ContentRange(s, n, tc.size))
		}
	}
}

func TestCheckPreconditions(t *testing.T) {
	lm := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	before, after := lm.Add(-time.Hour).Format(http.TimeFormat), lm.Add(time.Hour).Format(http.TimeFormat)
	const etag = `"abc"`
	tests := []struct {
		name   string
		h      map[string]string
		method string
		want   Condition
	}{
		{"none", nil, "GET", Proceed},
		{"if-match", map[string]string{"If-Match": etag}, "GET", Proceed},
		{"if-match list", map[string]string{"If-Match": `"x", "abc"`}, "GET", Proceed},
		{"if-match star", map[string]string{"If-Match": "*"}, "GET", Proceed},
		{"if-match other", map[string]string{"If-Match": `"x"`}, "GET", ConditionFailed},
		{"if-match weak", map[string]string{"If-Match": `W/"abc"`}, "GET", ConditionFailed},
		{"if-unmodified-since before", map[string]string{"If-Unmodified-Since": before}, "GET", ConditionFailed},
		{"if-unmodified-since after", map[string]string{"If-Unmodified-Since": after}, "GET", Proceed},
		{"S3: if-match wins over if-unmodified-since", map[string]string{"If-Match": etag, "If-Unmodified-Since": before}, "GET", Proceed},
		{"if-none-match", map[string]string{"If-None-Match": etag}, "GET", NotModified},
		{"if-none-match weak", map[string]string{"If-None-Match": `W/"abc"`}, "HEAD", NotModified},
		{"if-none-match other", map[string]string{"If-None-Match": `"x"`}, "GET", Proceed},
		{"if-modified-since after", map[string]string{"If-Modified-Since": after}, "GET", NotModified},
		{"if-modified-since same", map[string]string{"If-Modified-Since": lm.Format(http.TimeFormat)}, "GET", NotModified},
		{"if-modified-since before", map[string]string{"If-Modified-Since": before}, "GET", Proceed},
		{"S3: if-none-match false wins over if-modified-since", map[string]string{"If-None-Match": `"x"`, "If-Modified-Since": after}, "GET", Proceed},
		{"bad date ignored", map[string]string{"If-Modified-Since": "yesterday"}, "GET", Proceed},
	}
	for _, tc := range tests {
		r := httptest.NewRequest(tc.method, "/", nil)
		for k, v := range tc.h {
			r.Header.Set(k, v)
		}
		if got := CheckPreconditions(r.Header, etag, lm.Add(300*time.Millisecond), tc.method); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestXML(t *testing.T) {
	w := httptest.NewRecorder()
	p := ListParams{Prefix: "a b/", Delimiter: "/", MaxKeys: 2, EncodingType: "url"}
	res := NewListBucketResult("bkt", p, ListPage{Contents: []int{0}, CommonPrefixes: []string{"a b/c/"}, IsTruncated: true, NextContinuationToken: "tok"})
	res.Contents = []Object{{Key: "a b/x+y.jpg", Size: 5, LastModified: time.Date(2009, 10, 12, 17, 50, 30, 0, time.UTC), ETag: `"e"`}}
	WriteXML(w, 200, res.Encode())
	body := w.Body.String()
	for _, want := range []string{`<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`, "<Key>a+b/x%2By.jpg</Key>",
		"<LastModified>2009-10-12T17:50:30.000Z</LastModified>", "<KeyCount>2</KeyCount>", "<NextContinuationToken>tok</NextContinuationToken>",
		"<CommonPrefixes><Prefix>a+b/c/</Prefix></CommonPrefixes>", "<IsTruncated>true</IsTruncated>", "<StorageClass>STANDARD</StorageClass>"} {
		if !strings.Contains(body, want) {
			t.Errorf("missing %s in\n%s", want, body)
		}
	}
	w = httptest.NewRecorder()
	e := ErrorOf(NoSuchKey, "The specified key does not exist.")
	e.Resource, e.RequestID = "/b/k", "r1"
	WriteXML(w, e.Status, e)
	if w.Code != 404 || !strings.Contains(w.Body.String(), "<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message><Resource>/b/k</Resource><RequestId>r1</RequestId></Error>") {
		t.Errorf("%d %s", w.Code, w.Body)
	}
}
