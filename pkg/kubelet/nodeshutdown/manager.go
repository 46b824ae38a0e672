// Package nodeshutdown stops the node's pods before the machine shuts down,
// as the kubelet's graceful node shutdown does: the agent holds a delay
// inhibitor of systemd-logind, and when logind announces a shutdown
// (PrepareForShutdown(true)) the node turns NotReady, new pods are refused,
// and the running ones are terminated row by row of the shutdown table
// (lowest priority first, each row within its grace period); then the
// inhibitor is released and the shutdown goes on. A shutdown cancelled
// (PrepareForShutdown(false)) makes the node Ready again and the inhibitor
// is taken again; the pods already stopped stay stopped, as the kubelet's.
//
// Without a system bus or logind the agent runs on without it, and says so
// once at start.
package nodeshutdown

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/lifecycle"
	"github.com/classic-kubelet/kubelet/pkg/safefile"
)

// The kubelet's words for a pod stopped, or refused, because the node shuts
// down, and the Node's event reason.
const (
	Reason            = "Terminated"
	Message           = "Pod was terminated in response to imminent node shutdown."
	NotAdmittedReason = "NodeShutdown"
	NotAdmitted       = "Pod was rejected as the node is shutting down."
	eventReason       = "NodeShutdown"
)

// ErrShuttingDown is why the node is not Ready while it shuts down (the
// Ready condition's message, as the kubelet's).
var ErrShuttingDown = errors.New("node is shutting down")

// reconnectPeriod is how long the manager waits before it connects again
// to a system bus it lost (the kubelet's period): logind or D-Bus
// restarting must not leave the node without its inhibitor for long.
const reconnectPeriod = time.Second

// inhibitWho and inhibitWhy are what logind shows of the inhibitor
// (systemd-inhibit --list).
const (
	inhibitWho = "kubelet"
	inhibitWhy = "Kubelet needs time to handle node shutdown"
)

// Logind is the part of systemd-logind the manager uses (systemd.Logind
// on the system bus; a fake in tests).
type Logind interface {
	InhibitDelayMax(ctx context.Context) (time.Duration, error)
	OverrideInhibitDelayMax(ctx context.Context, d time.Duration) error
	// InhibitShutdown takes a delay inhibitor; closing the lock releases it.
	InhibitShutdown(ctx context.Context, who, why string) (io.Closer, error)
	WatchShutdown(ctx context.Context) (<-chan bool, error)
	Close() error
}

// Pods are the node's pods as the manager stops them.
type Pods interface {
	// ActivePods are the pods that run or may start (not terminating).
	ActivePods() []*v1.Pod
	// TerminatePod is the pod's one way to end: its worker stops it as t
	// says. The channel closes once nothing of the pod runs.
	TerminatePod(uid types.UID, t lifecycle.Termination) <-chan struct{}
}

// Gauges are the kubelet's graceful-shutdown metrics
// (kubelet_graceful_shutdown_{start,end}_time_seconds).
type Gauges interface {
	SetShutdownTimes(start, end time.Time)
}

// Config is the manager's.
type Config struct {
	// Table is the shutdown table (Table); empty: the manager is off.
	Table []Group
	// Node names the node in events.
	Node string
	// StateFile keeps the last shutdown's start and end times across the
	// reboot (the kubelet's graceful_node_shutdown_state); "": not kept.
	StateFile string
	Clock     clock.WithTicker // nil: the real clock
}

// Deps are what the manager acts through.
type Deps struct {
	// Dial connects to logind (a new connection each time).
	Dial   func() (Logind, error)
	Pods   Pods
	Events *events.Recorder // nil: none
	Gauges Gauges           // nil: none
}

// Manager is the node's graceful shutdown: Run holds logind's inhibitor
// and acts on its signals; ShuttingDown and Admit are read by the Node's
// Ready condition and the pods' admission.
type Manager struct {
	cfg  Config
	deps Deps

	shuttingDown atomic.Bool

	// bus is the connection to logind and lock the inhibitor held on it
	// (nil: none); both owned by Run's goroutine.
	bus  Logind
	lock io.Closer

	mu sync.Mutex // guards started, ended
	// started and ended are the last shutdown's times.
	started, ended time.Time
}

// New returns the manager; Run starts it. With an empty table it does
// nothing.
func New(cfg Config, deps Deps) *Manager {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Manager{cfg: cfg, deps: deps}
}

// Enabled reports whether a shutdown table is configured.
func (m *Manager) Enabled() bool { return m != nil && len(m.cfg.Table) > 0 }

// ShuttingDown reports whether logind announced a shutdown that was not
// cancelled.
func (m *Manager) ShuttingDown() bool { return m != nil && m.shuttingDown.Load() }

