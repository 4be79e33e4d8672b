package main

import (
	"path"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/cmdtest"
)

// module is the import path every package of this module starts with.
const module = "github.com/brandgw/brand/"

// notProduct says why a package the server binary links does not belong
// in it, or "" if it may: the benchmark harness lives beneath the command
// that runs it (cmd/brand-bench), test support is named for it as net/http's
// httptest is (internal/miniotest, internal/cmdtest), and anything that
// imports the testing package is test support whatever its name.
func notProduct(pkg string) string {
	switch {
	case pkg == module+"cmd/brand-bench" || strings.HasPrefix(pkg, module+"cmd/brand-bench/"):
		return "the benchmark harness"
	case strings.HasPrefix(pkg, module) && strings.HasSuffix(path.Base(pkg), "test"):
		return "test support"
	case pkg == "testing" || strings.HasPrefix(pkg, "testing/"):
		return "the testing package, which only test support imports"
	}
	return ""
}

func TestNotProduct(t *testing.T) {
	tests := []struct {
		pkg  string
		want bool
	}{
		{module + "cmd/brand-bench", true},
		{module + "cmd/brand-bench/internal/bench", true},
		{module + "internal/miniotest", true},
		{module + "internal/cmdtest", true},
		{"testing", true},
		{"testing/fstest", true},
		{module + "cmd/brand", false},
		{module + "internal/reader", false},
		{module + "internal/photos", false}, // a product package: the demo's and calibration's photos
		{"internal/synctest", false},        // the standard library's own, linked by package sync
		{"github.com/minio/minio-go/v7", false},
	}
	for _, tt := range tests {
		if got := notProduct(tt.pkg) != ""; got != tt.want {
			t.Errorf("notProduct(%q) = %q, want flagged=%v", tt.pkg, notProduct(tt.pkg), tt.want)
		}
	}
}

// TestServerLinksNoHarness keeps the product tree the product: the server
// binary (and its image) links neither the benchmark harness nor any test
// support.
func TestServerLinksNoHarness(t *testing.T) {
	deps := strings.Fields(cmdtest.Go(t, "list", "-deps", module+"cmd/brand"))
	if len(deps) == 0 {
		t.Fatal("go list -deps named no packages")
	}
	for _, pkg := range deps {
		if why := notProduct(pkg); why != "" {
			t.Errorf("cmd/brand links %s (%s)", pkg, why)
		}
	}
}
