package s3auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Error is a refused request: S3's code, status and message.
type Error struct {
	Code    string
	Status  int
	Message string
}

func (e *Error) Error() string { return "s3auth: " + e.Code + ": " + e.Message }

// Describe gives the S3 code, status and message of an error Verify
// returned; ok is false for any other error.
func Describe(err error) (code string, status int, message string, ok bool) {
	var e *Error
	if !errors.As(err, &e) {
		return "", 0, "", false
	}
	return e.Code, e.Status, e.Message, true
}

func fail(code string, status int, format string, a ...any) error {
	return &Error{Code: code, Status: status, Message: fmt.Sprintf(format, a...)}
}

func accessDenied(format string, a ...any) error {
	return fail("AccessDenied", http.StatusForbidden, format, a...)
}

func malformed(presigned bool, format string, a ...any) error {
	if presigned {
		return fail("AuthorizationQueryParametersError", http.StatusBadRequest, format, a...)
	}
	return fail("AuthorizationHeaderMalformed", http.StatusBadRequest, format, a...)
}

const (
	algorithm     = "AWS4-HMAC-SHA256"
	amzDate       = "20060102T150405Z"
	unsigned      = "UNSIGNED-PAYLOAD"
	emptySHA256   = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	maxExpires    = 7 * 24 * 3600
	maxSigningKey = 256 // derived keys kept
)

// DefaultMaxSkew is Options.MaxSkew when zero: S3's own.
const DefaultMaxSkew = 15 * time.Minute

// Options configure a Verifier.
type Options struct {
	// Region, if set, is the only region a request may be signed for.
	Region string
	// Now is the clock; default time.Now.
	Now func() time.Time
	// MaxSkew bounds the difference between a request's time and Now.
	MaxSkew time.Duration
}

// Verifier checks requests' signatures. It is safe for concurrent use.
type Verifier struct {
	creds *Credentials
	opts  Options

	mu   sync.Mutex
	keys map[string][]byte // secret, day, region → signing key
}

// NewVerifier returns a verifier of requests signed with c's key pairs.
func NewVerifier(c *Credentials, opts Options) *Verifier {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxSkew == 0 {
		opts.MaxSkew = DefaultMaxSkew
	}
	return &Verifier{creds: c, opts: opts, keys: map[string][]byte{}}
}

// sig is what a request claims: who signed it, when, for what scope and
// headers, and the signature.
type sig struct {
	presigned     bool
	id, day       string
	region        string
	signed        []string
	signature     string
	when          time.Time
	expires       int64
	payload       string
	scope         string
	canonicalDrop string // query parameter left out of the canonical query
}

// Verify checks r's signature and returns the access key ID it was
// signed with. It does not read the body.
func (v *Verifier) Verify(r *http.Request) (string, error) {
	auth := r.Header.Get("Authorization")
	q := r.URL.Query()
	var s sig
	var err error
	switch {
	case strings.HasPrefix(auth, algorithm+" "):
		s, err = parseHeader(r, auth)
	case strings.HasPrefix(auth, "AWS "), auth == "" && q.Has("AWSAccessKeyId"):
		// Signature V2 signs no payload hash; one sent is still S3's.
		if err := checkPayload(r, r.Header.Get("X-Amz-Content-Sha256")); err != nil {
			return "", err
		}
		return v.verifyV2(r, auth)
	case auth != "":
		return "", malformed(false, "the authorization header is malformed; the algorithm must be %s", algorithm)
	case q.Has("X-Amz-Algorithm") || q.Has("X-Amz-Signature"):
		s, err = parseQuery(q)
	default:
		return "", accessDenied("Anonymous access is forbidden: sign requests with one of the gateway's S3 key pairs")
	}
	if err != nil {
		return "", err
	}
	if v.opts.Region != "" && s.region != v.opts.Region {
		return "", malformed(s.presigned, "the region '%s' is wrong; expecting '%s'", s.region, v.opts.Region)
	}
	secret, ok := v.creds.Secret(s.id)
	if !ok {
		return "", fail("InvalidAccessKeyId", http.StatusForbidden, "The AWS Access Key Id you provided does not exist in our records.")
	}
	now := v.opts.Now()
	if s.presigned {
		if now.After(s.when.Add(time.Duration(s.expires) * time.Second)) {
			return "", accessDenied("Request has expired")
		}
		if s.when.After(now.Add(v.opts.MaxSkew)) {
			return "", accessDenied("Request is not valid yet")
		}
	} else if d := now.Sub(s.when); d > v.opts.MaxSkew || d < -v.opts.MaxSkew {
		return "", fail("RequestTimeTooSkewed", http.StatusForbidden, "The difference between the request time and the server's time is too large.")
	}
	if !slices.Contains(s.signed, "host") {
		return "", malformed(s.presigned, "the host header must be signed")
	}
	if !s.presigned && s.payload == "" {
		return "", fail("InvalidRequest", http.StatusBadRequest, "Missing required header for this request: x-amz-content-sha256")
	}
	if err := checkPayload(r, s.payload); err != nil {
		return "", err
	}
	creq := canonicalRequest(r, s)
	h := sha256.Sum256([]byte(creq))
	sts := algorithm + "\n" + s.when.UTC().Format(amzDate) + "\n" + s.scope + "\n" + hex.EncodeToString(h[:])
	mac := hmac.New(sha256.New, v.signingKey(secret, s.day, s.region))
	mac.Write([]byte(sts))
	want := hex.EncodeToString(mac.Sum(nil))
	if !hmac.Equal([]byte(want), []byte(strings.ToLower(s.signature))) {
		return "", fail("SignatureDoesNotMatch", http.StatusForbidden,
			"The request signature we calculated does not match the signature you provided. Check your key and signing method.")
	}
	return s.id, nil
}

