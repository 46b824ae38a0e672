// Package systemd speaks to systemd: the service manager's notify protocol
// (sd_notify), and logind's shutdown inhibitors over D-Bus (logind.go). Notify:
// READY once the agent serves, WATCHDOG pings while it is healthy, STOPPING
// on the way out. Without NOTIFY_SOCKET every call is a no-op.
package systemd

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"time"
)

// Notify sends state ("READY=1", "WATCHDOG=1", "STOPPING=1", ...) to the
// socket in NOTIFY_SOCKET. It reports whether anything was sent.
func Notify(state string) (bool, error) {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return false, nil
	}
	if path[0] == '@' {
		path = "\x00" + path[1:] // an abstract socket
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return false, fmt.Errorf("notify %s: %w", os.Getenv("NOTIFY_SOCKET"), err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(state)); err != nil {
		return false, fmt.Errorf("notify: %w", err)
	}
	return true, nil
}

// WatchdogInterval is how often to ping the watchdog (half the service's
// WatchdogSec), or 0 when the watchdog is off or meant for another process.
func WatchdogInterval() time.Duration {
	usec, err := strconv.ParseInt(os.Getenv("WATCHDOG_USEC"), 10, 64)
	if err != nil || usec <= 0 {
		return 0
	}
	if pid := os.Getenv("WATCHDOG_PID"); pid != "" && pid != strconv.Itoa(os.Getpid()) {
		return 0
	}
	return time.Duration(usec) * time.Microsecond / 2
}
