package gateway

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/cluster/route"
)

// maxUnansweredFor bounds the wait a client may say it spent on another
// node (api.HeaderUnansweredFor): longer than any probe's wait, and a
// word about the past further back than that says nothing of now.
const maxUnansweredFor = time.Minute

// maxUnansweredURL bounds the node a client names (api.HeaderUnanswered):
// a member's URL is a scheme, a host and a port.
const maxUnansweredURL = 2048

// unansweredContext returns r's context, told of the node r's client
// stopped waiting for before it sent r here (api.HeaderUnanswered,
// route.WithUnanswered): the chunks that node owns of the batch or
// sample r asks for are read elsewhere at once if it has not answered
// this node either since. Headers that do not parse are ignored
// (parseUnanswered): they only ever speed a read up.
func unansweredContext(r *http.Request) context.Context {
	u, waited, ok := parseUnanswered(r.Header)
	if !ok {
		return r.Context()
	}
	return route.WithUnanswered(r.Context(), u, waited)
}

// parseUnanswered returns the node a client names in h and how long it
// waited for it, ok only for one absolute http or https URL of at most
// maxUnansweredURL bytes and one wait of 1 to maxUnansweredFor
// milliseconds in decimal digits. A node that is not a member, or this
// node, is route's to ignore (Router.unansweredSlot). A header given
// twice is ignored: which value the client meant is not known.
func parseUnanswered(h http.Header) (node string, waited time.Duration, ok bool) {
	us, fors := h.Values(api.HeaderUnanswered), h.Values(api.HeaderUnansweredFor)
	if len(us) != 1 || len(fors) != 1 || len(us[0]) > maxUnansweredURL || len(fors[0]) > 8 {
		return "", 0, false
	}
	for _, c := range fors[0] {
		if c < '0' || c > '9' {
			return "", 0, false
		}
	}
	ms, err := strconv.ParseInt(fors[0], 10, 64)
	if err != nil || ms <= 0 || ms > maxUnansweredFor.Milliseconds() {
		return "", 0, false
	}
	p, err := url.Parse(us[0])
	if err != nil || p.Scheme != "http" && p.Scheme != "https" || p.Host == "" {
		return "", 0, false
	}
	return us[0], time.Duration(ms) * time.Millisecond, true
}
