package systemd

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestNotify(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if sent, err := Notify("READY=1"); sent || err != nil {
		t.Fatalf("without NOTIFY_SOCKET: %v %v", sent, err)
	}
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", path)
	if sent, err := Notify("READY=1"); !sent || err != nil {
		t.Fatalf("Notify: %v %v", sent, err)
	}
	buf := make([]byte, 64)
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, err := conn.Read(buf)
	if err != nil || string(buf[:n]) != "READY=1" {
		t.Errorf("received %q %v", buf[:n], err)
	}
}

func TestWatchdogInterval(t *testing.T) {
	t.Setenv("WATCHDOG_USEC", "")
	if WatchdogInterval() != 0 {
		t.Error("watchdog without WATCHDOG_USEC")
	}
	t.Setenv("WATCHDOG_USEC", "20000000")
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	if got := WatchdogInterval(); got != 10*time.Second {
		t.Errorf("interval %v, want 10s", got)
	}
	t.Setenv("WATCHDOG_PID", "1")
	if WatchdogInterval() != 0 {
		t.Error("watchdog meant for another process used")
	}
}
