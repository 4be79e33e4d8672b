package s3auth

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7/pkg/signer"

	"github.com/brandgw/brand/internal/server/scope"
)

const (
	exampleID     = "AKIAIOSFODNN7EXAMPLE"
	exampleSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
)

func exampleVerifier(t *testing.T, now time.Time) *Verifier {
	t.Helper()
	c, err := ParseCredentials(strings.NewReader(exampleID + " " + exampleSecret + "\nother-key other-secret-1\n"))
	if err != nil {
		t.Fatal(err)
	}
	return NewVerifier(c, Options{Now: func() time.Time { return now }})
}

var exampleTime = time.Date(2013, 5, 24, 0, 0, 0, 0, time.UTC)

// TestAWSExamples: the signatures AWS publishes for S3 verify.
func TestAWSExamples(t *testing.T) {
	v := exampleVerifier(t, exampleTime)
	r := httptest.NewRequest("GET", "http://examplebucket.s3.amazonaws.com/test.txt", nil)
	r.Header.Set("Range", "bytes=0-9")
	r.Header.Set("X-Amz-Content-Sha256", emptySHA256)
	r.Header.Set("X-Amz-Date", "20130524T000000Z")
	r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
	if id, err := v.Verify(r); err != nil || id != exampleID {
		t.Fatalf("header example: %q %v", id, err)
	}
	p := httptest.NewRequest("GET", "http://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404", nil)
	if id, err := v.Verify(p); err != nil || id != exampleID {
		t.Fatalf("presigned example: %q %v", id, err)
	}
	// A day later the presigned URL has expired.
	late := exampleVerifier(t, exampleTime.Add(24*time.Hour+time.Second))
	if code := codeOf(late.Verify(p)); code != "AccessDenied" {
		t.Fatalf("expired presign: %s", code)
	}
}

func codeOf(_ string, err error) string {
	code, _, _, ok := Describe(err)
	if !ok {
		if err == nil {
			return "OK"
		}
		return "not an S3 error: " + err.Error()
	}
	return code
}

// TestSignedByMinioGo: requests minio-go signs (V4 header, V4 presigned,
// V2 header, V2 presigned) verify once they have crossed a real server,
// for keys and queries that need encoding.
func TestSignedByMinioGo(t *testing.T) {
	var got []string
	v := exampleVerifier(t, time.Now())
	v.opts.Now = time.Now
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, codeOf(v.Verify(r)))
	}))
	defer srv.Close()
	keys := []string{"plain.jpg", "with space/a b.jpg", "plus+sign.txt", "uni/ünï/日本.jpg", "pct%25/x", "eq=x~y!(z)*'.tar", "a/b/c/d.cls"}
	queries := []string{"", "list-type=2&prefix=a%2Fb&delimiter=%2F&continuation-token=YWJj%3D%3D&encoding-type=url", "location"}
	for _, k := range keys {
		for _, q := range queries {
			u := srv.URL + "/bucket/" + (&url.URL{Path: k}).EscapedPath()
			if q != "" {
				u += "?" + q
			}
			req, err := http.NewRequest("GET", u, nil)
			if err != nil {
				t.Fatal(err)
			}
			hashed := req.Clone(req.Context())
			hashed.Header.Set("X-Amz-Content-Sha256", emptySHA256)
			for name, signed := range map[string]*http.Request{
				"v4":           signer.SignV4(*hashed, exampleID, exampleSecret, "", "us-east-1"),
				"v4-presigned": signer.PreSignV4(*req.Clone(req.Context()), exampleID, exampleSecret, "", "us-east-1", 60),
				"v2":           signer.SignV2(*req.Clone(req.Context()), exampleID, exampleSecret, false),
				"v2-presigned": signer.PreSignV2(*req.Clone(req.Context()), exampleID, exampleSecret, 60, false),
			} {
				got = got[:0]
				resp, err := http.DefaultClient.Do(signed)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if len(got) != 1 || got[0] != "OK" {
					t.Errorf("%s %s ?%s: %v", name, k, q, got)
				}
			}
		}
	}
}

