// Package clustertest_test holds the tests of several gateways as one
// cluster in one process: each node a gateway.Gateway behind its own
// loopback server, the nodes probing, asking and answering each other
// over HTTP as a deployment's do, started by
// gateway/gatewaytest.StartCluster. An epoch read over
// four nodes, a node on another index version, joiners warming up, an
// edit with a member paused, a seal across nodes, a cut healed, the
// bill of /plan against the nodes' reads.
//
// They live apart from the gateway's own tests because the gateway
// package keeps its HTTP contract — statuses, headers, the table of
// features over every endpoint, scopes, bodies, the model-based test —
// and what a cluster's nodes do together is not a contract of one
// handler; the rooms they exercise (internal/cluster/...) test their
// rules on fakes in their own packages. Real multi-process clusters are
// the integration package's.
package clustertest_test
