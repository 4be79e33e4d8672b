package s3auth

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7/pkg/signer"
)

// TestContentSHA256: a request's x-amz-content-sha256 is what S3 takes —
// UNSIGNED-PAYLOAD, a STREAMING- value S3 defines, the SHA-256 of the
// empty body, a SHA-256 in hex (which must then match the empty body of a
// GET) — however the request is signed, in the header or a presigned
// URL's query; anything else is InvalidArgument.
func TestContentSHA256(t *testing.T) {
	v := exampleVerifier(t, time.Now())
	v.opts.Now = time.Now
	newReq := func(payload, query string) *http.Request {
		r := httptest.NewRequest("GET", "http://127.0.0.1:9000/bucket/key.jpg"+query, nil)
		if payload != "" {
			r.Header.Set("X-Amz-Content-Sha256", payload)
		}
		return r
	}
	v4 := func(p string) *http.Request {
		return signer.SignV4(*newReq(p, ""), exampleID, exampleSecret, "", "us-east-1")
	}
	v2 := func(p string) *http.Request { return signer.SignV2(*newReq(p, ""), exampleID, exampleSecret, false) }
	presignedHeader := func(p string) *http.Request {
		s := signer.PreSignV4(*newReq("", ""), exampleID, exampleSecret, "", "us-east-1", 60)
		s.Header.Set("X-Amz-Content-Sha256", p)
		return s
	}
	presignedQuery := func(p string) *http.Request {
		return signer.PreSignV4(*newReq("", "?X-Amz-Content-Sha256="+p), exampleID, exampleSecret, "", "us-east-1", 60)
	}
	garbage := "garbage\x7f!"
	tests := []struct {
		name string
		r    *http.Request
		code string
	}{
		{"v4 unsigned", v4("UNSIGNED-PAYLOAD"), "OK"},
		{"v4 empty hash", v4(emptySHA256), "OK"},
		{"v4 streaming", v4("STREAMING-AWS4-HMAC-SHA256-PAYLOAD"), "OK"},
		{"v4 streaming trailer", v4("STREAMING-UNSIGNED-PAYLOAD-TRAILER"), "OK"},
		{"v4 another hash", v4(strings.Repeat("ab", 32)), "XAmzContentSHA256Mismatch"},
		{"v4 garbage", v4(garbage), "InvalidArgument"},
		{"v4 64 non-hex", v4(strings.Repeat("z", 64)), "InvalidArgument"},
		{"v4 streaming garbage", v4("STREAMING-GARBAGE"), "InvalidArgument"},
		{"v2 garbage", v2(garbage), "InvalidArgument"},
		{"v2 unsigned", v2("UNSIGNED-PAYLOAD"), "OK"},
		{"v2 none", v2(""), "OK"},
		{"presigned header garbage", presignedHeader(garbage), "InvalidArgument"},
		{"presigned header empty hash", presignedHeader(emptySHA256), "OK"},
		{"presigned query garbage", presignedQuery("garbage"), "InvalidArgument"},
		{"presigned query unsigned", presignedQuery("UNSIGNED-PAYLOAD"), "OK"},
	}
	for _, tc := range tests {
		if got := codeOf(v.Verify(tc.r)); got != tc.code {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.code)
		}
	}
}