// TestRefused: each way a request is refused, with S3's code and status.
func TestRefused(t *testing.T) {
	v := exampleVerifier(t, time.Now())
	sign := func(id, secret string, mut func(*http.Request)) *http.Request {
		r := httptest.NewRequest("GET", "http://127.0.0.1:9000/bucket/key.jpg?list-type=2", nil)
		r.Header.Set("X-Amz-Content-Sha256", emptySHA256)
		s := signer.SignV4(*r, id, secret, "", "us-east-1")
		if mut != nil {
			mut(s)
		}
		return s
	}
	presign := func(expires int64, at time.Time) *http.Request {
		r := httptest.NewRequest("GET", "http://127.0.0.1:9000/bucket/key.jpg", nil)
		s := signer.PreSignV4(*r, exampleID, exampleSecret, "", "us-east-1", expires)
		q := s.URL.Query()
		q.Set("X-Amz-Date", at.UTC().Format(amzDate))
		q.Set("X-Amz-Credential", exampleID+"/"+at.UTC().Format("20060102")+"/us-east-1/s3/aws4_request")
		s.URL.RawQuery = q.Encode()
		return s
	}
	old := time.Now().Add(-time.Hour)
	tests := []struct {
		name   string
		r      *http.Request
		code   string
		status int
	}{
		{"wrong secret", sign(exampleID, "not-the-secret", nil), "SignatureDoesNotMatch", 403},
		{"unknown key", sign("NOSUCHKEY", exampleSecret, nil), "InvalidAccessKeyId", 403},
		{"tampered path", sign(exampleID, exampleSecret, func(r *http.Request) { r.URL.Path = "/bucket/other.jpg" }), "SignatureDoesNotMatch", 403},
		{"tampered query", sign(exampleID, exampleSecret, func(r *http.Request) { r.URL.RawQuery = "list-type=1" }), "SignatureDoesNotMatch", 403},
		{"tampered header", sign(exampleID, exampleSecret, func(r *http.Request) { r.Header.Set("X-Amz-Date", time.Now().Add(time.Second).UTC().Format(amzDate)) }), "SignatureDoesNotMatch", 403},
		{"content hash", sign(exampleID, exampleSecret, func(r *http.Request) { r.Header.Set("X-Amz-Content-Sha256", strings.Repeat("0", 64)) }), "XAmzContentSHA256Mismatch", 400},
		{"no content hash", sign(exampleID, exampleSecret, func(r *http.Request) { r.Header.Del("X-Amz-Content-Sha256") }), "InvalidRequest", 400},
		{"streaming garbage", sign(exampleID, exampleSecret, func(r *http.Request) { r.Header.Set("X-Amz-Content-Sha256", "STREAMING-X") }), "InvalidArgument", 400},
		{"anonymous", httptest.NewRequest("GET", "/bucket/key.jpg", nil), "AccessDenied", 403},
		{"expired presign", presign(60, old), "AccessDenied", 403},
		{"presign too long", presign(8*24*3600, time.Now()), "AuthorizationQueryParametersError", 400},
		{"malformed", sign(exampleID, exampleSecret, func(r *http.Request) { r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=x") }), "AuthorizationHeaderMalformed", 400},
		{"bad scope", sign(exampleID, exampleSecret, func(r *http.Request) {
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "/s3/", "/ec2/", 1))
		}), "AuthorizationHeaderMalformed", 400},
		{"other algorithm", sign(exampleID, exampleSecret, func(r *http.Request) { r.Header.Set("Authorization", "Bearer x") }), "AuthorizationHeaderMalformed", 400},
		{"v2 wrong", sign(exampleID, exampleSecret, func(r *http.Request) {
			r.Header.Set("Authorization", "AWS "+exampleID+":AAAA")
			r.Header.Del("X-Amz-Date")
			r.Header.Set("Date", time.Now().UTC().Format(http.TimeFormat))
		}), "SignatureDoesNotMatch", 403},
	}
	for _, tc := range tests {
		_, err := v.Verify(tc.r)
		code, status, msg, ok := Describe(err)
		if !ok || code != tc.code || status != tc.status {
			t.Errorf("%s: %s %d %q (%v), want %s %d", tc.name, code, status, msg, err, tc.code, tc.status)
		}
	}
	// A clock 20 minutes ahead of the client's.
	ahead := exampleVerifier(t, time.Now().Add(20*time.Minute))
	if _, err := ahead.Verify(sign(exampleID, exampleSecret, nil)); codeOf("", err) != "RequestTimeTooSkewed" {
		t.Errorf("skewed: %v", err)
	}
	// A required region refuses another.
	c, _ := ParseCredentials(strings.NewReader(exampleID + " " + exampleSecret))
	eu := NewVerifier(c, Options{Region: "eu-west-1"})
	if _, err := eu.Verify(sign(exampleID, exampleSecret, nil)); codeOf("", err) != "AuthorizationHeaderMalformed" || !strings.Contains(err.Error(), "eu-west-1") {
		t.Errorf("region mismatch: %v", err)
	}
}

func TestParseCredentials(t *testing.T) {
	const secret = "s3cr3t-never-shown"
	tests := []struct{ in, want string }{
		{"# keys\n\nid1 " + secret + "\nid2   " + secret + "x\n", ""},
		{"", "no key pairs"},
		{"id1\n", "line 1"},
		{"id1 " + secret + " extra\n", "line 1"},
		{"id1 short\n", "line 1"},
		{"i " + secret + "\n", "line 1"},
		{"id1 " + secret + "\n#\nid1 " + secret + "\n", "line 3"},
		{"id1 " + secret + " datasets=web-*,code name=trainers\nid2 " + secret + "\n", ""},
		{"id1 " + secret + " rights=edit\n", `line 1: unknown field "rights"`},
		{"id1 " + secret + " jobs=a\n", `line 1: unknown field "jobs"`},
		{"id1 " + secret + " datasets=w*b\n", "line 1: datasets="},
	}
	for _, tc := range tests {
		c, err := ParseCredentials(strings.NewReader(tc.in))
		switch {
		case tc.want == "" && (err != nil || c.Len() != 2):
			t.Errorf("%q: %v", tc.in, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrCredentials)):
			t.Errorf("%q: %v, want %q", tc.in, err, tc.want)
		case err != nil && strings.Contains(err.Error(), secret):
			t.Errorf("%q: the error shows the secret: %v", tc.in, err)
		}
	}
	c, _ := ParseCredentials(strings.NewReader("id1 " + secret))
	if s, ok := c.Secret("id1"); !ok || s != secret || strings.Contains(c.String(), secret) {
		t.Error("Secret or String")
	}
	// A key reads every bucket, or those datasets= names; nothing else.
	c, _ = ParseCredentials(strings.NewReader("id1 " + secret + "\nid2 " + secret + " datasets=web-* name=trainers\n"))
	if g := c.Grant("id1"); g.Name != "key id1" || g.Allow(scope.Read, []string{"books"}, "") != nil || g.Allow(scope.Edit, nil, "") == nil {
		t.Errorf("a bare key: %+v", g)
	}
	if g := c.Grant("id2"); g.Name != "trainers" || !g.Dataset("web-en") || g.Dataset("books") || g.Allow(scope.Read, []string{"web-en"}, "") != nil {
		t.Errorf("a scoped key: %+v", g)
	}
}

func FuzzVerify(f *testing.F) {
	f.Add("AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host,Signature=00", "X-Amz-Date=20130524T000000Z")
	f.Add("AWS a:b", "AWSAccessKeyId=a&Expires=1&Signature=x")
	f.Add("", "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=a/b/c/s3/aws4_request&X-Amz-Date=x&X-Amz-Expires=9&X-Amz-SignedHeaders=host&X-Amz-Signature=0")
	f.Fuzz(func(t *testing.T, auth, query string) {
		c, _ := ParseCredentials(strings.NewReader(exampleID + " " + exampleSecret))
		v := NewVerifier(c, Options{Now: func() time.Time { return exampleTime }})
		r := httptest.NewRequest("GET", "/b/k", bytes.NewReader(nil))
		r.URL.RawQuery = query
		r.Header.Set("Authorization", auth)
		r.Header.Set("X-Amz-Date", "20130524T000000Z")
		_, _ = v.Verify(r)
	})
}
