package gateway

import (
	"time"

	"github.com/go-chi/chi/v5"
)

// RoutesOf is g's routing table, for a test that walks every route.
func RoutesOf(g *Gateway) chi.Routes { return g.handler.(chi.Routes) }

// PeerBoot is the boot g's peer credentials must cover (peercred.Verifier.Boot).
func PeerBoot(g *Gateway) string { return g.peers.creds.Boot() }

// HoldUseTableClock holds the use table's clock of a gateway made with c
// still: its keys are then its streams' orders alone, as when each job
// keeps the pace the table expects, whatever this machine's load.
func HoldUseTableClock(c *Config) {
	at := time.Now()
	c.useTableClock = func() time.Time { return at }
}
