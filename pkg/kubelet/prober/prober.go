// Package prober decides when to probe: one worker per (container, probe
// type) runs the container's liveness, readiness or startup probe on its
// schedule, applies the thresholds, and keeps the settled result. How to
// probe lives in pkg/probe.
package prober

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/classic-kubelet/kubelet/pkg/probe"
	probeexec "github.com/classic-kubelet/kubelet/pkg/probe/exec"
	probegrpc "github.com/classic-kubelet/kubelet/pkg/probe/grpc"
	probehttp "github.com/classic-kubelet/kubelet/pkg/probe/http"
	probetcp "github.com/classic-kubelet/kubelet/pkg/probe/tcp"
)

// Type is the kind of probe.
type Type int

// The probe types.
const (
	Liveness Type = iota
	Readiness
	Startup
)

func (t Type) String() string { return [...]string{"liveness", "readiness", "startup"}[t] }

// Title is the probe type as the kubelet's metrics and events name it.
func (t Type) Title() string { return [...]string{"Liveness", "Readiness", "Startup"}[t] }

// Kubernetes' probe defaults.
const (
	defaultPeriod           = 10
	defaultTimeout          = 1
	defaultFailureThreshold = 3
	defaultSuccessThreshold = 1
	// maxJitter bounds the random delay before a worker's first probe, so
	// the probes of many containers started together do not fire together.
	maxJitter = time.Second
)

// Target is one running container to probe.
type Target struct {
	PodUID      types.UID
	PodKey      string // namespace/name, for logs
	Container   v1.Container
	FieldPath   string // names the container in events (events.FieldPath); "": spec.containers{name}
	ContainerID string
	StartedAt   time.Time
	PodIP       string
}

// Observer is told of each probe's result and how long it took, for
// metrics and events.
type Observer func(t Target, typ Type, result probe.Result, output string, took time.Duration)

// runFunc runs one probe; replaced in tests.
type runFunc func(ctx context.Context, t Target, p *v1.Probe) (probe.Result, string, error)

type key struct {
	containerID string
	typ         Type
}

// Manager runs the probe workers and keeps their settled results.
type Manager struct {
	clock    clock.WithTicker
	run      runFunc
	onChange func(types.UID) // a pod's probe results changed; must not block
	observe  Observer

	mu      sync.Mutex // guards workers and results
	workers map[key]*worker
	results map[key]probe.Result
	wg      sync.WaitGroup
}

// NewManager returns a manager probing through execer (for exec probes) on
// clk's periods; onChange is called, without blocking, when a pod's probe
// results change.
func NewManager(execer probeexec.Execer, onChange func(types.UID), observe Observer, clk clock.WithTicker) *Manager {
	httpProber := probehttp.New()
	m := &Manager{
		clock:    clk,
		onChange: onChange,
		observe:  observe,
		workers:  map[key]*worker{},
		results:  map[key]probe.Result{},
	}
	m.run = func(ctx context.Context, t Target, p *v1.Probe) (probe.Result, string, error) {
		return runProbe(ctx, httpProber, execer, t, p)
	}
	return m
}

func probeOf(c *v1.Container, typ Type) *v1.Probe {
	switch typ {
	case Liveness:
		return c.LivenessProbe
	case Readiness:
		return c.ReadinessProbe
	default:
		return c.StartupProbe
	}
}

// Sync makes the workers match the running containers of one pod: a worker
// for each probe of each target, none for containers that are gone.
func (m *Manager) Sync(ctx context.Context, uid types.UID, targets []Target) {
	m.mu.Lock()
	defer m.mu.Unlock()
	want := map[key]bool{}
	for _, t := range targets {
		for _, typ := range []Type{Liveness, Readiness, Startup} {
			p := probeOf(&t.Container, typ)
			if p == nil {
				continue
			}
			k := key{t.ContainerID, typ}
			want[k] = true
			if _, ok := m.workers[k]; ok {
				continue
			}
			if _, settled := m.results[k]; settled && typ == Startup {
				continue // a startup probe stops probing once it succeeds
			}
			w := newWorker(m, t, typ, p)
			m.workers[k] = w
			m.wg.Add(1)
			go func() {
				defer m.wg.Done()
				w.loop(ctx)
			}()
		}
	}
	for k, w := range m.workers {
		if w.target.PodUID == uid && !want[k] {
			w.stop()
			delete(m.workers, k)
			delete(m.results, k)
		}
	}
}

// RemovePod stops the workers of a pod and forgets its results.
func (m *Manager) RemovePod(uid types.UID) { m.Sync(context.Background(), uid, nil) }