// Err is why the node is not Ready because of a shutdown (nil: it is not
// shutting down).
func (m *Manager) Err() error {
	if m.ShuttingDown() {
		return ErrShuttingDown
	}
	return nil
}

// Admit refuses a pod that would start while the node shuts down, as the
// kubelet's admission does.
func (m *Manager) Admit(*v1.Pod) *lifecycle.Rejection {
	if m.ShuttingDown() {
		return &lifecycle.Rejection{Reason: NotAdmittedReason, Message: NotAdmitted}
	}
	return nil
}

// Run watches logind until ctx ends. If logind cannot be reached at start
// (no system bus, no logind, an inhibit delay it cannot raise) it logs a
// warning and returns: the agent runs on, and pods die with the machine.
// A connection lost later is made again every reconnectPeriod.
func (m *Manager) Run(ctx context.Context) {
	if !m.Enabled() {
		return
	}
	m.loadState()
	bus, signals, err := m.connect(ctx)
	if err != nil {
		klog.Warningf("Graceful node shutdown is off: %v; pods will not be stopped before the machine shuts down", err)
		return
	}
	klog.Infof("Graceful node shutdown: holding logind's delay inhibitor; on shutdown pods are stopped by priority %s", describe(m.cfg.Table))
	for {
		m.watch(ctx, signals)
		m.release()
		_ = bus.Close()
		m.bus = nil
		if ctx.Err() != nil {
			return
		}
		klog.Errorf("Graceful node shutdown: lost the system bus; connecting again")
		for {
			select {
			case <-ctx.Done():
				return
			case <-m.cfg.Clock.After(reconnectPeriod):
			}
			if bus, signals, err = m.connect(ctx); err == nil {
				klog.Infof("Graceful node shutdown: holding logind's delay inhibitor again")
				break
			}
			klog.V(2).Infof("Graceful node shutdown: %v", err)
		}
	}
}

// connect dials logind, makes sure its InhibitDelayMaxSec covers the table
// (raising it as the kubelet does), takes the inhibitor and subscribes to
// PrepareForShutdown.
func (m *Manager) connect(ctx context.Context) (Logind, <-chan bool, error) {
	bus, err := m.deps.Dial()
	if err != nil {
		return nil, nil, err
	}
	signals, err := m.prepare(ctx, bus)
	if err != nil {
		_ = bus.Close()
		return nil, nil, err
	}
	m.bus = bus
	return bus, signals, nil
}

// overrideWait bounds how long logind may take to apply a raised
// InhibitDelayMaxSec (it rereads its configuration asynchronously); the
// kubelet waits about as long (five tries, 100 ms doubling).
var overrideWait = []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond}

func (m *Manager) prepare(ctx context.Context, bus Logind) (<-chan bool, error) {
	delay, err := bus.InhibitDelayMax(ctx)
	if err != nil {
		return nil, err
	}
	if want := Requested(m.cfg.Table); want > delay {
		klog.Infof("Graceful node shutdown: logind's InhibitDelayMaxSec is %v, less than the %v the shutdown table needs: raising it", delay, want)
		if err := bus.OverrideInhibitDelayMax(ctx, want); err != nil {
			return nil, fmt.Errorf("raise logind's InhibitDelayMaxSec to %v: %w", want, err)
		}
		for _, wait := range overrideWait {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-m.cfg.Clock.After(wait):
			}
			if delay, err = bus.InhibitDelayMax(ctx); err != nil {
				return nil, err
			}
			if delay >= want {
				break
			}
		}
		if delay < want {
			return nil, fmt.Errorf("logind's InhibitDelayMaxSec is still %v after raising it to %v (the shutdown table's total)", delay, want)
		}
	}
	if err := m.inhibit(ctx, bus); err != nil {
		return nil, err
	}
	signals, err := bus.WatchShutdown(ctx)
	if err != nil {
		m.release()
		return nil, err
	}
	return signals, nil
}

// watch acts on logind's signals until ctx ends or the connection is lost.
func (m *Manager) watch(ctx context.Context, signals <-chan bool) {
	for {
		select {
		case <-ctx.Done():
			return
		case active, ok := <-signals:
			if !ok {
				return
			}
			m.handle(ctx, active)
		}
	}
}

// handle is one PrepareForShutdown: true stops the pods, then releases the
// inhibitor so that the shutdown goes on; false (the shutdown cancelled)
// makes the node Ready again and takes the inhibitor again.
func (m *Manager) handle(ctx context.Context, active bool) {
	if !active {
		klog.Infof("Graceful node shutdown: the shutdown was cancelled; the node is Ready again")
		m.deps.Events.Event(events.NodeRef(m.cfg.Node), false, eventReason, "Shutdown manager detected shutdown cancellation")
		m.shuttingDown.Store(false)
		if err := m.inhibit(ctx, m.bus); err != nil {
			klog.Errorf("Graceful node shutdown: %v", err)
		}
		return
	}
	klog.Infof("Graceful node shutdown: logind announced a shutdown; stopping pods")
	m.deps.Events.Event(events.NodeRef(m.cfg.Node), false, eventReason, "Shutdown manager detected shutdown event")
	m.shuttingDown.Store(true)
	start := m.cfg.Clock.Now()
	m.setTimes(start, time.Time{})
	m.stopPods(ctx)
	m.setTimes(start, m.cfg.Clock.Now())
	m.release()
	klog.Infof("Graceful node shutdown: pods stopped; released the inhibitor, the node shuts down")
}

