package eviction

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(allocateHelperEnv) != "" {
		allocateHelper()
		return
	}
	// The memory notifier's waiter must have stopped when a test returns.
	goleak.VerifyTestMain(m)
}
