// Package membership is who a cluster's members are and what the nodes
// agree on — etcd's membership beside its transport
// (internal/cluster/transport), which it does not import: where the member
// list comes from (a static list, a file, DNS: sources.go), the membership
// versions a node lists, reports and agrees on with its peers, a change
// from one version to another, leaving, the versions a node keeps for the
// jobs that pin them, and which index version of each dataset the cluster
// serves.
//
// # Why
//
// A batch's layout is a function of a membership version, which a job
// pins for an epoch, and which node reads a chunk follows the version the
// cluster agrees on now. Nodes read their source a poll apart, so each
// node tells its peers the version it uses (nodestate.State) and they agree on
// the one most live nodes report, each counted once warm for it (a node
// joining reports the new version at once, and counts only once its
// warm-up has ended); a node that gains chunks in a change
// loads the ones the jobs need soon (Config.Warm, internal/cluster/handover)
// before it reports the new version, so that the cluster flips once the
// new owners hold them.
//
// # Concurrency
//
// A Tracker is safe for concurrent use. It runs the poll of its source and
// each change's warm-up on goroutines Close waits for; it learns of the
// other nodes through its Peers (transport.Nodes, wired by the gateway),
// which call Changed (a nodestate.Watcher) after each probe and each
// change of a node's liveness, with no lock of their own held. What a
// node says of itself is a nodestate.State, the one type the membership
// and the transport share, in a package below both. It tells
// the router the agreed membership (Config.Follower) under its own lock:
// Follow must not block.
package membership
