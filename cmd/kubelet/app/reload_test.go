package app

import (
	"context"
	"testing"
	"time"

	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"

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

// A SIGHUP applies a new -v at once, through component-base's setter; any
// other logging change waits for a restart, and says so.
func TestReloadLogging(t *testing.T) {
	t.Cleanup(func() { _, _ = logs.GlogSetter("0") })
	cases := []struct {
		name        string
		change      func(c *logsapi.LoggingConfiguration)
		verbose     bool
		needRestart bool
	}{
		{"nothing changed", func(*logsapi.LoggingConfiguration) {}, false, false},
		{"verbosity", func(c *logsapi.LoggingConfiguration) { c.Verbosity = 4 }, true, false},
		{"format", func(c *logsapi.LoggingConfiguration) { c.Format = "json" }, false, true},
		{"verbosity and flush frequency", func(c *logsapi.LoggingConfiguration) {
			c.Verbosity = 4
			c.FlushFrequency.Duration.Duration = time.Second
		}, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _ = logs.GlogSetter("0")
			old := logsapi.NewLoggingConfiguration()
			next := old.DeepCopy()
			c.change(next)
			if got := reloadLogging(old, next); got != c.needRestart {
				t.Errorf("needs a restart: %t, want %t", got, c.needRestart)
			}
			if got := bool(klog.V(4).Enabled()); got != c.verbose {
				t.Errorf("-v 4 enabled: %t, want %t", got, c.verbose)
			}
			if c.verbose && old.Verbosity != 4 {
				t.Errorf("the running options keep verbosity %d", old.Verbosity)
			}
		})
	}
}
