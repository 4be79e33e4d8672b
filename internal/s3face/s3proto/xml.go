package s3proto

import (
	"bytes"
	"encoding/xml"
	"net/http"
	"strconv"
	"time"
)

// namespace is the XML namespace of S3's responses.
const namespace = "http://s3.amazonaws.com/doc/2006-03-01/"

// WriteXML writes v as an S3 XML response with status.
func WriteXML(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	b.WriteString(xml.Header)
	if err := xml.NewEncoder(&b).Encode(v); err != nil {
		// Every value written is one of this package's types.
		panic("s3proto: encoding " + err.Error())
	}
	h := w.Header()
	h.Set("Content-Type", "application/xml")
	h.Set("Content-Length", strconv.Itoa(b.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// s3Time is a time as S3 writes it in XML: UTC, milliseconds.
type s3Time time.Time

func (t s3Time) MarshalText() ([]byte, error) {
	return []byte(time.Time(t).UTC().Format("2006-01-02T15:04:05.000Z")), nil
}

// LocationConstraint answers GetBucketLocation: empty, which S3 means as
// us-east-1.
type LocationConstraint struct {
	XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ LocationConstraint"`
}

// Owner is a bucket's owner in a ListBuckets answer.
type Owner struct {
	ID          string
	DisplayName string
}

// Bucket is one bucket of a ListBuckets answer.
type Bucket struct {
	Name         string
	CreationDate time.Time
}

// ListAllMyBucketsResult answers ListBuckets.
type ListAllMyBucketsResult struct {
	Owner   Owner
	Buckets []Bucket
}

func (r ListAllMyBucketsResult) MarshalXML(e *xml.Encoder, _ xml.StartElement) error {
	type bucket struct {
		Name         string
		CreationDate s3Time
	}
	v := struct {
		XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListAllMyBucketsResult"`
		Owner   Owner
		Buckets []bucket `xml:"Buckets>Bucket"`
	}{Owner: r.Owner}
	for _, b := range r.Buckets {
		v.Buckets = append(v.Buckets, bucket{b.Name, s3Time(b.CreationDate)})
	}
	return e.Encode(v)
}
