// Package cluster is the parent of a cluster node's rooms
// (docs/architecture.md, "A cluster of gateways"); the layout of a cluster as
// pure functions (owners, homes, assignment) is the top-level package
// cluster:
//
//	membership  who the members are and what the nodes agree on: versions,
//	            changes between them, leaving, the versions kept
//	transport   how to reach each node and whether it is up: the internal
//	            protocol, one client per node, liveness, states
//	nodestate   what a node tells its peers of itself (the probe's answer),
//	            shared by the membership and the transport, below both
//	peercred    the credentials that prove an internal request is a peer's
//	peerreq     the peers' requests read as this node serves them: the
//	            parameter table, the catalog's versions, the layout's streams
//	route       which node a chunk's bytes are read from, with failover
//	handover    what a node loads when the membership gives it chunks
//	storepath   whether this node reaches the store, and its chunks read
//	            through a peer while it does not
package cluster
