package main

import (
	"flag"
	"time"

	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/gateway"
)

// clusterFlags place a gateway in a cluster (docs/scale-out.md).
type clusterFlags struct {
	peers       string
	self        int
	advertise   string
	peerTimeout time.Duration
}

func (f *clusterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.peers, "peers", "", "the cluster's gateways in order, node k first being node 0: comma-separated base URLs, or a StatefulSet pattern such as http://brand-{0..3}.brand.ns.svc:8080; every node must be given the same list")
	fs.IntVar(&f.self, "self", -1, "this node's position in --peers (or give --advertise)")
	fs.StringVar(&f.advertise, "advertise", "", "this node's URL as it appears in --peers, to find its position (e.g. http://$(POD_NAME).brand.ns.svc:8080)")
	fs.DurationVar(&f.peerTimeout, "peer-timeout", gateway.DefaultPeerTimeout, "bound on one sample fetch from a peer; past it the samples come from the next node or the store")
}

// config resolves the flags; token is what this node sends its peers.
func (f *clusterFlags) config(token string) (gateway.ClusterConfig, error) {
	if f.peers == "" {
		return gateway.ClusterConfig{}, nil
	}
	peers, err := cluster.ParsePeers(f.peers)
	if err != nil {
		return gateway.ClusterConfig{}, err
	}
	self, err := cluster.Self(peers, f.self, f.advertise)
	if err != nil {
		return gateway.ClusterConfig{}, err
	}
	return gateway.ClusterConfig{Peers: peers, Self: self, PeerTimeout: f.peerTimeout, Token: token}, nil
}
