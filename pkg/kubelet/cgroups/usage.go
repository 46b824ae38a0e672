package cgroups

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// MemoryWorkingSet is the working set (usage minus inactive file pages,
// as the kubelet counts it) of n, or of the container with that ID
// beneath it (containerID "": n itself).
func (m *Manager) MemoryWorkingSet(n Name, containerID string) (int64, error) {
	dir := filepath.Join(m.cfg.Mount, filepath.FromSlash(m.Path(n)))
	if !m.cfg.V2 {
		dir = filepath.Join(m.cfg.Mount, "memory", filepath.FromSlash(m.Path(n)))
	}
	if containerID != "" {
		// Where the runtime puts a container under its CgroupParent.
		leaf := containerID
		if m.cfg.Driver == DriverSystemd {
			leaf = "docker-" + containerID + ".scope"
		}
		dir = filepath.Join(dir, leaf)
	}
	return WorkingSet(dir, m.cfg.V2)
}

// Processes is the number of tasks in n (pids.current).
func (m *Manager) Processes(n Name) (int64, error) {
	dir := filepath.Join(m.cfg.Mount, filepath.FromSlash(m.Path(n)))
	if !m.cfg.V2 {
		dir = filepath.Join(m.cfg.Mount, "pids", filepath.FromSlash(m.Path(n)))
	}
	return ReadInt(filepath.Join(dir, "pids.current"))
}

// MemoryWorkingSet is Manager.MemoryWorkingSet.
func (d *Detected) MemoryWorkingSet(n Name, containerID string) (int64, error) {
	m, err := d.manager()
	if err != nil {
		return 0, err
	}
	return m.MemoryWorkingSet(n, containerID)
}

// Processes is Manager.Processes.
func (d *Detected) Processes(n Name) (int64, error) {
	m, err := d.manager()
	if err != nil {
		return 0, err
	}
	return m.Processes(n)
}

// WorkingSet is the memory working set of the cgroup whose directory (in
// the memory hierarchy, for v1) is dir: its usage minus its inactive file
// pages, never below 0.
func WorkingSet(dir string, v2 bool) (int64, error) {
	usageFile, inactive := "memory.usage_in_bytes", "total_inactive_file"
	if v2 {
		usageFile, inactive = "memory.current", "inactive_file"
	}
	usage, err := ReadInt(filepath.Join(dir, usageFile))
	if err != nil {
		return 0, err
	}
	stat, err := ReadStat(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return 0, err
	}
	return max(usage-stat[inactive], 0), nil
}

// ReadStat reads a "key value" file such as memory.stat.
func ReadStat(path string) (map[string]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				out[k] = n
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// ReadInt reads a file holding one integer (a cgroup or /proc value).
func ReadInt(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}
