package kubelet

import (
	"context"
	"io"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/nodeshutdown"
)

// busLogind is logind as the shutdown manager sees it, its
// PrepareForShutdown signals fed by the test.
type busLogind struct{ signals chan bool }

type nopLock struct{}

func (nopLock) Close() error { return nil }

func (busLogind) InhibitDelayMax(context.Context) (time.Duration, error)       { return time.Minute, nil }
func (busLogind) OverrideInhibitDelayMax(context.Context, time.Duration) error { return nil }
func (busLogind) InhibitShutdown(context.Context, string, string) (io.Closer, error) {
	return nopLock{}, nil
}
func (l busLogind) WatchShutdown(context.Context) (<-chan bool, error) { return l.signals, nil }
func (busLogind) Close() error                                         { return nil }

// The Kubelet with its graceful node shutdown: on PrepareForShutdown(true)
// its running pod is stopped through its worker (Failed, Terminated, the
// kubelet's message), the node reports it shuts down, and a pod given
// meanwhile is rejected as the kubelet's admission rejects it; the
// shutdown cancelled, the node no longer reports it.
func TestKubeletGracefulNodeShutdown(t *testing.T) {
	fake := containertest.NewFakeClient("pause:1", "img:1")
	bus := busLogind{signals: make(chan bool)}
	k, parts := newKubelet(t, fake, testOptions{Shutdown: func(pods nodeshutdown.Pods) *nodeshutdown.Manager {
		return nodeshutdown.New(nodeshutdown.Config{Table: nodeshutdown.Table(10*time.Second, 4*time.Second, nil), Node: "n"},
			nodeshutdown.Deps{Dial: func() (nodeshutdown.Logind, error) { return bus, nil }, Pods: pods})
	}})
	updates, stop := parts.run(k)
	defer stop()
	web := desiredPod("web", "img:1")
	updates <- api.PodUpdate{Op: api.ADD, Pods: []*v1.Pod{web}}
	waitUntil(t, func() bool { return len(fake.RunningNames()) == 2 })

	bus.signals <- true
	// The status is the kubelet's from the moment the pod is asked to
	// stop; its containers stop a moment later, on its worker.
	waitUntil(t, func() bool {
		st, _ := k.status.Get(web.UID)
		return st.Phase == v1.PodFailed && st.Reason == "Terminated" && st.Message == "Pod was terminated in response to imminent node shutdown."
	})
	waitUntil(t, func() bool { return len(fake.RunningNames()) == 0 })
	if err := k.ShutdownErr(); err == nil || err.Error() != "node is shutting down" {
		t.Errorf("ShutdownErr = %v, want the node shutting down", err)
	}
	late := desiredPod("late", "img:1")
	updates <- api.PodUpdate{Op: api.ADD, Pods: []*v1.Pod{late}}
	waitUntil(t, func() bool {
		st, _ := k.status.Get(late.UID)
		return st.Phase == v1.PodFailed && st.Reason == "NodeShutdown"
	})
	if st, _ := k.status.Get(late.UID); st.Message != "Pod was rejected: Pod was rejected as the node is shutting down." {
		t.Errorf("message %q", st.Message)
	}

	bus.signals <- false
	waitUntil(t, func() bool { return k.ShutdownErr() == nil })
}
