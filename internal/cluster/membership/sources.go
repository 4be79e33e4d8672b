package membership

// The sources of a cluster's member list, where the platform keeps it: a
// static list (brand serve --peers, the dev stack), a file an operator or
// a ConfigMap changes at runtime (--peers-file), or a Kubernetes headless
// Service's DNS records (--peers-dns). Each source is a Lister: the node
// polls it, and a changed list is a new membership version
// (cluster.Membership) that the nodes agree on through their state
// probes. A source only lists; it never decides anything.
//
// Lists are base URLs in the syntax of --peers (cluster.ParsePeers):
// comma- or newline-separated, with StatefulSet ranges such as
// http://brand-{0..3}.brand:8080. Sources return them unsorted; the
// membership sorts them.

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/errkind"
)

// ErrEmpty means a source listed no member: the node keeps its last list
// rather than believe the cluster vanished.
var ErrEmpty = errkind.New(errkind.Internal, "membership: no member listed")

// Static is a fixed list: the same every time.
type Static []string

// List returns the list.
func (s Static) List(context.Context) ([]string, error) { return s, nil }

// File is a file holding the member list, reread at every List: comma- or
// newline-separated URLs in the syntax of --peers, '#' starting a
// comment. Rereading the whole file each poll (not watching its inode)
// follows a Kubernetes ConfigMap mount, which replaces a symlink, and an
// editor that writes a new file and renames it.
type File string

// List reads and parses the file.
func (f File) List(context.Context) ([]string, error) {
	b, err := os.ReadFile(string(f))
	if err != nil {
		return nil, fmt.Errorf("membership: %w", err)
	}
	var parts []string
	for line := range strings.Lines(string(b)) {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		if line = strings.TrimSpace(line); line != "" {
			parts = append(parts, line)
		}
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("%w in %s", ErrEmpty, f)
	}
	urls, err := cluster.ParsePeers(strings.Join(parts, ","))
	if err != nil {
		return nil, fmt.Errorf("membership: %s: %w", f, err)
	}
	return urls, nil
}

// Resolver looks up SRV records (net.Resolver).
type Resolver interface {
	LookupSRV(ctx context.Context, service, proto, name string) (string, []*net.SRV, error)
}

// DNS lists the members a headless Service's DNS publishes: its SRV
// records, each naming a pod by its stable name (brand-2.brand.ns.svc.…)
// and the port of the Service's port named "http". SRV rather than A
// records, because a pod's IP changes when it is rescheduled while its
// name does not, and a member's identity (and so which chunks it owns)
// is its URL: a restarted pod keeps its chunks. Each target becomes
// Scheme://target:port.
//
// Name is the Service's DNS name (brand.NAMESPACE.svc.cluster.local),
// whose records are _http._tcp.Name; a name that starts with '_' is looked
// up as it is. With publishNotReadyAddresses, a starting pod is listed
// at once (a member that is not up yet only changes where bytes come
// from), and a deleted one drops out.
type DNS struct {
	Name     string
	Scheme   string   // "http" or "https"
	Resolver Resolver // nil: net.DefaultResolver
}

// List looks the records up.
func (d DNS) List(ctx context.Context) ([]string, error) {
	r := d.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	service, proto := "http", "tcp"
	if strings.HasPrefix(d.Name, "_") {
		service, proto = "", ""
	}
	_, srvs, err := r.LookupSRV(ctx, service, proto, d.Name)
	if err != nil {
		return nil, fmt.Errorf("membership: DNS SRV records of %s: %w", d.Name, err)
	}
	var urls []string
	for _, s := range srvs {
		host := strings.TrimSuffix(s.Target, ".")
		if host == "" {
			continue
		}
		u := url.URL{Scheme: d.Scheme, Host: net.JoinHostPort(host, strconv.Itoa(int(s.Port)))}
		urls = append(urls, u.String())
	}
	if len(urls) == 0 {
		return nil, fmt.Errorf("%w in the DNS SRV records of %s", ErrEmpty, d.Name)
	}
	return urls, nil
}
