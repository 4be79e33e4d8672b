package transport

import (
	"context"

	"github.com/brandgw/brand/cluster"
)

// Asks are the questions this node puts to another beside a batch's
// samples (Nodes.Fetch): by slot, to a member it probes — its importance
// feedback, a membership version's members, the latest step of a job it
// served — and by URL, to a membership change's old or new owner of a
// chunk, whether or not it is probed yet — which chunks it needs or
// holds, a chunk's bytes. Each is one Client call and says nothing of
// the node's liveness (Nodes does): a part that both watches the nodes
// and asks them holds the two.
type Asks struct{ n *Nodes }

// Asks returns the questions this node puts to the others.
func (n *Nodes) Asks() Asks { return Asks{n} }

// Feedback collects node k's part of an epoch's importance feedback for
// a job, for a seal (Client.Feedback).
func (a Asks) Feedback(ctx context.Context, k int, ds Dataset, job string, epoch uint64, seal string) ([]byte, error) {
	return a.n.at(k).client.Feedback(ctx, ds, job, epoch, seal)
}

// Settle tells node k how a seal that collected its part of an epoch's
// feedback ended (Client.Settle).
func (a Asks) Settle(ctx context.Context, k int, ds Dataset, job string, epoch uint64, seal, version string) error {
	return a.n.at(k).client.Settle(ctx, ds, job, epoch, seal, version)
}

// AskMembers asks node k for a membership version's member list
// (Client.Members).
func (a Asks) AskMembers(ctx context.Context, k int, version string) (*cluster.Membership, error) {
	return a.n.at(k).client.Members(ctx, version)
}

// Steps asks node k what it has served of a job, before an edit
// (Client.Steps).
func (a Asks) Steps(ctx context.Context, k int, q StepsQuestion) (StepsReply, error) {
	return a.n.at(k).client.Steps(ctx, q)
}

// FetchChunk fills buf with chunk c of ds from the cache of the node at
// url (Client.Chunk), in a membership change.
func (a Asks) FetchChunk(ctx context.Context, url string, ds Dataset, c int, buf []byte) error {
	return a.n.t.to(url).Chunk(ctx, ds, c, buf)
}

// Needed asks the node at url which of chunks its followed streams need
// soon (Client.Needed).
func (a Asks) Needed(ctx context.Context, url string, ds Dataset, chunks []int, ahead int) ([]int, error) {
	return a.n.t.to(url).Needed(ctx, ds, chunks, ahead)
}

// Held asks the node at url which of chunks its cache holds
// (Client.Held).
func (a Asks) Held(ctx context.Context, url string, ds Dataset, chunks []int) ([]int, error) {
	return a.n.t.to(url).Held(ctx, ds, chunks)
}

// Keep tells the node at url which of its chunks this node will ask it
// for (Client.Keep).
func (a Asks) Keep(ctx context.Context, url string, ds Dataset, chunks []int) error {
	return a.n.t.to(url).Keep(ctx, ds, chunks)
}

// Give tells the node at url which of its chunks this node's cache holds
// (Client.Give), and returns those it takes.
func (a Asks) Give(ctx context.Context, url string, ds Dataset, chunks []int) ([]int, error) {
	return a.n.t.to(url).Give(ctx, ds, chunks)
}
