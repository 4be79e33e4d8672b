package s3auth

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Signature Version 2 is verified too, for what clients still send by
// default: boto3's generate_presigned_url signs with it unless told
// signature_version="s3v4". Header auth (`Authorization: AWS ID:SIG`) and
// presigned URLs (AWSAccessKeyId, Expires, Signature) are both accepted.

// v2Subresources are the query parameters that are part of a V2 string
// to sign (the rest are not).
var v2Subresources = []string{"acl", "cors", "delete", "lifecycle", "location", "logging", "notification", "partNumber",
	"policy", "requestPayment", "response-cache-control", "response-content-disposition", "response-content-encoding",
	"response-content-language", "response-content-type", "response-expires", "restore", "tagging", "torrent",
	"uploadId", "uploads", "versionId", "versioning", "versions", "website"}

// verifyV2 checks a Signature Version 2 request.
func (v *Verifier) verifyV2(r *http.Request, auth string) (string, error) {
	q := r.URL.Query()
	presigned := auth == ""
	var id, signature, date string
	if presigned {
		id, signature = q.Get("AWSAccessKeyId"), q.Get("Signature")
		exp, err := strconv.ParseInt(q.Get("Expires"), 10, 64)
		if id == "" || signature == "" || err != nil {
			return "", malformed(true, "Query-string authentication requires the Signature, Expires and AWSAccessKeyId parameters")
		}
		if v.opts.Now().After(time.Unix(exp, 0)) {
			return "", accessDenied("Request has expired")
		}
		date = q.Get("Expires")
	} else {
		cred := strings.TrimPrefix(auth, "AWS ")
		i := strings.LastIndexByte(cred, ':')
		if i <= 0 {
			return "", malformed(false, "the authorization header is malformed: want AWS ACCESS_KEY_ID:SIGNATURE")
		}
		id, signature = cred[:i], cred[i+1:]
		when, err := http.ParseTime(r.Header.Get("Date"))
		if d := r.Header.Get("X-Amz-Date"); d != "" {
			if when, err = http.ParseTime(d); err != nil {
				when, err = time.Parse(amzDate, d)
			}
		} else {
			date = r.Header.Get("Date")
		}
		if err != nil {
			return "", accessDenied("AWS authentication requires a valid Date or x-amz-date header")
		}
		if d := v.opts.Now().Sub(when); d > v.opts.MaxSkew || d < -v.opts.MaxSkew {
			return "", fail("RequestTimeTooSkewed", http.StatusForbidden, "The difference between the request time and the server's time is too large.")
		}
	}
	secret, ok := v.creds.Secret(id)
	if !ok {
		return "", fail("InvalidAccessKeyId", http.StatusForbidden, "The AWS Access Key Id you provided does not exist in our records.")
	}
	got, err := base64.StdEncoding.DecodeString(signature)
	if err != nil {
		return "", fail("SignatureDoesNotMatch", http.StatusForbidden, "The request signature we calculated does not match the signature you provided.")
	}
	// The resource is the path as the client sent it; a client that
	// encoded it otherwise than Go would is matched by its raw form.
	for _, path := range []string{r.URL.EscapedPath(), uriEncode(r.URL.Path, false)} {
		mac := hmac.New(sha1.New, []byte(secret))
		mac.Write([]byte(stringToSignV2(r, date, path, q)))
		if hmac.Equal(mac.Sum(nil), got) {
			return id, nil
		}
	}
	return "", fail("SignatureDoesNotMatch", http.StatusForbidden,
		"The request signature we calculated does not match the signature you provided. Check your key and signing method.")
}

func stringToSignV2(r *http.Request, date, path string, q url.Values) string {
	var b strings.Builder
	b.WriteString(r.Method + "\n" + r.Header.Get("Content-MD5") + "\n" + r.Header.Get("Content-Type") + "\n" + date + "\n")
	var amz []string
	for k := range r.Header {
		if lk := strings.ToLower(k); strings.HasPrefix(lk, "x-amz-") {
			amz = append(amz, lk)
		}
	}
	slices.Sort(amz)
	for _, k := range amz {
		b.WriteString(k + ":" + strings.Join(r.Header.Values(k), ",") + "\n")
	}
	b.WriteString(path)
	sep := "?"
	for _, k := range v2Subresources {
		if !q.Has(k) {
			continue
		}
		b.WriteString(sep + k)
		if v := q.Get(k); v != "" {
			b.WriteString("=" + v)
		}
		sep = "&"
	}
	return b.String()
}