// signingKey is the HMAC chain's key for a secret, day and region,
// derived once a day per key.
func (v *Verifier) signingKey(secret, day, region string) []byte {
	id := secret + "\x00" + day + "\x00" + region
	v.mu.Lock()
	defer v.mu.Unlock()
	if k, ok := v.keys[id]; ok {
		return k
	}
	k := []byte("AWS4" + secret)
	for _, part := range []string{day, region, "s3", "aws4_request"} {
		m := hmac.New(sha256.New, k)
		m.Write([]byte(part))
		k = m.Sum(nil)
	}
	if len(v.keys) >= maxSigningKey {
		clear(v.keys)
	}
	v.keys[id] = k
	return k
}

// parseCredential reads ID/YYYYMMDD/region/s3/aws4_request.
func parseCredential(s *sig, cred string) error {
	parts := strings.Split(cred, "/")
	if len(parts) != 5 || parts[0] == "" || len(parts[1]) != 8 || parts[2] == "" || parts[3] != "s3" || parts[4] != "aws4_request" {
		return malformed(s.presigned, "the credential %q is malformed; expecting \"<YOUR-AKID>/YYYYMMDD/REGION/s3/aws4_request\"", cred)
	}
	if _, err := time.Parse("20060102", parts[1]); err != nil {
		return malformed(s.presigned, "the credential's date %q is malformed", parts[1])
	}
	s.id, s.day, s.region = parts[0], parts[1], parts[2]
	s.scope = strings.Join(parts[1:], "/")
	return nil
}

func parseHeader(r *http.Request, auth string) (sig, error) {
	s := sig{}
	fields := map[string]string{}
	for _, f := range strings.Split(strings.TrimPrefix(auth, algorithm+" "), ",") {
		k, val, ok := strings.Cut(strings.TrimSpace(f), "=")
		if !ok {
			return s, malformed(false, "the authorization header is malformed: %q", f)
		}
		fields[k] = val
	}
	if fields["Credential"] == "" || fields["SignedHeaders"] == "" || fields["Signature"] == "" {
		return s, malformed(false, "the authorization header needs Credential, SignedHeaders and Signature")
	}
	if err := parseCredential(&s, fields["Credential"]); err != nil {
		return s, err
	}
	s.signed = strings.Split(fields["SignedHeaders"], ";")
	s.signature = fields["Signature"]
	var err error
	if d := r.Header.Get("X-Amz-Date"); d != "" {
		s.when, err = time.Parse(amzDate, d)
	} else if d := r.Header.Get("Date"); d != "" {
		s.when, err = http.ParseTime(d)
	} else {
		return s, fail("AccessDenied", http.StatusForbidden, "AWS authentication requires a valid Date or x-amz-date header")
	}
	if err != nil {
		return s, fail("AccessDenied", http.StatusForbidden, "AWS authentication requires a valid Date or x-amz-date header")
	}
	if s.when.UTC().Format("20060102") != s.day {
		return s, malformed(false, "the credential's date %s is not the request's", s.day)
	}
	s.payload = r.Header.Get("X-Amz-Content-Sha256")
	return s, nil
}

