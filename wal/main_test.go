package wal

import (
	"os"
	"testing"

	"github.com/seed-6dfbb450/memiavl/internal/testutil"
)

// TestMain runs a plain go test as one with -short (testutil.QuickByDefault).
func TestMain(m *testing.M) {
	testutil.QuickByDefault()
	os.Exit(m.Run())
}
