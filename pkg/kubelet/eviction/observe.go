package eviction

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/cgroups"
)

// Node says where the node's signals are read.
type Node struct {
	Proc        string // /proc
	CgroupMount string // /sys/fs/cgroup
	CgroupV2    bool
	RootDir     string // nodefs: the agent's --root-dir
	ImageFsDir  string // imagefs: Docker's root directory ("": unknown)
}

// Observe reads the signals in want. One that cannot be read is left out
// and its error returned with the others: its thresholds are not
// evaluated this round, the rest are.
func (n Node) Observe(want map[Signal]bool) (Observations, []error) {
	obs := Observations{}
	var errs []error
	add := func(s Signal, o Observation, err error) {
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", s, err))
		case o.Capacity == 0 && (s == SignalNodeFsInodesFree || s == SignalImageFsInodesFree):
			// A file system without an inode count (btrfs reports 0):
			// nothing to run out of.
		default:
			obs[s] = o
		}
	}
	if want[SignalMemoryAvailable] {
		o, err := n.memoryAvailable()
		add(SignalMemoryAvailable, o, err)
	}
	if want[SignalNodeFsAvailable] || want[SignalNodeFsInodesFree] {
		b, i, err := statfs(n.RootDir)
		add(SignalNodeFsAvailable, b, err)
		add(SignalNodeFsInodesFree, i, err)
	}
	if want[SignalImageFsAvailable] || want[SignalImageFsInodesFree] {
		dir := n.ImageFsDir
		if dir == "" {
			dir = n.RootDir // not known yet: taken to share nodefs
		}
		b, i, err := statfs(dir)
		add(SignalImageFsAvailable, b, err)
		add(SignalImageFsInodesFree, i, err)
	}
	if want[SignalPIDAvailable] {
		o, err := n.pidAvailable()
		add(SignalPIDAvailable, o, err)
	}
	for s := range obs {
		if !want[s] {
			delete(obs, s)
		}
	}
	return obs, errs
}

// memoryAvailable is the node's memory capacity minus the root cgroup's
// working set (usage minus inactive file pages), as the kubelet computes
// memory.available. cgroup v2 has no usage file at its root: the usage is
// then MemTotal - MemFree, as cAdvisor takes it.
func (n Node) memoryAvailable() (Observation, error) {
	mem, err := readMeminfo(filepath.Join(n.Proc, "meminfo"))
	if err != nil {
		return Observation{}, err
	}
	capacity := mem["MemTotal"] << 10
	var ws int64
	if n.CgroupV2 {
		stat, err := cgroups.ReadStat(filepath.Join(n.CgroupMount, "memory.stat"))
		if err != nil {
			return Observation{}, err
		}
		ws = max(capacity-mem["MemFree"]<<10-stat["inactive_file"], 0)
	} else if ws, err = cgroups.WorkingSet(filepath.Join(n.CgroupMount, "memory"), false); err != nil {
		return Observation{}, err
	}
	return Observation{Available: max(capacity-ws, 0), Capacity: capacity}, nil
}

// pidAvailable is the kernel's limit (the lower of pid_max and
// threads-max) minus the tasks that exist (/proc/loadavg's fourth field).
func (n Node) pidAvailable() (Observation, error) {
	limit, err := cgroups.ReadInt(filepath.Join(n.Proc, "sys", "kernel", "pid_max"))
	if err != nil {
		return Observation{}, err
	}
	if threads, err := cgroups.ReadInt(filepath.Join(n.Proc, "sys", "kernel", "threads-max")); err == nil && threads < limit {
		limit = threads
	}
	data, err := os.ReadFile(filepath.Join(n.Proc, "loadavg"))
	if err != nil {
		return Observation{}, err
	}
	fields := strings.Fields(string(data))
	if len(fields) < 4 {
		return Observation{}, fmt.Errorf("%s: %q: no task count", filepath.Join(n.Proc, "loadavg"), data)
	}
	_, total, _ := strings.Cut(fields[3], "/")
	used, err := strconv.ParseInt(total, 10, 64)
	if err != nil {
		return Observation{}, fmt.Errorf("loadavg: %w", err)
	}
	return Observation{Available: max(limit-used, 0), Capacity: limit}, nil
}

// statfs is a file system's free bytes (for unprivileged users, as df
// shows them) and free inodes.
func statfs(dir string) (bytes, inodes Observation, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return Observation{}, Observation{}, fmt.Errorf("statfs %s: %w", dir, err)
	}
	bs := int64(st.Bsize)
	return Observation{Available: int64(st.Bavail) * bs, Capacity: int64(st.Blocks) * bs},
		Observation{Available: int64(st.Ffree), Capacity: int64(st.Files)}, nil
}

// readMeminfo reads /proc/meminfo's "Key: value [kB]" lines.
func readMeminfo(path string) (map[string]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		if n, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
			out[strings.TrimSpace(k)] = n
		}
	}
	return out, sc.Err()
}
