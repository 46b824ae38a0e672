package kubelet

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/golang/glog"
	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/dockertools"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// Disk usage is measured in the background, never on a request: Docker
// walks every writable layer to answer, and the agent walks logs and
// volumes. Once in Config.DiskUsagePeriod (default 5 minutes) keeps that
// cost small on a full node.
const (
	defaultDiskUsagePeriod = 5 * time.Minute
	diskUsageFirst         = 5 * time.Second // after start, once the first pods run
	// maxVolumeEntries bounds the walk of one pod's volumes: a container
	// that makes millions of files must not make each measurement long. A
	// pod past it is reported with what was counted.
	maxVolumeEntries = 100000
)

// DiskStats is the last measurement of what the agent's pods hold on disk.
type DiskStats struct {
	Taken   time.Time
	Runtime *kubecontainer.DiskUsage
	Logs    map[string]int64    // bytes of each container's log files, by container ID
	Volumes map[types.UID]int64 // bytes in each pod's volumes (emptyDir, downward API)
}

// DiskStats returns the last disk measurement (nil before the first).
func (k *Kubelet) DiskStats() *DiskStats { return k.disk.Load() }

// runDiskUsage measures disk usage periodically until ctx ends.
func (k *Kubelet) runDiskUsage(ctx context.Context) {
	t := time.NewTimer(diskUsageFirst)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if st, err := k.measureDisk(ctx); err != nil {
			glog.V(1).Infof("Disk usage: %v", err)
		} else {
			k.disk.Store(st)
		}
		period := k.cfg.DiskUsagePeriod
		if period <= 0 {
			period = defaultDiskUsagePeriod
		}
		t.Reset(period)
	}
}

func (k *Kubelet) measureDisk(ctx context.Context) (*DiskStats, error) {
	ru, err := k.docker.DiskUsage(ctx, dockertools.LabelOwner, k.cfg.NodeName)
	if err != nil {
		return nil, err
	}
	st := &DiskStats{Taken: time.Now(), Runtime: ru, Logs: map[string]int64{}, Volumes: map[types.UID]int64{}}
	for uid, pod := range k.cache.All() {
		for _, c := range pod.Containers {
			if c.LogPath != "" {
				st.Logs[c.ID] = logFilesSize(c.LogPath)
			}
		}
		st.Volumes[uid] = treeSize(filepath.Join(k.volumes.PodDir(uid), "volumes"), maxVolumeEntries)
	}
	return st, nil
}

// logFilesSize is the size of a container's log file and its rotated
// copies (<path>.1, ...).
func logFilesSize(path string) int64 {
	matches, _ := filepath.Glob(path + "*")
	var n int64
	for _, m := range matches {
		if fi, err := os.Lstat(m); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
	}
	return n
}

// treeSize adds up the regular files under dir, following no links and
// visiting at most limit entries.
func treeSize(dir string, limit int) int64 {
	var n int64
	seen := 0
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // gone or unreadable: count the rest
		}
		if seen++; seen > limit {
			return filepath.SkipAll
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
