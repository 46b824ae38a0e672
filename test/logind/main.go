// Command logind is a stand-in for systemd-logind on a private D-Bus bus,
// for the end-to-end test of the agent's graceful node shutdown. It owns
// org.freedesktop.login1 and serves what a node agent uses of logind's
// Manager: the InhibitDelayMaxUSec property, Inhibit (a pipe's write end
// for the lock; the lock is released when every copy of it is closed) and
// the PrepareForShutdown signal, emitted with true on SIGUSR1 and with
// false (the shutdown cancelled) on SIGUSR2.
//
// It prints one line per event on standard output, which the test reads:
//
//	ready
//	inhibited <n> <what> <who> <mode>
//	released <n>
//	emitted <true|false>
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/godbus/dbus/v5"
	"github.com/godbus/dbus/v5/prop"
)

const (
	name  = "org.freedesktop.login1"
	path  = dbus.ObjectPath("/org/freedesktop/login1")
	iface = "org.freedesktop.login1.Manager"
)

// out serializes the event lines.
var out sync.Mutex

func say(format string, args ...any) {
	out.Lock()
	defer out.Unlock()
	fmt.Printf(format+"\n", args...)
}

// manager is logind's Manager object.
type manager struct {
	mu sync.Mutex
	n  int
}

// Inhibit answers a pipe's write end, as logind answers a FIFO's: the lock
// is held until every copy of it is closed, which the read end sees as EOF.
func (m *manager) Inhibit(what, who, why, mode string) (dbus.UnixFD, *dbus.Error) {
	r, w, err := os.Pipe()
	if err != nil {
		return 0, dbus.MakeFailedError(err)
	}
	m.mu.Lock()
	m.n++
	n := m.n
	m.mu.Unlock()
	say("inhibited %d %s %s %s", n, what, who, mode)
	go func() {
		_, _ = io.Copy(io.Discard, r)
		r.Close()
		say("released %d", n)
	}()
	// The reply carries a copy of w once this returns; the stand-in's own
	// copy goes a moment later, so that only the caller's holds the lock.
	fd := dbus.UnixFD(w.Fd())
	time.AfterFunc(time.Second, func() { w.Close() })
	return fd, nil
}

func main() {
	address := flag.String("address", os.Getenv("DBUS_SYSTEM_BUS_ADDRESS"), "the bus to serve on")
	delay := flag.Duration("inhibit-delay-max", 30*time.Second, "InhibitDelayMaxUSec")
	flag.Parse()
	conn, err := dbus.Connect(*address)
	if err != nil {
		fmt.Fprintf(os.Stderr, "logind: connect %s: %v\n", *address, err)
		os.Exit(1)
	}
	defer conn.Close()
	if err := conn.Export(&manager{}, path, iface); err != nil {
		fmt.Fprintf(os.Stderr, "logind: export: %v\n", err)
		os.Exit(1)
	}
	if _, err := prop.Export(conn, path, prop.Map{iface: {
		"InhibitDelayMaxUSec": {Value: uint64(delay.Microseconds()), Emit: prop.EmitConst},
	}}); err != nil {
		fmt.Fprintf(os.Stderr, "logind: properties: %v\n", err)
		os.Exit(1)
	}
	reply, err := conn.RequestName(name, dbus.NameFlagDoNotQueue)
	if err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		fmt.Fprintf(os.Stderr, "logind: own %s: %v (reply %v)\n", name, err, reply)
		os.Exit(1)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTERM, syscall.SIGINT)
	say("ready")
	for s := range sigs {
		switch s {
		case syscall.SIGUSR1, syscall.SIGUSR2:
			active := s == syscall.SIGUSR1
			if err := conn.Emit(path, iface+".PrepareForShutdown", active); err != nil {
				fmt.Fprintf(os.Stderr, "logind: emit: %v\n", err)
				continue
			}
			say("emitted %t", active)
		default:
			return
		}
	}
}
