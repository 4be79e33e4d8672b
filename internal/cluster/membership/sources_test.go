package membership

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/brandgw/brand/cluster"
)

// version is the membership version of what l lists now.
func version(t *testing.T, l interface {
	List(context.Context) ([]string, error)
}) string {
	t.Helper()
	urls, err := l.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ms, err := cluster.NewMembership(urls)
	if err != nil {
		t.Fatal(err)
	}
	return ms.Version()
}

// Every source lists the same set the same way: one membership version,
// whatever the order, the syntax or the source.
func TestSourcesAgreeOnAVersion(t *testing.T) {
	want, _ := cluster.NewMembership([]string{"http://brand-0.brand:8080", "http://brand-1.brand:8080", "http://brand-2.brand:8080"})
	dir := t.TempDir()
	file := filepath.Join(dir, "peers")
	if err := os.WriteFile(file, []byte("# the cluster\nhttp://brand-2.brand:8080\nhttp://brand-{0..1}.brand:8080 # two more\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dns := DNS{Name: "brand.ns.svc.cluster.local", Scheme: "http", Resolver: fakeResolver{
		"_http._tcp.brand.ns.svc.cluster.local": {{Target: "brand-1.brand.", Port: 8080}, {Target: "brand-0.brand.", Port: 8080}, {Target: "brand-2.brand.", Port: 8080}},
	}}
	for name, l := range map[string]interface {
		List(context.Context) ([]string, error)
	}{
		"static": Static{"http://brand-1.brand:8080", "http://brand-0.brand:8080", "http://brand-2.brand:8080"},
		"file":   File(file),
		"dns":    dns,
	} {
		if got := version(t, l); got != want.Version() {
			t.Errorf("%s lists version %s, want %s", name, got, want.Version())
		}
	}
}

// A file changed at runtime is a new list at the next List; a file that
// lists nothing, or cannot be read, is an error (the node keeps its last
// list).
func TestFileChangedAtRuntime(t *testing.T) {
	file := filepath.Join(t.TempDir(), "peers")
	write := func(s string) {
		// As a ConfigMap mount changes: a new file renamed over the old.
		tmp := file + ".new"
		if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	write("http://a:1,http://b:1")
	f := File(file)
	v1 := version(t, f)
	write("http://a:1,http://b:1,http://c:1")
	got, err := f.List(context.Background())
	if err != nil || !slices.Equal(got, []string{"http://a:1", "http://b:1", "http://c:1"}) {
		t.Fatalf("after the change: %v, %v", got, err)
	}
	if version(t, f) == v1 {
		t.Error("a member added leaves the version unchanged")
	}
	write("# nobody\n")
	if _, err := f.List(context.Background()); !errors.Is(err, ErrEmpty) {
		t.Errorf("an empty file: %v, want ErrEmpty", err)
	}
	write("http://a:1,ftp://b")
	if _, err := f.List(context.Background()); !errors.Is(err, cluster.ErrConfig) {
		t.Errorf("a bad URL: %v, want cluster.ErrConfig", err)
	}
	if _, err := File(filepath.Join(t.TempDir(), "none")).List(context.Background()); err == nil {
		t.Error("a missing file listed members")
	}
}

// DNS: targets lose their trailing dot and take the record's port and the
// configured scheme; a full SRV name is looked up as it is; no record is
// ErrEmpty; a lookup error is returned.
func TestDNS(t *testing.T) {
	r := fakeResolver{
		"_http._tcp.brand.ns.svc.cluster.local": {{Target: "brand-0.brand.ns.svc.cluster.local.", Port: 8443}},
		"_web._tcp.other.ns.svc":                {{Target: "o-0.other.ns.svc.", Port: 80}},
		"_http._tcp.empty.ns.svc":               nil,
	}
	got, err := DNS{Name: "brand.ns.svc.cluster.local", Scheme: "https", Resolver: r}.List(context.Background())
	if err != nil || !slices.Equal(got, []string{"https://brand-0.brand.ns.svc.cluster.local:8443"}) {
		t.Errorf("service name: %v, %v", got, err)
	}
	got, err = DNS{Name: "_web._tcp.other.ns.svc", Scheme: "http", Resolver: r}.List(context.Background())
	if err != nil || !slices.Equal(got, []string{"http://o-0.other.ns.svc:80"}) {
		t.Errorf("full SRV name: %v, %v", got, err)
	}
	if _, err := (DNS{Name: "empty.ns.svc", Scheme: "http", Resolver: r}).List(context.Background()); !errors.Is(err, ErrEmpty) {
		t.Errorf("no record: %v, want ErrEmpty", err)
	}
	if _, err := (DNS{Name: "missing.ns.svc", Scheme: "http", Resolver: r}).List(context.Background()); err == nil {
		t.Error("a failed lookup listed members")
	}
}

// fakeResolver answers SRV lookups from a table keyed by the full name.
type fakeResolver map[string][]*net.SRV

func (f fakeResolver) LookupSRV(_ context.Context, service, proto, name string) (string, []*net.SRV, error) {
	full := name
	if service != "" || proto != "" {
		full = "_" + service + "._" + proto + "." + name
	}
	srvs, ok := f[full]
	if !ok {
		return "", nil, &net.DNSError{Err: "no such host", Name: full, IsNotFound: true}
	}
	return full, srvs, nil
}
