package gateway

import "github.com/go-chi/chi/v5"

// RoutesOf is g's routing table, for a test that walks every route.
func RoutesOf(g *Gateway) chi.Routes { return g.handler.(chi.Routes) }

// PeerBoot is the boot g's peer credentials must cover (peercred.Verifier.Boot).
func PeerBoot(g *Gateway) string { return g.peers.creds.Boot() }
