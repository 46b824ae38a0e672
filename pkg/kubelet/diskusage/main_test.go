package diskusage

import (
	"flag"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	_ = flag.Set("logtostderr", "true")
	flag.Parse()
	// Run's timer loop must have stopped when a test returns.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"))
}
