// Package nodestate is what a node of a cluster tells its peers of
// itself, the answer to their probes (State), and what hears each answer
// a node learns (Watcher).
//
// It is the one type the cluster's rooms share: the transport
// (internal/cluster/transport) carries it and keeps each peer's last one;
// the membership (internal/cluster/membership) reads and writes the part
// about members and versions, the router (internal/cluster/route) the
// transform stage's load, and neither imports the transport for it, as
// etcd's membership knows nothing of rafthttp. It imports nothing of the
// module.
package nodestate

import (
	"slices"
	"time"
)

// State is what a node tells its peers of itself (GET transport.StatePath): the
// probe's answer. URL is the node's identity, which the prober checks
// against the URL it probed; Self its position in the membership it
// reports (-1 if it is not a member of it). Members is that membership's
// version and MemberList its members, which the peers count in their
// agreement and keep for requests that pin it.
type State struct {
	Self       int            `json:"self"`
	Ready      bool           `json:"ready"`
	Datasets   []DatasetState `json:"datasets"`
	URL        string         `json:"url,omitempty"`
	Members    string         `json:"members,omitempty"`
	MemberList []string       `json:"member_list,omitempty"`
	// Transforms are the node's pipelines, by name, and their
	// fingerprints: a node asks another for samples transformed by a
	// pipeline only if the other's fingerprint is its own. Load is how
	// busy its transform stage is (nil from a node that has none).
	Transforms map[string]string `json:"transforms,omitempty"`
	Load       *Load             `json:"transform_load,omitempty"`
	// Warming is the membership version the node is loading the chunks
	// it gains under: its peers do not read its chunks from it under
	// that version, nor report that version themselves, until it is
	// done (members.go). Leaving says the node was told to leave: its
	// peers list their members without it and load the chunks they gain
	// from it, which it serves until the cluster agrees without it.
	// Joining says the node has just started and has yet to learn
	// whether it joins a running cluster (and then warms up): its peers
	// wait for it before they report a version it is a member of.
	Warming string `json:"warming,omitempty"`
	// Warmed is the version the node has warmed up for and waits to
	// report until every other member of it has too (or reports it).
	Warmed  string `json:"warmed,omitempty"`
	Joining bool   `json:"joining,omitempty"`
	Leaving bool   `json:"leaving,omitempty"`
	// Agreed is the membership version the node reads chunks by now:
	// the one most live members report, as it counts them. A node
	// leaving serves until every live member's is one without it
	// (membership.Tracker.Leave). Empty from a build that does not say.
	Agreed string `json:"agreed,omitempty"`
	// Down names the nodes this node probes and does not see up: down,
	// or not answered ready to a probe yet (transport.Nodes.Down). A node just
	// started reports ready only once its peers no longer name it
	// (membership.Tracker.Settled).
	Down []string `json:"down,omitempty"`
	// StoreUnreachable says the node cannot reach its datasets' store
	// now (storepath.Watch): it serves the samples its cache holds and
	// refuses the others at once, which its peers then read themselves.
	StoreUnreachable bool `json:"store_unreachable,omitempty"`
}

// Holds reports whether the node whose state st is holds version id of
// dataset name; before its first probe (st nil), any: a request finds out
// (409) and is read elsewhere.
func (st *State) Holds(name, id string) bool {
	if st == nil {
		return true
	}
	for _, d := range st.Datasets {
		if d.Name == name {
			return slices.Contains(d.Held, id)
		}
	}
	return false
}

// DatasetState is the index versions a node holds of one dataset: the one
// it serves now, and the one its last reload replaced, which it still
// serves to clients that pinned it.
type DatasetState struct {
	Name    string   `json:"name"`
	Current string   `json:"current"`
	Held    []string `json:"held"`
}

// Load is how busy a node's transform stage is (tensorize.Stage.Load, as
// its state tells its peers): the samples submitted and not yet
// transformed, its workers, and the mean CPU of an image over every
// pipeline (0 before the first).
type Load struct {
	Queued   int64         `json:"queued"`
	Workers  int           `json:"workers"`
	PerImage time.Duration `json:"per_image_ns"`
}

// Wait is how long a sample submitted now waits for the ones before it:
// the queue's work spread over the workers.
func (l Load) Wait() time.Duration {
	if l.Workers < 1 {
		return 0
	}
	return time.Duration(l.Queued) * l.PerImage / time.Duration(l.Workers)
}

// Watcher hears what a node learns of the nodes it probes
// (transport.Nodes): after every probe they answer (st, and prev before
// it), and whenever one is taken for up or down (st and prev nil). It is
// called on the goroutine that learnt it, with no lock of the prober's
// held.
type Watcher interface {
	Changed(k int, prev, st *State)
}
