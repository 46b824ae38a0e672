package kuberuntime

import (
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/volumes"
)

// newTestManager is a Manager over rt (a fake runtime with no images if
// nil) and the pod directories under cfg.RootDir (a temporary one if
// empty), with no log links.
func newTestManager(t *testing.T, cfg Config, rt kubecontainer.Runtime) *Manager {
	t.Helper()
	if cfg.RootDir == "" {
		cfg.RootDir = t.TempDir()
	}
	if rt == nil {
		rt = containertest.NewFakeClient()
	}
	downward := NewDownward(DownwardNode{Name: cfg.NodeName, IP: cfg.NodeIP, CPUs: 1, Memory: cfg.NodeMemory, RootDir: cfg.RootDir})
	vols := volumes.NewManager(volumes.Config{RootDir: cfg.RootDir, NodeMemory: cfg.NodeMemory}, volumes.Deps{Downward: downward})
	return NewManager(cfg, Deps{Runtime: rt, Volumes: vols, Downward: downward})
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
