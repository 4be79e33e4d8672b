package main

import (
	"os"
	"testing"

	"github.com/brandgw/brand/internal/testsupport/cmdtest"
)

// TestMain builds the brand binary the train smoke test measures once
// (cmdtest.Build).
func TestMain(m *testing.M) { os.Exit(cmdtest.Main(m)) }
