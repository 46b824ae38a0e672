package kuberuntime

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/volumes"
)

// fakeHost is the Kubelet as the Manager sees it: no log settings, the
// warned image pull secrets remembered per pod.
type fakeHost struct {
	warned map[types.UID]string
}

func (h *fakeHost) ContainerLogs() ContainerLogs { return ContainerLogs{} }

func (h *fakeHost) WarnSecrets(uid types.UID, list string) bool {
	if h.warned[uid] == list {
		return false
	}
	h.warned[uid] = list
	return true
}

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
	host := &fakeHost{warned: map[types.UID]string{}}
	m := NewManager(cfg, Deps{Runtime: rt, Volumes: vols, Host: host})
	vols.Downward = m.Downward()
	return m
}
