package systemd

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/godbus/dbus/v5/prop"
)

// startBus runs dbus-daemon on a private socket (never the machine's system
// bus) and points DBUS_SYSTEM_BUS_ADDRESS at it; without dbus-daemon the
// test skips.
func startBus(t *testing.T) string {
	t.Helper()
	daemon, err := exec.LookPath("dbus-daemon")
	if err != nil {
		t.Skipf("dbus-daemon not installed: %v", err)
	}
	dir, err := os.MkdirTemp("", "ck-bus")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "bus")
	conf := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`<busconfig><type>custom</type><listen>unix:path=%s</listen><auth>EXTERNAL</auth>
<policy context="default"><allow user="*"/><allow own="*"/><allow send_destination="*"/><allow receive_sender="*"/></policy></busconfig>`, sock)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(daemon, "--config-file="+conf, "--nofork", "--nopidfile")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("dbus-daemon made no socket")
		}
		time.Sleep(20 * time.Millisecond)
	}
	addr := "unix:path=" + sock
	t.Setenv("DBUS_SYSTEM_BUS_ADDRESS", addr)
	return addr
}

// fakeLogind serves logind's Manager and systemd's KillUnit on the bus.
type fakeLogind struct {
	mu       sync.Mutex
	inhibits []string
	kills    []string
	released chan struct{}
}

func (f *fakeLogind) Inhibit(what, who, why, mode string) (dbus.UnixFD, *dbus.Error) {
	r, w, err := os.Pipe()
	if err != nil {
		return 0, dbus.MakeFailedError(err)
	}
	f.mu.Lock()
	f.inhibits = append(f.inhibits, strings.Join([]string{what, who, why, mode}, "|"))
	f.mu.Unlock()
	go func() {
		_, _ = io.Copy(io.Discard, r)
		r.Close()
		close(f.released)
	}()
	fd := dbus.UnixFD(w.Fd())
	time.AfterFunc(500*time.Millisecond, func() { w.Close() })
	return fd, nil
}

type fakeSystemd struct{ f *fakeLogind }

func (s fakeSystemd) KillUnit(unit, who string, signal int32) *dbus.Error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.f.kills = append(s.f.kills, fmt.Sprintf("%s %s %d", unit, who, signal))
	return nil
}

func serveLogind(t *testing.T, addr string) (*fakeLogind, *dbus.Conn) {
	t.Helper()
	conn, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	f := &fakeLogind{released: make(chan struct{})}
	if err := conn.Export(f, logindPath, logindManager); err != nil {
		t.Fatal(err)
	}
	if _, err := prop.Export(conn, logindPath, prop.Map{logindManager: {
		"InhibitDelayMaxUSec": {Value: uint64(5_000_000), Emit: prop.EmitConst}}}); err != nil {
		t.Fatal(err)
	}
	if err := conn.Export(fakeSystemd{f}, systemdPath, systemdManager); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{logindService, systemdService} {
		if reply, err := conn.RequestName(name, dbus.NameFlagDoNotQueue); err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
			t.Fatalf("own %s: %v %v", name, err, reply)
		}
	}
	return f, conn
}

// The logind client against a real dbus-daemon: the inhibit delay read,
// raised by a drop-in and a reload through systemd, a delay inhibitor
// taken and released by closing it, PrepareForShutdown both ways.
func TestLogindOnABus(t *testing.T) {
	addr := startBus(t)
	f, server := serveLogind(t, addr)
	ctx := context.Background()
	l, err := DialLogind()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.ConfDir = filepath.Join(t.TempDir(), "logind.conf.d")

	if d, err := l.InhibitDelayMax(ctx); err != nil || d != 5*time.Second {
		t.Fatalf("InhibitDelayMax = %v, %v; want 5s", d, err)
	}
	if err := l.OverrideInhibitDelayMax(ctx, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(l.ConfDir, "99-kubelet.conf"))
	if err != nil || !strings.Contains(string(data), "[Login]\nInhibitDelayMaxSec=10\n") {
		t.Errorf("drop-in %q, %v", data, err)
	}
	f.mu.Lock()
	kills := strings.Join(f.kills, ",")
	f.mu.Unlock()
	if kills != "systemd-logind.service all 1" {
		t.Errorf("KillUnit calls %q, want SIGHUP to systemd-logind.service", kills)
	}

	lock, err := l.InhibitShutdown(ctx, "kubelet", "why")
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	inhibits := strings.Join(f.inhibits, ",")
	f.mu.Unlock()
	if inhibits != "shutdown|kubelet|why|delay" {
		t.Errorf("Inhibit calls %q, want a shutdown delay inhibitor", inhibits)
	}
	wctx, cancel := context.WithCancel(ctx)
	signals, err := l.WatchShutdown(wctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = server.Emit(logindPath, logindManager+".SessionNew", "x", dbus.ObjectPath("/x")) // not ours: ignored
	for _, want := range []bool{true, false} {
		if err := server.Emit(logindPath, logindManager+".PrepareForShutdown", want); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-signals:
			if got != want {
				t.Errorf("PrepareForShutdown %v, want %v", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no PrepareForShutdown(%v)", want)
		}
	}
	lock.Close()
	select {
	case <-f.released:
	case <-time.After(10 * time.Second):
		t.Fatal("the inhibitor was not released by closing its lock")
	}
	cancel()
	select {
	case _, ok := <-signals:
		if ok {
			t.Error("a signal after the watch ended")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not end with its context")
	}
}
