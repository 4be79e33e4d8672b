package client_test

import (
	"os"
	"testing"

	"github.com/brandgw/brand/internal/testsupport/cmdtest"
)

// TestMain builds each command the tests start once for all of them
// (cmdtest.Build).
func TestMain(m *testing.M) { os.Exit(cmdtest.Main(m)) }
