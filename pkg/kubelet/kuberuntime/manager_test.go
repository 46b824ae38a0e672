package kuberuntime

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/volumes"
)

// fakeHost is the Kubelet as the Manager sees it: no log settings.
type fakeHost struct{}

func (h *fakeHost) ContainerLogs() ContainerLogs { return ContainerLogs{} }

func (h *fakeHost) Life() context.Context { return context.Background() }

// newTestManager is a Manager over rt (a fake runtime with no images if
// nil) and the pod directories under cfg.RootDir (a temporary one if
// empty).
func newTestManager(t *testing.T, cfg Config, rt kubecontainer.Runtime) *Manager {
	t.Helper()
	if cfg.RootDir == "" {
		cfg.RootDir = t.TempDir()
	}
	if rt == nil {
		rt = containertest.NewFakeClient()
	}
	vols := &volumes.Manager{RootDir: cfg.RootDir, NodeMemory: cfg.NodeMemory}
	host := &fakeHost{}
	m := NewManager(cfg, Deps{Runtime: rt, Volumes: vols, Host: host})
	vols.Downward = m.Downward()
	return m
}

// waitUntil waits up to 3 s for cond.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

// testRecords keeps each pod's record across a test's syncs, as the pod's
// worker keeps it, by Manager and pod UID.
var testRecords sync.Map

// recordOf is the pod's record under m, made at its first sync.
func recordOf(m *Manager, uid types.UID) *PodRecord {
	type key struct {
		m   *Manager
		uid types.UID
	}
	r, _ := testRecords.LoadOrStore(key{m, uid}, m.NewPodRecord())
	return r.(*PodRecord)
}
