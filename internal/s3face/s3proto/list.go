package s3proto

import (
	"encoding/base64"
	"encoding/xml"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Names is a bucket's object names sorted ascending by bytes, as S3 lists
// them. A listing reads only the names it returns and O(log n) others, so
// a bucket may hold millions.
type Names interface {
	Len() int
	Name(i int) string
}

// MaxKeys is the most keys one listing page returns, and the default.
const MaxKeys = 1000

// ListParams are a ListObjects (V1) or ListObjectsV2 request's
// parameters.
type ListParams struct {
	Prefix, Delimiter string
	StartAfter        string // V2
	ContinuationToken string // V2, as the client sent it
	Marker            string // V1
	EncodingType      string // "" or "url"
	MaxKeys           int
	V1                bool
}

// ParseListParams reads a listing's query parameters.
func ParseListParams(q url.Values, v1 bool) (ListParams, error) {
	p := ListParams{Prefix: q.Get("prefix"), Delimiter: q.Get("delimiter"), StartAfter: q.Get("start-after"),
		ContinuationToken: q.Get("continuation-token"), Marker: q.Get("marker"), EncodingType: q.Get("encoding-type"),
		MaxKeys: MaxKeys, V1: v1}
	if p.EncodingType != "" && p.EncodingType != "url" {
		return p, ErrorOf(InvalidArgument, "Invalid Encoding Method specified in Request")
	}
	if s := q.Get("max-keys"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return p, ErrorOf(InvalidArgument, "Provided max-keys not an integer or within integer range")
		}
		p.MaxKeys = min(n, MaxKeys)
	}
	if !v1 && p.ContinuationToken != "" {
		if _, err := decodeToken(p.ContinuationToken); err != nil {
			return p, err
		}
	}
	return p, nil
}

// ListPage is one page of a listing.
type ListPage struct {
	Contents       []int // indices into the Names listed
	CommonPrefixes []string
	IsTruncated    bool
	// NextContinuationToken (V2) and NextMarker (V1, given only with a
	// delimiter, as S3 does) resume after the page.
	NextContinuationToken, NextMarker string
}

// KeyCount is the number of keys and common prefixes on the page.
func (p ListPage) KeyCount() int { return len(p.Contents) + len(p.CommonPrefixes) }

// tokenPrefix marks Brand's continuation tokens; a token is it and the
// last key or common prefix returned, base64url-encoded.
const tokenPrefix = "brand1:"

func encodeToken(last string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(tokenPrefix + last))
}

func decodeToken(tok string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || !strings.HasPrefix(string(b), tokenPrefix) {
		return "", ErrorOf(InvalidArgument, "The continuation token provided is incorrect")
	}
	return string(b[len(tokenPrefix):]), nil
}

// List is one page of names as S3 lists them: names with the prefix,
// after StartAfter, the marker or the continuation token; with a
// delimiter, the names whose rest after the prefix holds it rolled up
// into one common prefix (through the delimiter's first occurrence) that
// counts once toward MaxKeys. A common prefix at or before the point the
// page resumes from was returned already and is not returned again.
func List(names Names, p ListParams) (ListPage, error) {
	var page ListPage
	if p.MaxKeys == 0 {
		return page, nil
	}
	after := p.StartAfter
	if p.V1 {
		after = p.Marker
	} else if p.ContinuationToken != "" {
		t, err := decodeToken(p.ContinuationToken)
		if err != nil {
			return page, err
		}
		after = max(after, t)
	}
	n := names.Len()
	i := sort.Search(n, func(k int) bool { return names.Name(k) >= p.Prefix })
	if after != "" {
		i = max(i, sort.Search(n, func(k int) bool { return names.Name(k) > after }))
	}
	last := ""
	for i < n {
		name := names.Name(i)
		if !strings.HasPrefix(name, p.Prefix) {
			break
		}
		if p.Delimiter != "" {
			if j := strings.Index(name[len(p.Prefix):], p.Delimiter); j >= 0 {
				cp := name[:len(p.Prefix)+j+len(p.Delimiter)]
				from := i
				i = from + sort.Search(n-from, func(k int) bool { return !strings.HasPrefix(names.Name(from+k), cp) })
				if after != "" && cp <= after {
					continue
				}
				if page.KeyCount() == p.MaxKeys {
					page.IsTruncated = true
					break
				}
				page.CommonPrefixes = append(page.CommonPrefixes, cp)
				last = cp
				continue
			}
		}
		if page.KeyCount() == p.MaxKeys {
			page.IsTruncated = true
			break
		}
		page.Contents = append(page.Contents, i)
		last = name
		i++
	}
	if page.IsTruncated {
		page.NextContinuationToken = encodeToken(last)
		if p.Delimiter != "" {
			page.NextMarker = last
		}
	}
	return page, nil
}

