package dockertools

import (
	"testing"

	"go.uber.org/goleak"
)

// Every call of the client, streaming sessions and event subscriptions
// included, leaves no goroutine behind once it returns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