// stopPods terminates the active pods row by row of the table: every pod
// of a row at once, each within its grace (PodGrace); the next row starts
// once they are all stopped or the row's grace has passed.
func (m *Manager) stopPods(ctx context.Context) {
	rows := Assign(m.cfg.Table, m.deps.Pods.ActivePods())
	for i, pods := range rows {
		if len(pods) == 0 {
			continue // an empty row is not waited for
		}
		g := m.cfg.Table[i]
		done := make([]<-chan struct{}, len(pods))
		for j, pod := range pods {
			grace := PodGrace(g, pod)
			klog.Infof("Graceful node shutdown: stopping pod %s (priority %d) within %v", api.Key(pod), Priority(pod), grace)
			done[j] = m.deps.Pods.TerminatePod(pod.UID, lifecycle.Termination{Cause: lifecycle.Shutdown, Grace: grace, Reason: Reason, Message: Message})
		}
		timeout := m.cfg.Clock.NewTimer(g.Grace)
		for j, ch := range done {
			select {
			case <-ch:
				continue
			case <-ctx.Done():
			case <-timeout.C():
				klog.Infof("Graceful node shutdown: pods of priority %d and up still stopping after %v; going on (%s first)", g.Priority, g.Grace, api.Key(pods[j]))
			}
			break
		}
		timeout.Stop()
		if ctx.Err() != nil {
			return
		}
	}
}

// inhibit takes logind's delay inhibitor, unless one is held.
func (m *Manager) inhibit(ctx context.Context, bus Logind) error {
	if m.lock != nil {
		return nil
	}
	lock, err := bus.InhibitShutdown(ctx, inhibitWho, inhibitWhy)
	if err != nil {
		return err
	}
	m.lock = lock
	return nil
}

// release lets the shutdown go on: the inhibitor is closed.
func (m *Manager) release() {
	if m.lock == nil {
		return
	}
	if err := m.lock.Close(); err != nil {
		klog.Errorf("Graceful node shutdown: release logind's inhibitor: %v", err)
	}
	m.lock = nil
}

// shutdownState is the kubelet's graceful_node_shutdown_state file: the
// last shutdown's start and end, kept across the reboot so that the
// metrics tell of it once the node is back.
type shutdownState struct {
	StartTime time.Time `json:"startTime"`
	EndTime   time.Time `json:"endTime"`
}

// setTimes records the shutdown's start (and end, once known) in the
// gauges and the state file.
func (m *Manager) setTimes(start, end time.Time) {
	m.mu.Lock()
	m.started, m.ended = start, end
	m.mu.Unlock()
	if m.deps.Gauges != nil {
		m.deps.Gauges.SetShutdownTimes(start, end)
	}
	if m.cfg.StateFile == "" {
		return
	}
	data, _ := json.Marshal(shutdownState{StartTime: start, EndTime: end})
	if err := safefile.WriteAtomic(m.cfg.StateFile, data); err != nil {
		klog.Errorf("Graceful node shutdown: state: %v", err)
	}
}

// loadState sets the gauges from the last shutdown's state file.
func (m *Manager) loadState() {
	if m.cfg.StateFile == "" {
		return
	}
	data, err := os.ReadFile(m.cfg.StateFile)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			klog.Errorf("Graceful node shutdown: state: %v", err)
		}
		return
	}
	var st shutdownState
	if err := json.Unmarshal(data, &st); err != nil {
		klog.Errorf("Graceful node shutdown: state %s: %v", m.cfg.StateFile, err)
		return
	}
	m.mu.Lock()
	m.started, m.ended = st.StartTime, st.EndTime
	m.mu.Unlock()
	if m.deps.Gauges != nil {
		m.deps.Gauges.SetShutdownTimes(st.StartTime, st.EndTime)
	}
}

// LastShutdown is the last shutdown's start and end (zero: none, or not
// ended).
func (m *Manager) LastShutdown() (start, end time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.started, m.ended
}

// describe spells the table for the log: "0: 6s, 2000000000: 4s".
func describe(table []Group) string {
	s := ""
	for i, g := range table {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%d+: %v", g.Priority, g.Grace)
	}
	return "(" + s + ")"
}
