package membership

import (
	"slices"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
)

// View is the body of GET /cluster: the members of the membership the
// cluster agrees on (this node's position among them, or after them if it
// is not one), their liveness, index versions and the membership each
// reports, as this node last learnt them; the versions the cluster agrees
// on; and with world > 0 each rank's home among the members.
func (m *Tracker) View(world int, datasets []string) api.Cluster {
	v := m.view.Load()
	leaving := m.leaving.Load()
	c := api.Cluster{Agreed: map[string]string{}, Members: v.agreed.Version(), Local: v.local.Version(), Reported: v.reported.Version(),
		Warming: v.warming, Leaving: leaving, LastChange: m.change.Load()}
	shown := slices.Clone(v.agreedSlots) // the members' slots, then this node's if it is not one
	c.Self = slices.Index(shown, m.selfSlot)
	if c.Self < 0 {
		c.Self = len(shown)
		shown = append(shown, m.selfSlot)
	}
	for _, k := range shown {
		cn := api.ClusterNode{URL: m.peers.URL(k), Up: m.peers.Up(k)}
		switch st := m.peers.State(k); {
		case k == m.selfSlot:
			cn.Indexes = map[string]string{}
			for _, d := range datasets {
				cn.Indexes[d] = m.current(d)
			}
			cn.Members, cn.Warming, cn.Leaving = v.reported.Version(), v.warming, leaving
		case st != nil:
			cn.Indexes = map[string]string{}
			for _, d := range st.Datasets {
				cn.Indexes[d.Name] = d.Current
			}
			cn.Members, cn.Warming, cn.Leaving, cn.StoreUnreachable = st.Members, st.Warming, st.Leaving, st.StoreUnreachable
		}
		c.Nodes = append(c.Nodes, cn)
	}
	for _, d := range datasets {
		c.Agreed[d] = m.Agreed(d)
	}
	if world > 0 {
		c.Homes = make([]int, world)
		for r := range c.Homes {
			c.Homes[r] = cluster.Home(r, world, v.agreed.Len())
		}
	}
	return c
}
