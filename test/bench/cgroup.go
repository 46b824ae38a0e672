package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/cgroups"
)

// The root cgroup matters to the agent's idle cost: at each housekeeping of
// the root (every 10 to 30 s), cAdvisor (as in the kubelet) counts the open
// files and sockets of every process in it. Under systemd, the node the
// agent is made for, that is kernel threads alone: Docker's daemons and each
// container's shim are in docker.service and containerd.service. A machine
// without an init leaves them all in the root cgroup: at 250 pods some 1,000
// processes and 17,000 open files.

const cgroupRoot = "/sys/fs/cgroup"

// serviceCgroup is where dockerInServiceCgroup puts Docker's processes: one
// fixed name, so that a run stopped half-way leaves one cgroup that the next
// run reuses and empties.
const serviceCgroup = "classic-kubelet-bench-docker.service"

// rootHierarchies are the root cgroups of the hierarchies systemd places a
// service in: the unified one (cgroup v2), or with cgroup v1 the named
// systemd one and those of its default accounting (cpu, cpuacct, memory,
// pids). Not cpuset, where a new cgroup holds no CPU to run on.
func rootHierarchies() []string {
	if v2, err := cgroups.IsV2(cgroupRoot); err == nil && v2 {
		return []string{cgroupRoot}
	}
	var roots []string
	for _, h := range []string{"systemd", "cpu", "cpuacct", "memory", "pids"} {
		root := filepath.Join(cgroupRoot, h)
		if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err == nil {
			roots = append(roots, root)
		}
	}
	return roots
}

// readByCadvisor says root is the hierarchy cAdvisor lists a cgroup's
// processes from: the unified one, or cpu with cgroup v1.
func readByCadvisor(root string) bool { return root == cgroupRoot || filepath.Base(root) == "cpu" }

// rootCgroupProcesses is how many processes sit in the root cgroup that
// cAdvisor reads, or -1.
func rootCgroupProcesses() int {
	for _, r := range rootHierarchies() {
		if readByCadvisor(r) {
			return len(pids(filepath.Join(r, "cgroup.procs")))
		}
	}
	return -1
}

// dockerCommands are the names (/proc/<pid>/comm, 15 characters at most) of
// the processes Docker runs on a node.
var dockerCommands = map[string]bool{"dockerd": true, "containerd": true, "containerd-shim": true, "docker-proxy": true}

// dockerInServiceCgroup moves Docker's processes that sit in the root
// cgroup into a cgroup of their own in every hierarchy of rootHierarchies,
// as systemd's docker.service would hold them. It returns how many it
// moved and a func that moves every process of that cgroup (shims started
// meanwhile too) back to the root and removes it. The new cgroup has no
// limits: nothing but the processes' place changes.
func dockerInServiceCgroup() (moved int, restore func() error, err error) {
	roots := rootHierarchies()
	if len(roots) == 0 {
		return 0, nil, errors.New("no cgroup hierarchy found")
	}
	restore = func() error {
		var errs []error
		for _, r := range roots {
			dir := filepath.Join(r, serviceCgroup)
			for _, pid := range pids(filepath.Join(dir, "cgroup.procs")) {
				if err := os.WriteFile(filepath.Join(r, "cgroup.procs"), []byte(pid), 0o644); err != nil && !gone(pid) {
					errs = append(errs, fmt.Errorf("move %s back to %s: %w", pid, r, err))
				}
			}
			if err := os.Remove(dir); err != nil && !os.IsNotExist(err) {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	for _, r := range roots {
		dir := filepath.Join(r, serviceCgroup)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return 0, nil, errors.Join(err, restore())
		}
		for _, pid := range pids(filepath.Join(r, "cgroup.procs")) {
			comm, err := os.ReadFile(filepath.Join("/proc", pid, "comm"))
			if err != nil || !dockerCommands[strings.TrimSpace(string(comm))] {
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(pid), 0o644); err != nil && !gone(pid) {
				return 0, nil, errors.Join(fmt.Errorf("move %s to %s: %w", pid, dir, err), restore())
			}
			if readByCadvisor(r) {
				moved++
			}
		}
	}
	return moved, restore, nil
}

// pids reads a cgroup.procs file.
func pids(path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return strings.Fields(string(data))
}

// gone says a process has exited (a shim of a removed container).
func gone(pid string) bool {
	_, err := os.Stat(filepath.Join("/proc", pid))
	return os.IsNotExist(err)
}