func parseQuery(q url.Values) (sig, error) {
	s := sig{presigned: true, canonicalDrop: "X-Amz-Signature"}
	if q.Get("X-Amz-Algorithm") != algorithm {
		return s, malformed(true, "X-Amz-Algorithm only supports \"%s\"", algorithm)
	}
	for _, k := range []string{"X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders", "X-Amz-Signature"} {
		if q.Get(k) == "" {
			return s, malformed(true, "Query-string authentication requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters (%s is missing)", k)
		}
	}
	if err := parseCredential(&s, q.Get("X-Amz-Credential")); err != nil {
		return s, err
	}
	var err error
	if s.when, err = time.Parse(amzDate, q.Get("X-Amz-Date")); err != nil {
		return s, malformed(true, "X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"")
	}
	if s.when.Format("20060102") != s.day {
		return s, malformed(true, "the credential's date %s is not X-Amz-Date's", s.day)
	}
	if s.expires, err = strconv.ParseInt(q.Get("X-Amz-Expires"), 10, 64); err != nil || s.expires < 1 || s.expires > maxExpires {
		return s, malformed(true, "X-Amz-Expires must be between 1 and %d seconds", maxExpires)
	}
	s.signed = strings.Split(q.Get("X-Amz-SignedHeaders"), ";")
	s.signature = q.Get("X-Amz-Signature")
	s.payload = unsigned
	if p := q.Get("X-Amz-Content-Sha256"); p != "" {
		s.payload = p
	}
	return s, nil
}

// streamingPayloads are the x-amz-content-sha256 values S3 defines for a
// body sent in signed or unsigned chunks. The face never reads a body
// (every write is refused first), so on a read they sign nothing it
// checks, as UNSIGNED-PAYLOAD does not.
var streamingPayloads = map[string]bool{
	"STREAMING-AWS4-HMAC-SHA256-PAYLOAD":               true,
	"STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER":       true,
	"STREAMING-UNSIGNED-PAYLOAD-TRAILER":               true,
	"STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD":         true,
	"STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD-TRAILER": true,
}

// checkPayload checks a request's payload hash — the x-amz-content-sha256
// header, or a presigned URL's parameter — as S3 does, whatever signs the
// request: "" (none sent, where the signature does not need one),
// UNSIGNED-PAYLOAD, a streaming value, or a SHA-256 in lowercase hex,
// which for a request without a body must be the empty body's. A
// presigned request's header is checked too, though its signature does
// not cover it.
func checkPayload(r *http.Request, p string) error {
	if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" && h != p {
		if err := checkPayload(r, h); err != nil {
			return err
		}
	}
	switch {
	case p == "", p == unsigned, streamingPayloads[p]:
		return nil
	case len(p) != 64 || strings.Trim(p, "0123456789abcdef") != "":
		return fail("InvalidArgument", http.StatusBadRequest, "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, a STREAMING- value or a SHA-256 in lowercase hex")
	case (r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0) && p != emptySHA256:
		return fail("XAmzContentSHA256Mismatch", http.StatusBadRequest, "The provided 'x-amz-content-sha256' header does not match what was computed.")
	}
	return nil
}

// canonicalRequest is SigV4's canonical request of r as S3 defines it.
func canonicalRequest(r *http.Request, s sig) string {
	var b strings.Builder
	b.WriteString(r.Method)
	b.WriteByte('\n')
	b.WriteString(uriEncode(r.URL.Path, false))
	b.WriteByte('\n')
	b.WriteString(canonicalQuery(r.URL.RawQuery, s.canonicalDrop))
	b.WriteByte('\n')
	for _, h := range s.signed {
		b.WriteString(h)
		b.WriteByte(':')
		if h == "host" {
			b.WriteString(r.Host)
		} else {
			vals := r.Header.Values(h)
			for i, v := range vals {
				vals[i] = strings.Join(strings.Fields(v), " ")
			}
			b.WriteString(strings.Join(vals, ","))
		}
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.WriteString(strings.Join(s.signed, ";"))
	b.WriteByte('\n')
	b.WriteString(s.payload)
	return b.String()
}

// canonicalQuery sorts the query's parameters by encoded name, then value,
// each encoded as SigV4 encodes them.
func canonicalQuery(raw, drop string) string {
	type kv struct{ k, v string }
	var ps []kv
	for _, part := range strings.Split(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		k, err1 := url.QueryUnescape(k)
		v, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil || k == drop {
			continue
		}
		ps = append(ps, kv{uriEncode(k, true), uriEncode(v, true)})
	}
	slices.SortFunc(ps, func(a, b kv) int {
		if c := strings.Compare(a.k, b.k); c != 0 {
			return c
		}
		return strings.Compare(a.v, b.v)
	})
	var b strings.Builder
	for i, p := range ps {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.k)
		b.WriteByte('=')
		b.WriteString(p.v)
	}
	return b.String()
}

// uriEncode encodes s as SigV4 does: unreserved characters (A–Z, a–z,
// 0–9, -, ., _, ~) as they are, every other byte %XX in upper case; '/'
// kept in a path, encoded in a query.
func uriEncode(s string, slash bool) string {
	const hexd = "0123456789ABCDEF"
	var b strings.Builder
	for i := range len(s) {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '.', c == '_', c == '~':
			b.WriteByte(c)
		case c == '/' && !slash:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hexd[c>>4])
			b.WriteByte(hexd[c&15])
		}
	}
	return b.String()
}
