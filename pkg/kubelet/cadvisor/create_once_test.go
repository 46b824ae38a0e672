package cadvisor

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/cadvisor/container"
)

// fakeFactory answers CanHandleAndAccept from answer, after gate (if set)
// is closed, and counts the calls that reach it; each call that waits at
// the gate is announced on atGate (if set).
type fakeFactory struct {
	name      string
	mu        sync.Mutex
	checks    map[string]int
	answer    func(name string) (bool, bool, error)
	gate      chan struct{}
	atGate    chan string
	handleErr error
}

func (f *fakeFactory) CanHandleAndAccept(name string) (bool, bool, error) {
	f.mu.Lock()
	f.checks[name]++
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		if f.atGate != nil {
			f.atGate <- name
		}
		<-gate
	}
	return f.answer(name)
}

func (f *fakeFactory) NewContainerHandler(string, []string, bool) (container.ContainerHandler, error) {
	if f.handleErr != nil {
		return nil, f.handleErr
	}
	return fakeHandler{from: f.name}, nil
}

func (f *fakeFactory) String() string                 { return f.name }
func (f *fakeFactory) DebugInfo() map[string][]string { return nil }
func (f *fakeFactory) calls(name string) int          { f.mu.Lock(); defer f.mu.Unlock(); return f.checks[name] }
func accepted(string) (bool, bool, error)             { return true, true, nil }
func ignored(string) (bool, bool, error)              { return true, false, nil }
func notDocker(string) (bool, bool, error)            { return false, false, nil }
func notRunning(string) (bool, bool, error)           { return false, true, errors.New("not running") }

type fakeHandler struct {
	container.ContainerHandler
	from string // the factory's name
}

func (fakeHandler) Start()   {}
func (fakeHandler) Cleanup() {}

// claimed is how many containers are being created or housekept.
func (f *createOnce) claimed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.claims)
}

// guard returns a createOnce in front of factories, asked in this order.
func guard(factories ...container.ContainerHandlerFactory) *createOnce {
	f := newCreateOnce()
	f.others = func() []container.ContainerHandlerFactory { return factories }
	return f
}

// create does what cAdvisor's createContainer does with a factory, up to
// its housekeeping's start; it returns the handler, nil if ignored.
func create(t *testing.T, f *createOnce, name string) container.ContainerHandler {
	t.Helper()
	handle, accept, err := f.CanHandleAndAccept(name)
	if !handle || !accept || err != nil {
		return nil
	}
	h, err := f.NewContainerHandler(name, nil, true)
	if err != nil {
		return nil
	}
	h.Start()
	return h
}

func TestCreateOnceIgnoresASecondCreationInProgress(t *testing.T) {
	inner := &fakeFactory{name: "docker", checks: map[string]int{}, answer: accepted, gate: make(chan struct{}), atGate: make(chan string, 2)}
	f := guard(inner)
	const name = "/docker/aaaa"

	first := make(chan container.ContainerHandler)
	go func() { first <- create(t, f, name) }()
	<-inner.atGate // the first creation waits in its inspect
	if handle, accept, err := f.CanHandleAndAccept(name); !handle || accept || err != nil {
		t.Fatalf("second creation during the first = %v, %v, %v; want handled but ignored", handle, accept, err)
	}
	if n := inner.calls(name); n != 1 {
		t.Fatalf("the Docker factory was asked %d times; want once", n)
	}
	close(inner.gate)
	h := <-first
	if h == nil {
		t.Fatal("the first creation was refused")
	}
	if handle, accept, _ := f.CanHandleAndAccept(name); !handle || accept {
		t.Fatalf("a creation while the container is housekept = %v, %v; want ignored", handle, accept)
	}
	h.Cleanup() // cAdvisor destroyed it: its housekeeping ended
	if f.claimed() != 0 {
		t.Fatalf("%d claims left after the housekeeping ended", f.claimed())
	}
	if create(t, f, name) == nil {
		t.Fatal("a container created again after its destruction was refused")
	}
}

