package kubelet

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/gc"
)

// garbageCollect removes the dead containers the policy lets go, and log
// symlinks whose container is gone.
func (k *Kubelet) garbageCollect(ctx context.Context) {
	for _, c := range gc.DeadContainersToRemove(k.cache.All(), k.desired.get, k.gc.Policy(), time.Now()) {
		klog.V(2).Infof("GC: removing dead container %s", c.RuntimeName)
		if err := k.runtime.RemoveContainer(ctx, c); err != nil {
			klog.Errorf("GC: remove %s: %v", c.RuntimeName, err)
		}
	}
	k.logLinks.RemoveDangling()
	k.removeOrphanPodDirs(ctx)
	k.images.Collect(ctx)
}

// removeOrphanPodDirs removes the cgroups and directories of pods that are
// neither desired nor have containers (left by a crash between a pod's
// container removal and its directory's), unmounting what is mounted
// inside first (CSI volumes unpublished through their drivers).
func (k *Kubelet) removeOrphanPodDirs(ctx context.Context) {
	entries, err := os.ReadDir(filepath.Join(k.cfg.RootDir, "pods"))
	if err != nil {
		return
	}
	cached := k.cache.All()
	for _, e := range entries {
		uid := types.UID(e.Name())
		if !e.IsDir() || k.desired.get(uid) != nil || cached[uid] != nil || k.workers.Known(uid) {
			continue
		}
		if err := k.runtime.RemovePodCgroup(uid); err != nil {
			klog.Errorf("GC: orphaned pod cgroup: %v", err)
			continue
		}
		if err := k.volumes.RemovePodDir(ctx, uid); err != nil {
			klog.Errorf("GC: orphaned pod directory: %v", err)
		}
	}
}
