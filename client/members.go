package client

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/brandgw/brand/api"
)

// memberPin is the membership version the client reads an epoch under.
type memberPin struct {
	epoch   int
	version string
}

// Members returns the cluster membership version this client pinned for
// the latest epoch it has read (the Brand-Members header of that epoch's
// first answer); "" before, and always on a single gateway.
//
// On a cluster, which rank of a global batch receives which of its
// samples depends on the membership version it is laid out under (never
// which samples the batch holds). Every request of an epoch names the
// version its first answer named (members=), so that a node joining or
// leaving mid-epoch does not change the assignment under a job whose
// other ranks read the old one; each epoch pins afresh, so the job
// follows the cluster from one epoch to the next. Options.Job.Members, if
// set, is sent instead. A version no node knows any more (the gateways
// keep each in the datasets' stores, so only if they cannot write there
// and have all restarted since) is ErrMembersUnknown: the epoch is never
// moved to another version by one rank alone. docs/http-api.md,
// "Membership versions".
func (c *Client) Members() string {
	if p := c.t.members.Load(); p != nil {
		return p.version
	}
	return ""
}

// pinMembers adds to q the version pinned for epoch, unless q names one
// already (Options.Job.Members).
func (t *transport) pinMembers(q url.Values, epoch int) {
	if q.Get(api.ParamMembers) != "" {
		return
	}
	if p := t.members.Load(); p != nil && p.epoch == epoch {
		q.Set(api.ParamMembers, p.version)
	}
}

// learnMembers pins version for epoch if it is the first answer of an
// epoch later than the one pinned: an answer to an older epoch's request
// does not move the pin back.
func (t *transport) learnMembers(epoch int, version string) {
	if version == "" || t.opts.Job.Members != "" {
		return
	}
	for {
		p := t.members.Load()
		if p != nil && p.epoch >= epoch {
			return
		}
		if t.members.CompareAndSwap(p, &memberPin{epoch: epoch, version: version}) {
			if d := t.discoveredMembers.Load(); d != nil && *d != version {
				t.rediscover.Store(true) // nodes joined or left: see routes
			}
			return
		}
	}
}

// epochOf returns the epoch a request path is about: /epoch/N and what
// is under it.
func epochOf(path string) (int, bool) {
	rest, ok := strings.CutPrefix(path, "/epoch/")
	if !ok {
		return 0, false
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		rest = rest[:i]
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil && n >= 0
}
