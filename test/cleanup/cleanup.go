// Package cleanup removes what tests leave on the host besides containers.
package cleanup

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	docker "github.com/fsouza/go-dockerclient"
)

// PodCgroups removes the pod cgroups (every hierarchy, every QoS class) of
// the pods whose containers a test force-removed: the agent removes a pod
// cgroup only for pods it stopped itself. Docker may finish removing a
// container's own cgroup just after the removal returns, so an empty-to-be
// pod cgroup is retried for a moment.
func PodCgroups(uids map[string]bool) {
	var dirs []string
	for uid := range uids {
		if uid != "" {
			dirs = append(dirs, PodCgroupDirs(uid)...)
		}
	}
	deadline := time.Now().Add(2 * time.Second)
	for len(dirs) > 0 && time.Now().Before(deadline) {
		left := dirs[:0]
		for _, d := range dirs {
			if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
				left = append(left, d)
			}
		}
		dirs = left
		if len(dirs) > 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// PodDirUIDs returns the UIDs of the pods an agent with this --root-dir
// has a directory for. The agent makes a pod's directory before its cgroup
// and removes it after: an agent killed between a pod's cgroup and its first
// container, or between its last container's removal and its cgroup's,
// leaves a pod cgroup that no container label names.
func PodDirUIDs(rootDir string) map[string]bool {
	uids := map[string]bool{}
	entries, _ := os.ReadDir(filepath.Join(rootDir, "pods"))
	for _, e := range entries {
		if e.IsDir() {
			uids[e.Name()] = true
		}
	}
	return uids
}

// PodCgroupDirs lists the cgroup v1 directories of a pod's cgroup, in every
// hierarchy and QoS class it may be in.
func PodCgroupDirs(uid string) []string {
	var found []string
	for _, qos := range []string{"kubepods", "kubepods/burstable", "kubepods/besteffort"} {
		m, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", qos, "pod"+uid))
		found = append(found, m...)
	}
	return found
}

// NodeContainers force-removes every container carrying one node name's
// owner label (io.classic-kubelet.node), and their pod cgroups: exactly what
// the agent of that node made, never anything else on the daemon.
func NodeContainers(c *docker.Client, node string) {
	list, err := c.ListContainers(docker.ListContainersOptions{
		All:     true,
		Filters: map[string][]string{"label": {"io.classic-kubelet.node=" + node}},
	})
	if err != nil {
		return
	}
	uids := map[string]bool{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, parallelRemovals)
	for _, ct := range list {
		uids[ct.Labels["io.kubernetes.pod.uid"]] = true
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_ = c.RemoveContainer(docker.RemoveContainerOptions{ID: ct.ID, Force: true, RemoveVolumes: true})
		})
	}
	wg.Wait()
	PodCgroups(uids)
}

// parallelRemovals bounds the removals at once: a removal mostly waits (the
// kill, the unmount), so a test's hundreds go faster side by side.
const parallelRemovals = 8

// UnmountUnder detaches every mount below dir, and dir itself if it is one
// (the tmpfs volumes and subPath binds of pods an agent left running),
// deepest first.
func UnmountUnder(dir string) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return
	}
	var mounts []string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 5 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			mounts = append(mounts, fields[4])
		}
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	for _, m := range mounts {
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
}
