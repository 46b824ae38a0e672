package diskusage

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// Run's timer loop must have stopped when a test returns.
	goleak.VerifyTestMain(m)
}
