package cluster

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestParsePeers(t *testing.T) {
	tests := []struct {
		name string
		spec string
		want []string
	}{
		{"one", "http://a:8080", []string{"http://a:8080"}},
		{"list in order", "http://b:1,http://a:1,https://c", []string{"http://b:1", "http://a:1", "https://c"}},
		{"trailing slashes dropped", "http://a:8080/,http://b/brand/", []string{"http://a:8080", "http://b/brand"}},
		{"whitespace and empty elements", "  http://a:1 ,\n\thttp://b:1,, ", []string{"http://a:1", "http://b:1"}},
		{"statefulset range in the host", "http://brand-{0..3}.brand.ns.svc:8080",
			[]string{"http://brand-0.brand.ns.svc:8080", "http://brand-1.brand.ns.svc:8080", "http://brand-2.brand.ns.svc:8080", "http://brand-3.brand.ns.svc:8080"}},
		{"range in the port", "http://h:808{1..2}", []string{"http://h:8081", "http://h:8082"}},
		{"range of one", "http://n{5..5}", []string{"http://n5"}},
		{"range beside plain elements", "http://first, http://n{2..3}/ ,http://last",
			[]string{"http://first", "http://n2", "http://n3", "http://last"}},
		{"two elements with a range each", "http://a{0..1},http://b{0..1}", []string{"http://a0", "http://a1", "http://b0", "http://b1"}},
		{"path kept", "https://gw.example.com/brand", []string{"https://gw.example.com/brand"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePeers(tt.spec)
			if err != nil {
				t.Fatalf("ParsePeers(%q): %v", tt.spec, err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("ParsePeers(%q) = %q, want %q", tt.spec, got, tt.want)
			}
		})
	}
}

func TestParsePeersErrors(t *testing.T) {
	tests := []struct {
		name, spec string
		msg        string // part of the error text
	}{
		{"empty", "", "names no peer"},
		{"only separators", " , ,", "names no peer"},
		{"duplicate", "http://a:1,http://b:1,http://a:1", "listed twice"},
		{"duplicate after normalising", "http://a:1/, http://a:1", "listed twice"},
		{"duplicate from a range", "http://n1,http://n{0..2}", "listed twice"},
		{"bad scheme", "ftp://a:1", "not an http(s)"},
		{"no scheme", "a:8080", "not an http(s)"},
		{"no host", "http://", "not an http(s)"},
		{"query", "http://a:1/?x=1", "not an http(s)"},
		{"fragment", "http://a:1/#f", "not an http(s)"},
		{"unparsable", "http://a b:%zz", "not an http(s)"},
		{"two ranges", "http://n{0..1}.s{0..1}", "more than one"},
		{"reversed range", "http://n{3..0}", "a <= b"},
		{"range too long", "http://n{0..4096}", "at most 4096"},
		{"range overflows", "http://n{0..99999999999999999999}", "a <= b"},
		{"too many peers", "http://a{0..4095},http://b", "more than 4096 peers"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePeers(tt.spec)
			if err == nil {
				t.Fatalf("ParsePeers(%q) = %q, want an error", tt.spec, got)
			}
			if !errors.Is(err, ErrConfig) {
				t.Errorf("ParsePeers(%q): %v does not wrap ErrConfig", tt.spec, err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("ParsePeers(%q): %q does not say %q", tt.spec, err, tt.msg)
			}
		})
	}
}

// TestParsePeersLimit: exactly maxNodes peers are allowed.
func TestParsePeersLimit(t *testing.T) {
	got, err := ParsePeers(fmt.Sprintf("http://a{1..%d}", maxNodes))
	if err != nil || len(got) != maxNodes || got[0] != "http://a1" || got[maxNodes-1] != fmt.Sprintf("http://a%d", maxNodes) {
		t.Fatalf("ParsePeers of %d peers: %d peers (%v), err %v", maxNodes, len(got), got[:min(len(got), 2)], err)
	}
}

func TestSelf(t *testing.T) {
	peers := []string{"http://brand-0.svc:8080", "http://brand-1.svc:8080", "https://brand-2.svc/gw"}
	tests := []struct {
		name      string
		self      int
		advertise string
		want      int
	}{
		{"by index", 1, "", 1},
		{"index wins over advertise", 0, "http://brand-1.svc:8080", 0},
		{"last index", 2, "", 2},
		{"by advertised URL", -1, "http://brand-1.svc:8080", 1},
		{"advertised with trailing slash", -1, "https://brand-2.svc/gw/", 2},
		{"advertised first", -1, "http://brand-0.svc:8080", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Self(peers, tt.self, tt.advertise)
			if err != nil || got != tt.want {
				t.Errorf("Self(%d, %q) = %d, %v; want %d", tt.self, tt.advertise, got, err, tt.want)
			}
		})
	}
}

func TestSelfErrors(t *testing.T) {
	peers := []string{"http://a:1", "http://b:1"}
	tests := []struct {
		name      string
		self      int
		advertise string
		msg       string
	}{
		{"index past the list", 2, "", "outside the 2 peers"},
		{"neither index nor URL", -1, "", "--self K or --advertise URL"},
		{"URL not listed", -1, "http://c:1", "not among the peers"},
		{"URL on another port", -1, "http://a:2", "not among the peers"},
		{"advertised URL invalid", -1, "a:1", "not an http(s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Self(peers, tt.self, tt.advertise)
			if err == nil {
				t.Fatalf("Self(%d, %q) = %d, want an error", tt.self, tt.advertise, got)
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("Self(%d, %q): %v; want ErrConfig saying %q", tt.self, tt.advertise, err, tt.msg)
			}
		})
	}
}