// Object is one key of a listing.
type Object struct {
	Key          string
	Size         int64
	LastModified time.Time
	ETag         string // quoted, as S3 writes it
}

// ListBucketResult answers ListObjects and ListObjectsV2.
type ListBucketResult struct {
	Bucket   string
	Params   ListParams
	Page     ListPage
	Contents []Object // the page's objects, filled in by the caller
}

// NewListBucketResult is the answer to a listing of bucket; the caller
// fills in Contents for page.Contents.
func NewListBucketResult(bucket string, p ListParams, page ListPage) *ListBucketResult {
	return &ListBucketResult{Bucket: bucket, Params: p, Page: page}
}

type xmlObject struct {
	Key          string
	LastModified s3Time
	ETag         string
	Size         int64
	StorageClass string
}

type xmlPrefix struct {
	Prefix string
}

// Encode is the value to write (WriteXML): the V1 or V2 form, with
// encoding-type=url applied to the names.
func (r *ListBucketResult) Encode() any {
	p := r.Params
	enc := func(s string) string { return s }
	if p.EncodingType == "url" {
		enc = urlEncode
	}
	objs := make([]xmlObject, len(r.Contents))
	for i, o := range r.Contents {
		objs[i] = xmlObject{Key: enc(o.Key), LastModified: s3Time(o.LastModified), ETag: o.ETag, Size: o.Size, StorageClass: "STANDARD"}
	}
	cps := make([]xmlPrefix, len(r.Page.CommonPrefixes))
	for i, cp := range r.Page.CommonPrefixes {
		cps[i] = xmlPrefix{enc(cp)}
	}
	if p.V1 {
		return struct {
			XMLName        xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListBucketResult"`
			Name           string
			Prefix         string
			Marker         string
			NextMarker     string `xml:",omitempty"`
			MaxKeys        int
			Delimiter      string `xml:",omitempty"`
			IsTruncated    bool
			EncodingType   string `xml:",omitempty"`
			Contents       []xmlObject
			CommonPrefixes []xmlPrefix
		}{Name: r.Bucket, Prefix: enc(p.Prefix), Marker: enc(p.Marker), NextMarker: enc(r.Page.NextMarker), MaxKeys: p.MaxKeys,
			Delimiter: enc(p.Delimiter), IsTruncated: r.Page.IsTruncated, EncodingType: p.EncodingType, Contents: objs, CommonPrefixes: cps}
	}
	next := ""
	if r.Page.IsTruncated {
		next = r.Page.NextContinuationToken
	}
	return struct {
		XMLName               xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListBucketResult"`
		Name                  string
		Prefix                string
		Delimiter             string `xml:",omitempty"`
		MaxKeys               int
		KeyCount              int
		IsTruncated           bool
		ContinuationToken     string `xml:",omitempty"`
		NextContinuationToken string `xml:",omitempty"`
		StartAfter            string `xml:",omitempty"`
		EncodingType          string `xml:",omitempty"`
		Contents              []xmlObject
		CommonPrefixes        []xmlPrefix
	}{Name: r.Bucket, Prefix: enc(p.Prefix), Delimiter: enc(p.Delimiter), MaxKeys: p.MaxKeys, KeyCount: r.Page.KeyCount(),
		IsTruncated: r.Page.IsTruncated, ContinuationToken: p.ContinuationToken, NextContinuationToken: next,
		StartAfter: enc(p.StartAfter), EncodingType: p.EncodingType, Contents: objs, CommonPrefixes: cps}
}

// urlEncode encodes a name for encoding-type=url as S3 does, so that the
// clients' decoding (botocore's unquote_plus, minio-go's QueryUnescape)
// gives the name back: '+' and every byte outside the unreserved set are
// percent-encoded, a space as '+', '/' kept.
func urlEncode(s string) string {
	return strings.ReplaceAll(url.QueryEscape(s), "%2F", "/")
}
