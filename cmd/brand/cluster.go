package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
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
	secretFile  string
}

func (f *clusterFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.peers, "peers", "", "the cluster's gateways in order, node k first being node 0: comma-separated base URLs, or a StatefulSet pattern such as http://brand-{0..3}.brand.ns.svc:8080; every node must be given the same list")
	fs.IntVar(&f.self, "self", -1, "this node's position in --peers (or give --advertise)")
	fs.StringVar(&f.advertise, "advertise", "", "this node's URL as it appears in --peers, to find its position (e.g. http://$(POD_NAME).brand.ns.svc:8080)")
	fs.DurationVar(&f.peerTimeout, "peer-timeout", gateway.DefaultPeerTimeout, "bound on one sample fetch from a peer; past it the samples come from the next node or the store")
	fs.StringVar(&f.secretFile, "peer-secret-file", "", "the secret every node of the cluster is given (at least 16 bytes); the peers' internal requests carry credentials derived from it, and only those are served. Required with --auth-token-file")
}

// minPeerSecret is the shortest peer secret accepted.
const minPeerSecret = 16

// config resolves the flags, reading the peer secret.
func (f *clusterFlags) config() (gateway.ClusterConfig, error) {
	cc, err := f.layout()
	if err != nil || len(cc.Peers) == 0 {
		return cc, err
	}
	cc.Secret, err = f.secret()
	return cc, err
}

// layout resolves the peer list and this node's position in it.
func (f *clusterFlags) layout() (gateway.ClusterConfig, error) {
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
	return gateway.ClusterConfig{Peers: peers, Self: self, PeerTimeout: f.peerTimeout}, nil
}

// secret reads --peer-secret-file: its bytes, surrounding white space
// trimmed.
func (f *clusterFlags) secret() ([]byte, error) {
	if f.secretFile == "" {
		return nil, nil
	}
	b, err := os.ReadFile(f.secretFile)
	if err != nil {
		return nil, fmt.Errorf("--peer-secret-file: %w", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) < minPeerSecret {
		return nil, fmt.Errorf("--peer-secret-file %s: the secret must be at least %d bytes (e.g. openssl rand -hex 32)", f.secretFile, minPeerSecret)
	}
	return b, nil
}

// errPeerSecretAlone is a peer secret given without --peers.
var errPeerSecretAlone = errors.New("--peer-secret-file is for a cluster: give --peers too")
