package systemd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/godbus/dbus/v5"
)

// logind's names on the system bus.
const (
	logindService   = "org.freedesktop.login1"
	logindPath      = dbus.ObjectPath("/org/freedesktop/login1")
	logindManager   = "org.freedesktop.login1.Manager"
	systemdService  = "org.freedesktop.systemd1"
	systemdPath     = dbus.ObjectPath("/org/freedesktop/systemd1")
	systemdManager  = "org.freedesktop.systemd1.Manager"
	logindUnit      = "systemd-logind.service"
	prepareShutdown = "PrepareForShutdown"
)

// LogindConfDir is where logind reads drop-ins of logind.conf; the agent
// writes its InhibitDelayMaxSec there, as the kubelet does.
const LogindConfDir = "/etc/systemd/logind.conf.d"

// logindDropIn is the agent's drop-in (the kubelet's name: a node moving
// from one to the other keeps one file).
const logindDropIn = "99-kubelet.conf"

// Logind is a connection to systemd-logind over the system bus
// (DBUS_SYSTEM_BUS_ADDRESS, else the well-known socket): the delay
// inhibitor of shutdowns and the PrepareForShutdown signal, what a node
// agent needs to stop its pods before the machine goes down. A Logind is
// used by one goroutine at a time; each call ends with its context (a
// logind that does not answer holds it until D-Bus's own timeout).
type Logind struct {
	conn *dbus.Conn
	// ConfDir is where OverrideInhibitDelayMax writes its drop-in
	// (LogindConfDir; tests point it elsewhere).
	ConfDir string
}

// DialLogind connects to the system bus. It fails when there is no bus;
// whether logind answers shows on the first call.
func DialLogind() (*Logind, error) {
	conn, err := dbus.ConnectSystemBus()
	if err != nil {
		return nil, fmt.Errorf("connect to the system bus: %w", err)
	}
	return &Logind{conn: conn, ConfDir: LogindConfDir}, nil
}

// Close closes the connection; an inhibitor taken on it stays held until
// its lock is closed.
func (l *Logind) Close() error { return l.conn.Close() }

// InhibitDelayMax is logind's InhibitDelayMaxUSec: the longest a delay
// inhibitor may hold a shutdown back.
func (l *Logind) InhibitDelayMax(ctx context.Context) (time.Duration, error) {
	var v dbus.Variant
	err := l.conn.Object(logindService, logindPath).CallWithContext(ctx, "org.freedesktop.DBus.Properties.Get", 0,
		logindManager, "InhibitDelayMaxUSec").Store(&v)
	if err != nil {
		return 0, fmt.Errorf("read logind's InhibitDelayMaxUSec: %w", err)
	}
	usec, ok := v.Value().(uint64)
	if !ok {
		return 0, fmt.Errorf("logind's InhibitDelayMaxUSec is a %s, want a uint64", v.Signature())
	}
	return time.Duration(usec) * time.Microsecond, nil
}

// InhibitShutdown takes a delay inhibitor of shutdowns: logind waits (up to
// InhibitDelayMax) after announcing a shutdown until the returned lock is
// closed.
func (l *Logind) InhibitShutdown(ctx context.Context, who, why string) (*os.File, error) {
	var fd dbus.UnixFD
	err := l.conn.Object(logindService, logindPath).CallWithContext(ctx, logindManager+".Inhibit", 0, "shutdown", who, why, "delay").Store(&fd)
	if err != nil {
		return nil, fmt.Errorf("take logind's shutdown delay inhibitor: %w", err)
	}
	return os.NewFile(uintptr(fd), "logind-inhibitor"), nil
}

// OverrideInhibitDelayMax writes a logind.conf drop-in raising
// InhibitDelayMaxSec to d and has systemd send logind SIGHUP, which
// rereads its configuration (asynchronously: read InhibitDelayMax again to
// see it applied).
func (l *Logind) OverrideInhibitDelayMax(ctx context.Context, d time.Duration) error {
	if err := os.MkdirAll(l.ConfDir, 0o755); err != nil {
		return fmt.Errorf("logind drop-in: %w", err)
	}
	content := fmt.Sprintf("# Written by the node agent: its shutdownGracePeriod needs logind to wait this long.\n[Login]\nInhibitDelayMaxSec=%d\n",
		int64((d+time.Second-1)/time.Second))
	path := filepath.Join(l.ConfDir, logindDropIn)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		return fmt.Errorf("logind drop-in: %w", err)
	}
	call := l.conn.Object(systemdService, systemdPath).CallWithContext(ctx, systemdManager+".KillUnit", 0, logindUnit, "all", int32(syscall.SIGHUP))
	if call.Err != nil {
		return fmt.Errorf("have systemd reload logind: %w", call.Err)
	}
	return nil
}

// WatchShutdown subscribes to logind's PrepareForShutdown signal: true
// when a shutdown begins, false when one is cancelled. The channel closes
// when ctx ends or the connection is lost.
func (l *Logind) WatchShutdown(ctx context.Context) (<-chan bool, error) {
	if err := l.conn.AddMatchSignalContext(ctx, dbus.WithMatchObjectPath(logindPath), dbus.WithMatchInterface(logindManager),
		dbus.WithMatchMember(prepareShutdown)); err != nil {
		return nil, fmt.Errorf("watch logind's %s: %w", prepareShutdown, err)
	}
	signals := make(chan *dbus.Signal, 4)
	l.conn.Signal(signals)
	out := make(chan bool)
	go func() {
		defer close(out)
		defer l.conn.RemoveSignal(signals)
		for {
			var s *dbus.Signal
			var ok bool
			select {
			case <-ctx.Done():
				return
			case s, ok = <-signals:
			}
			if !ok {
				return // the connection closed
			}
			if s.Name != logindManager+"."+prepareShutdown || len(s.Body) == 0 {
				continue
			}
			active, isBool := s.Body[0].(bool)
			if !isBool {
				continue
			}
			select {
			case out <- active:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}
