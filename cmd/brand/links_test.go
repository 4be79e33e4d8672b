package main

import (
	"path"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/testsupport/cmdtest"
)

// module is the import path every package of this module starts with.
const module = "github.com/brandgw/brand/"

// notProduct says why a package the server binary links does not belong
// in it, or "" if it may: the benchmark harness lives beneath the command
// that runs it (cmd/brand-bench), test support is named for it as net/http's
// httptest is (internal/testsupport/miniotest, internal/testsupport/cmdtest), and a package of this
// module that imports the testing package is test support whatever its name.
func notProduct(pkg string, imports []string) string {
	switch {
	case pkg == module+"cmd/brand-bench" || strings.HasPrefix(pkg, module+"cmd/brand-bench/"):
		return "the benchmark harness"
	case strings.HasPrefix(pkg, module) && strings.HasSuffix(path.Base(pkg), "test"):
		return "test support"
	}
	for _, imp := range imports {
		if imp == "testing" || strings.HasPrefix(imp, "testing/") {
			if strings.HasPrefix(pkg, module) {
				return "test support: it imports " + imp
			}
			if _, ok := linksTesting[pkg]; !ok {
				return "a library that imports " + imp + " and is not in linksTesting"
			}
		}
	}
	return ""
}

// linksTesting names the libraries known to import the testing package in
// their non-test files, and why the server links them anyway. A new one
// fails TestServerLinksNoHarness until it is named here, so the testing
// package never comes in unnoticed.
var linksTesting = map[string]string{
	// thrift's logger.go offers NewTestLogger(testing.TB); arrow-go's
	// Parquet reader (format/parquet) links thrift for its metadata types.
	"github.com/apache/thrift/lib/go/thrift": "arrow-go's Parquet reader",
}

func TestNotProduct(t *testing.T) {
	tests := []struct {
		pkg     string
		imports []string
		want    bool
	}{
		{module + "cmd/brand-bench", nil, true},
		{module + "cmd/brand-bench/internal/bench", nil, true},
		{module + "internal/testsupport/miniotest", nil, true},
		{module + "internal/testsupport/cmdtest", nil, true},
		{module + "internal/batch/reader", []string{"io", "testing"}, true},
		{module + "internal/batch/reader", []string{"testing/fstest"}, true},
		{"github.com/example/lib", []string{"testing"}, true},
		{"github.com/apache/thrift/lib/go/thrift", []string{"testing"}, false},
		{module + "cmd/brand", []string{"net/http"}, false},
		{module + "internal/gen/photos", nil, false}, // a product package: the demo's and calibration's photos
		{"testing", []string{"io"}, false},           // linked only through a library named in linksTesting
		{"internal/synctest", nil, false},            // the standard library's own, linked by package sync
		{"github.com/minio/minio-go/v7", []string{"net/http"}, false},
	}
	for _, tt := range tests {
		if got := notProduct(tt.pkg, tt.imports) != ""; got != tt.want {
			t.Errorf("notProduct(%q, %q) = %q, want flagged=%v", tt.pkg, tt.imports, notProduct(tt.pkg, tt.imports), tt.want)
		}
	}
}

// TestServerLinksNoHarness keeps the product tree the product: the server
// binary (and its image) links neither the benchmark harness nor any test
// support.
func TestServerLinksNoHarness(t *testing.T) {
	out := cmdtest.Go(t, "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"cmd/brand")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 {
		t.Fatal("go list -deps named no packages")
	}
	for _, line := range lines {
		f := strings.Fields(line)
		if why := notProduct(f[0], f[1:]); why != "" {
			t.Errorf("cmd/brand links %s (%s)", f[0], why)
		}
	}
}
