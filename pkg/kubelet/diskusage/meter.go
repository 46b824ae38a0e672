// Package diskusage measures in the background what the agent's pods hold
// on disk: their containers' writable layers and the images (as the runtime
// reports them), each container's log files and each pod's volumes, counted
// as du counts them.
package diskusage

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// Disk usage is measured in the background, never on a request: Docker
// walks every writable layer to answer, and the agent walks logs and
// volumes. Once in Meter.Period (default 5 minutes) keeps that cost small
// on a full node.
const (
	defaultPeriod = 5 * time.Minute
	firstAfter    = 5 * time.Second // after start, once the first pods run
	// volumeWalkBudget bounds the walk of one pod's volumes in time: a
	// container that makes millions of files must not make each
	// measurement long, nor take the other pods' turn. A walk that runs
	// out reports the bytes counted so far (a lower bound: the rest of the
	// tree is not guessed at) and logs it; the next measurement walks the
	// tree again from its top. 1e5 files take well under a second.
	volumeWalkBudget = 10 * time.Second
)

// Stats is one measurement of what the agent's pods hold on disk.
type Stats struct {
	Taken   time.Time
	Runtime *kubecontainer.DiskUsage
	Logs    map[string]int64    // bytes of each container's log files, by container ID
	Volumes map[types.UID]int64 // bytes in each pod's volumes (emptyDir, downward API)
}

// Runtime measures what the containers labelled label=value hold.
type Runtime interface {
	DiskUsage(ctx context.Context, label, value string) (*kubecontainer.DiskUsage, error)
}

// Pods are the pods on the node as last observed, by UID.
type Pods interface {
	All() map[types.UID]*kubecontainer.PodState
}

// Meter measures disk usage every Period while Run runs and keeps the last
// measurement. Its fields are set before Run and not changed after.
type Meter struct {
	Runtime Runtime
	Pods    Pods
	// Node is the owner label's value: only the agent's own containers
	// are measured.
	Node string
	// PodDir is a pod's directory; its volumes are under "volumes".
	PodDir func(types.UID) string
	// Period is how often disk usage is measured (default 5 minutes).
	Period time.Duration

	last atomic.Pointer[Stats]
}

// Last returns the last measurement (nil before the first).
func (m *Meter) Last() *Stats { return m.last.Load() }

// Run measures disk usage periodically until ctx ends.
func (m *Meter) Run(ctx context.Context) {
	t := time.NewTimer(firstAfter)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if st, err := m.measure(ctx); err != nil {
			klog.V(1).Infof("Disk usage: %v", err)
		} else {
			m.last.Store(st)
		}
		period := m.Period
		if period <= 0 {
			period = defaultPeriod
		}
		t.Reset(period)
	}
}

func (m *Meter) measure(ctx context.Context) (*Stats, error) {
	ru, err := m.Runtime.DiskUsage(ctx, kubecontainer.LabelOwner, m.Node)
	if err != nil {
		return nil, err
	}
	st := &Stats{Taken: time.Now(), Runtime: ru, Logs: map[string]int64{}, Volumes: map[types.UID]int64{}}
	for uid, pod := range m.Pods.All() {
		for _, c := range pod.Containers {
			if c.LogPath != "" {
				st.Logs[c.ID] = LogFilesSize(c.LogPath)
			}
		}
		wctx, cancel := context.WithTimeout(ctx, volumeWalkBudget)
		n, whole := DirBytes(wctx, filepath.Join(m.PodDir(uid), "volumes"))
		cancel()
		if !whole && ctx.Err() == nil {
			klog.Infof("Disk usage: the volumes of pod %s were not walked whole in %v; reporting the %d bytes counted", uid, volumeWalkBudget, n)
		}
		st.Volumes[uid] = n
	}
	return st, nil
}
