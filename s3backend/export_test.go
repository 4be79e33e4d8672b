package s3backend

import "net/http"

// DefaultTransport exposes the default transport to the black-box tests,
// which count its dials.
func DefaultTransport(parallel int) *http.Transport { return newTransport(parallel) }
