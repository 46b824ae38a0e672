package app

import (
	"context"
	"testing"
	"time"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/gc"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/kuberuntime"
)

// A SIGHUP puts the new garbage collection and container log settings in
// force in the objects the parts were built with, and keeps them in o.
func TestReloadAppliesHousekeeping(t *testing.T) {
	o := NewOptions()
	a := &agent{gc: gc.NewSettings(gcPolicy(o)), logs: kuberuntime.NewLogSettings(containerLogs(o))}
	n := *o
	n.MaximumDeadContainers, n.MinimumContainerTTLDuration = 7, time.Hour
	n.ContainerLogDir, n.ContainerLogMaxSize, n.ContainerLogMaxFiles = t.TempDir(), "1Mi", 3
	srcs := &sourceSet{cancel: func() {}}
	if got := reload(context.Background(), o, func() (*Options, error) { return &n, nil }, a, nodeReport{}, srcs); got != srcs {
		t.Error("the sources were restarted, but no source setting changed")
	}
	if p := a.gc.Policy(); p.MaxTotal != 7 || p.MinAge != time.Hour {
		t.Errorf("GC policy %+v, want the reloaded one", p)
	}
	if l := a.logs.Get(); l.Dir != n.ContainerLogDir || l.MaxSize != 1<<20 || l.MaxFiles != 3 {
		t.Errorf("log settings %+v, want the reloaded ones", l)
	}
	if o.MaximumDeadContainers != 7 || o.ContainerLogDir != n.ContainerLogDir {
		t.Error("the options kept the settings before the reload")
	}
}
