package eviction

import (
	"flag"
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(allocateHelperEnv) != "" {
		allocateHelper()
		return
	}
	_ = flag.Set("logtostderr", "true")
	flag.Parse()
	// The memory notifier's waiter must have stopped when a test returns.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"))
}
