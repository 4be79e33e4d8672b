package gateway

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/cluster/route"
)

// maxUnansweredFor bounds the wait a client may say it spent on another
// node (api.HeaderUnansweredFor): longer than any probe's wait, and a
// word about the past further back than that says nothing of now.
const maxUnansweredFor = time.Minute

// unansweredContext returns r's context, told of the node r's client
// stopped waiting for before it sent r here (api.HeaderUnanswered,
// route.WithUnanswered): the batch's chunks that node owns are read
// elsewhere at once if it has not answered this node either since. A
// header that does not parse is ignored: it only ever speeds a read up.
func unansweredContext(r *http.Request) context.Context {
	ctx := r.Context()
	u := r.Header.Get(api.HeaderUnanswered)
	if u == "" {
		return ctx
	}
	ms, err := strconv.ParseInt(r.Header.Get(api.HeaderUnansweredFor), 10, 64)
	if err != nil || ms <= 0 || ms > maxUnansweredFor.Milliseconds() {
		return ctx
	}
	return route.WithUnanswered(ctx, u, time.Duration(ms)*time.Millisecond)
}