func TestCreateOnceReleasesWhatItDoesNotCreate(t *testing.T) {
	for _, tc := range []struct {
		name      string
		answer    func(string) (bool, bool, error)
		handleErr error
	}{
		{name: "handled by none", answer: notDocker},
		{name: "ignored", answer: ignored},
		{name: "not running", answer: notRunning},
		{name: "handler failed", answer: accepted, handleErr: errors.New("inspect failed")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := &fakeFactory{name: "docker", checks: map[string]int{}, answer: tc.answer, handleErr: tc.handleErr}
			f := guard(inner)
			for range 2 {
				if create(t, f, "/kubepods/x") != nil {
					t.Fatal("created")
				}
			}
			// Nothing claimed: the second creation is asked about too.
			if n := inner.calls("/kubepods/x"); n != 2 {
				t.Fatalf("factory asked %d times by two creations; want 2", n)
			}
			if f.claimed() != 0 {
				t.Fatalf("%d claims left", f.claimed())
			}
		})
	}
}

func TestCreateOnceStaleClaim(t *testing.T) {
	inner := &fakeFactory{name: "docker", checks: map[string]int{}, answer: accepted}
	f := guard(inner)
	now := time.Now()
	f.now = func() time.Time { return now }

	// A creation that got its handler but never started housekeeping (it
	// failed in cAdvisor, which drops the handler without a Cleanup).
	if _, accept, _ := f.CanHandleAndAccept("/docker/bbbb"); !accept {
		t.Fatal("the first creation was refused")
	}
	if _, err := f.NewContainerHandler("/docker/bbbb", nil, true); err != nil {
		t.Fatal(err)
	}
	now = now.Add(staleClaim - time.Second)
	if _, accept, _ := f.CanHandleAndAccept("/docker/bbbb"); accept {
		t.Fatal("a claim younger than staleClaim was taken over")
	}
	now = now.Add(2 * time.Second)
	h := create(t, f, "/docker/bbbb")
	if h == nil {
		t.Fatal("a stale claim blocked the container's creation")
	}
	now = now.Add(time.Hour)
	if _, accept, _ := f.CanHandleAndAccept("/docker/bbbb"); accept {
		t.Fatal("a container housekept for an hour was created again")
	}
}

// The factories are asked in order; the first that handles a name makes
// its handler, whether or not others come after it.
func TestCreateOnceAsksTheFactoriesInOrder(t *testing.T) {
	for _, tc := range []struct {
		name       string
		dockerSays func(string) (bool, bool, error)
		rawSays    func(string) (bool, bool, error)
		want       string // the factory of the handler made; "" for none
	}{
		{name: "a Docker container", dockerSays: accepted, rawSays: accepted, want: "docker"},
		{name: "a pod's cgroup", dockerSays: notDocker, rawSays: accepted, want: "raw"},
		{name: "a stopped container's cgroup", dockerSays: notRunning, rawSays: accepted, want: "raw"},
		{name: "another cgroup", dockerSays: notDocker, rawSays: ignored, want: ""},
		{name: "ignored by Docker", dockerSays: ignored, rawSays: accepted, want: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakeFactory{name: "docker", checks: map[string]int{}, answer: tc.dockerSays}
			r := &fakeFactory{name: "raw", checks: map[string]int{}, answer: tc.rawSays}
			f := guard(d, r)
			h := create(t, f, "/kubepods/pod1")
			got := ""
			if h != nil {
				got = h.(*onceHandler).ContainerHandler.(fakeHandler).from
			}
			if got != tc.want {
				t.Fatalf("handler from %q; want %q", got, tc.want)
			}
			if want := map[bool]int{true: 1, false: 0}[got != ""]; f.claimed() != want {
				t.Fatalf("%d claims; want %d", f.claimed(), want)
			}
		})
	}
}