// Wait waits for every worker to stop (after their context is cancelled).
func (m *Manager) Wait() { m.wg.Wait() }

// Ready reports whether a running container passes its readiness probe (a
// container without one is ready once started).
func (m *Manager) Ready(c *v1.Container, containerID string) bool {
	if !m.Started(c, containerID) {
		return false
	}
	if c.ReadinessProbe == nil {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.results[key{containerID, Readiness}]
	return ok && r == probe.Success
}

// Started reports whether a running container passed its startup probe (a
// container without one has started).
func (m *Manager) Started(c *v1.Container, containerID string) bool {
	if c.StartupProbe == nil {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.results[key{containerID, Startup}]
	return ok && r == probe.Success
}

// Unhealthy reports whether a container failed its liveness probe, or its
// startup probe, and must be killed, and which ("liveness", "startup").
func (m *Manager) Unhealthy(containerID string) (bool, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, typ := range []Type{Liveness, Startup} {
		if r, ok := m.results[key{containerID, typ}]; ok && r == probe.Failure {
			return true, typ.String()
		}
	}
	return false, ""
}

// set records a settled result; it reports whether it changed.
func (m *Manager) set(k key, r probe.Result) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	old, ok := m.results[k]
	m.results[k] = r
	return !ok || old != r
}

// worker probes one container with one probe.
type worker struct {
	m      *Manager
	target Target
	typ    Type
	spec   *v1.Probe
	done   chan struct{}
	once   sync.Once
	// now (cap 1) asks for a probe before the next tick: a readiness
	// worker's, when its container's startup probe succeeds, so that the
	// container becomes ready then, not up to a period later (as the
	// kubelet's manual trigger).
	now chan struct{}

	// owned by the worker's goroutine
	lastResult probe.Result
	run        int
	onHold     bool // liveness/startup failure reported: the container will be killed
}

func newWorker(m *Manager, t Target, typ Type, p *v1.Probe) *worker {
	return &worker{m: m, target: t, typ: typ, spec: p, done: make(chan struct{}), now: make(chan struct{}, 1), lastResult: -1}
}

func (w *worker) stop() { w.once.Do(func() { close(w.done) }) }

func (w *worker) period() time.Duration {
	if w.spec.PeriodSeconds > 0 {
		return time.Duration(w.spec.PeriodSeconds) * time.Second
	}
	return defaultPeriod * time.Second
}

func (w *worker) loop(ctx context.Context) {
	jitter := time.Duration(rand.Int64N(int64(min(w.period(), maxJitter))))
	select {
	case <-w.m.clock.After(jitter):
	case <-w.done:
		return
	case <-ctx.Done():
		return
	}
	ticker := w.m.clock.NewTicker(w.period())
	defer func() { ticker.Stop() }()
	for {
		select {
		case <-w.now: // asked for before this probe: this one answers it
		default:
		}
		if !w.probeOnce(ctx) {
			return
		}
		select {
		case <-ticker.C():
		case <-w.now:
			// The next periodic probe comes a period after this one, as
			// the kubelet's (it resets its ticker), not at the old tick.
			ticker.Stop()
			ticker = w.m.clock.NewTicker(w.period())
		case <-w.done:
			return
		case <-ctx.Done():
			return
		}
	}
}

// probeNow has the worker of the container's probe typ (if any) probe at
// once.
func (m *Manager) probeNow(containerID string, typ Type) {
	m.mu.Lock()
	w := m.workers[key{containerID, typ}]
	m.mu.Unlock()
	if w == nil {
		return
	}
	select {
	case w.now <- struct{}{}:
	default: // one is asked already
	}
}

// probeOnce runs the probe if it is due and applies the thresholds. It
// returns false when the worker has nothing more to do.
func (w *worker) probeOnce(ctx context.Context) bool {
	if w.onHold {
		return true
	}
	c := &w.target.Container
	// Liveness and readiness wait for the startup probe.
	if w.typ != Startup && !w.m.Started(c, w.target.ContainerID) {
		return true
	}
	if w.m.clock.Since(w.target.StartedAt) < time.Duration(w.spec.InitialDelaySeconds)*time.Second {
		return true
	}
	timeout := time.Duration(w.spec.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = defaultTimeout * time.Second
	}
	pctx, cancel := context.WithTimeout(ctx, timeout+time.Second)
	begin := w.m.clock.Now()
	result, out, err := w.m.run(pctx, w.target, w.spec)
	took := w.m.clock.Since(begin)
	cancel()
	if ctx.Err() != nil {
		return false
	}
	if err != nil {
		klog.V(1).Infof("Could not run the %s probe of %s container %s: %v", w.typ, w.target.PodKey, c.Name, err)
		result = probe.Failure
	}
	if w.m.observe != nil {
		w.m.observe(w.target, w.typ, result, out, took)
	}
	if result == probe.Warning {
		result = probe.Success // reported (observe), and otherwise a success
	}
	if result == w.lastResult {
		w.run++
	} else {
		w.lastResult, w.run = result, 1
	}
	failureThreshold, successThreshold := int(w.spec.FailureThreshold), int(w.spec.SuccessThreshold)
	if failureThreshold <= 0 {
		failureThreshold = defaultFailureThreshold
	}
	if successThreshold <= 0 {
		successThreshold = defaultSuccessThreshold
	}
	if (result == probe.Failure && w.run < failureThreshold) || (result == probe.Success && w.run < successThreshold) {
		return true
	}
	if w.m.set(key{w.target.ContainerID, w.typ}, result) {
		if result == probe.Failure {
			klog.Infof("Pod %s container %s: %s probe failed: %s", w.target.PodKey, c.Name, w.typ, probe.Truncate(out))
		} else {
			klog.V(1).Infof("Pod %s container %s: %s probe succeeded", w.target.PodKey, c.Name, w.typ)
		}
		w.m.onChange(w.target.PodUID)
	}
	switch {
	case w.typ == Startup && result == probe.Success:
		w.m.probeNow(w.target.ContainerID, Readiness)
		return false // started: the startup probe is done
	case w.typ != Readiness && result == probe.Failure:
		w.onHold = true // the container is about to be killed
	}
	return true
}

// runProbe carries out one probe of whichever mechanism it names.
func runProbe(ctx context.Context, hp *probehttp.Prober, execer probeexec.Execer, t Target, p *v1.Probe) (probe.Result, string, error) {
	timeout := time.Duration(p.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = defaultTimeout * time.Second
	}
	switch {
	case p.Exec != nil:
		return probeexec.Probe(ctx, execer, t.ContainerID, p.Exec.Command, timeout)
	case p.HTTPGet != nil:
		u, header, err := HTTPTarget(p.HTTPGet, &t.Container, t.PodIP)
		if err != nil {
			return probe.Failure, "", err
		}
		return hp.Probe(ctx, u, header, timeout)
	case p.TCPSocket != nil:
		port, err := ResolvePort(p.TCPSocket.Port, &t.Container)
		if err != nil {
			return probe.Failure, "", err
		}
		host := p.TCPSocket.Host
		if host == "" {
			host = t.PodIP
		}
		return probetcp.Probe(ctx, net.JoinHostPort(host, strconv.Itoa(port)), timeout)
	case p.GRPC != nil:
		service := ""
		if p.GRPC.Service != nil {
			service = *p.GRPC.Service
		}
		return probegrpc.Probe(ctx, net.JoinHostPort(t.PodIP, strconv.Itoa(int(p.GRPC.Port))), service, timeout)
	}
	return probe.Failure, "", fmt.Errorf("probe has no action")
}

// HTTPTarget builds the URL and header of an httpGet action (probe or hook)
// aimed at the pod IP unless the action names a host.
func HTTPTarget(a *v1.HTTPGetAction, c *v1.Container, podIP string) (*url.URL, http.Header, error) {
	port, err := ResolvePort(a.Port, c)
	if err != nil {
		return nil, nil, err
	}
	host := a.Host
	if host == "" {
		host = podIP
	}
	scheme := "http"
	if a.Scheme == v1.URISchemeHTTPS {
		scheme = "https"
	}
	path := a.Path
	if path == "" {
		path = "/"
	}
	u, err := url.Parse(fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(host, strconv.Itoa(port)), path))
	if err != nil {
		return nil, nil, err
	}
	header := http.Header{}
	for _, h := range a.HTTPHeaders {
		header.Add(h.Name, h.Value)
	}
	return u, header, nil
}

// ResolvePort turns a port number or a container port name into a number.
func ResolvePort(p intstr.IntOrString, c *v1.Container) (int, error) {
	if p.Type == intstr.Int {
		if p.IntVal < 1 || p.IntVal > 65535 {
			return 0, fmt.Errorf("invalid port %d", p.IntVal)
		}
		return int(p.IntVal), nil
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil && n > 0 && n < 65536 {
		return n, nil
	}
	return 0, fmt.Errorf("no container port named %q", p.StrVal)
}

// Len is the number of probe workers and kept results.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.workers) + len(m.results)
}
