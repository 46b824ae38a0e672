// Package cgroups owns the node's QoS and pod cgroups, as the kubelet lays
// them out: every pod's containers under kubepods/pod<uid> (Guaranteed),
// kubepods/burstable/pod<uid> or kubepods/besteffort/pod<uid>, the pod
// cgroup bounding the pod as a whole. The runtime creates the containers'
// own cgroups beneath (Docker's CgroupParent); this package creates, sizes
// and removes the levels above them, by writing the cgroup file system,
// for cgroup v1 and v2 and for Docker's cgroupfs and systemd drivers.
package cgroups

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Drivers: how the runtime names cgroups.
const (
	DriverCgroupfs = "cgroupfs"
	DriverSystemd  = "systemd"
)

// Name is a cgroup as its components below the root, e.g.
// {"kubepods", "burstable", "pod<uid>"}; each driver spells it its way.
type Name []string

// Top is the cgroup that holds every pod.
var Top = Name{"kubepods"}

// QoSName is the cgroup of a QoS class: Guaranteed pods sit directly in Top.
func QoSName(qos v1.PodQOSClass) Name {
	switch qos {
	case v1.PodQOSBurstable:
		return Name{"kubepods", "burstable"}
	case v1.PodQOSBestEffort:
		return Name{"kubepods", "besteffort"}
	}
	return Top
}

// PodName is the cgroup of a pod of class qos.
func PodName(qos v1.PodQOSClass, uid types.UID) Name {
	return append(append(Name{}, QoSName(qos)...), "pod"+string(uid))
}

// Resources are a cgroup's bounds. CPUShares is the cgroup v1 weight (v2's
// cpu.weight is derived from it); CPUQuota < 0, Memory 0 and Pids 0 mean
// unbounded.
type Resources struct {
	CPUShares uint64
	CPUQuota  int64 // microseconds per CPUPeriod
	CPUPeriod uint64
	Memory    int64 // bytes
	Pids      int64 // processes and threads (pids.max)
}

// Config says where and how cgroups are laid out.
type Config struct {
	Mount  string // the cgroup file system, /sys/fs/cgroup
	Driver string // DriverCgroupfs or DriverSystemd: the runtime's
	V2     bool   // the unified hierarchy
}

// Manager creates, sizes and removes QoS and pod cgroups. It keeps no
// state: the file system is the truth, so an agent restart finds the pod
// cgroups where it left them.
type Manager struct {
	cfg Config
}

// New returns a manager for cfg.
func New(cfg Config) (*Manager, error) {
	if cfg.Driver != DriverCgroupfs && cfg.Driver != DriverSystemd {
		return nil, fmt.Errorf("cgroup driver %q: want %s or %s", cfg.Driver, DriverCgroupfs, DriverSystemd)
	}
	if cfg.Mount == "" {
		cfg.Mount = "/sys/fs/cgroup"
	}
	return &Manager{cfg: cfg}, nil
}

// RuntimeParent is how the runtime is told to place a container under n
// (Docker's CgroupParent): the path for cgroupfs, the leaf slice's unit
// name for systemd (the runtime expands it to the slice path).
func (m *Manager) RuntimeParent(n Name) string {
	if m.cfg.Driver == DriverSystemd {
		return sliceName(n)
	}
	return "/" + strings.Join(n, "/")
}

// Path is n's path within a hierarchy, as /proc/<pid>/cgroup and cAdvisor
// name it.
func (m *Manager) Path(n Name) string {
	if m.cfg.Driver != DriverSystemd {
		return "/" + strings.Join(n, "/")
	}
	p := ""
	for i := range n {
		p += "/" + sliceName(n[:i+1])
	}
	return p
}

// sliceName is systemd's unit name of n: its components joined with '-',
// each with its '-' escaped as '_' (a pod UID's dashes), as the kubelet does.
func sliceName(n Name) string {
	parts := make([]string, len(n))
	for i, c := range n {
		parts[i] = strings.ReplaceAll(c, "-", "_")
	}
	return strings.Join(parts, "-") + ".slice"
}

// v1Sized are the cgroup v1 hierarchies a pod cgroup is created in and
// sized through; the runtime creates the pod's path in the others when it
// places a container there (cpuset needs its parent's CPUs copied, which
// runc does).
var v1Sized = []string{"cpu", "cpuacct", "memory", "pids"}

// dirs are n's directories: one per sized hierarchy (v1) or the one (v2).
func (m *Manager) dirs(n Name) []string {
	rel := filepath.FromSlash(m.Path(n))
	if m.cfg.V2 {
		return []string{filepath.Join(m.cfg.Mount, rel)}
	}
	out := make([]string, 0, len(v1Sized))
	for _, s := range v1Sized {
		out = append(out, filepath.Join(m.cfg.Mount, s, rel))
	}
	return out
}

// Ensure creates n (and its parents) if absent and sets r on it.
func (m *Manager) Ensure(n Name, r Resources) error {
	if m.cfg.V2 {
		// A controller is usable in a cgroup only when every ancestor
		// delegates it.
		for i := 0; i < len(n); i++ {
			if err := m.ensureDir(n[:i+1]); err != nil {
				return err
			}
		}
	} else if err := m.ensureDir(n); err != nil {
		return err
	}
	return m.set(n, r)
}

func (m *Manager) ensureDir(n Name) error {
	for _, d := range m.dirs(n) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create cgroup %s: %w", d, err)
		}
		if m.cfg.V2 {
			// Delegate to n's children (the containers) what it may use.
			parent := filepath.Dir(d)
			if err := enableControllers(parent); err != nil {
				return err
			}
		}
	}
	return nil
}

// enableControllers delegates cpu, memory and pids to dir's children, as
// far as dir has them.
func enableControllers(dir string) error {
	have, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("cgroup %s: %w", dir, err)
	}
	var enable []string
	for _, c := range strings.Fields(string(have)) {
		if c == "cpu" || c == "memory" || c == "pids" {
			enable = append(enable, "+"+c)
		}
	}
	if len(enable) == 0 {
		return nil
	}
	return write(dir, "cgroup.subtree_control", strings.Join(enable, " "))
}

// set writes r into n's files.
func (m *Manager) set(n Name, r Resources) error {
	rel := filepath.FromSlash(m.Path(n))
	if m.cfg.V2 {
		d := filepath.Join(m.cfg.Mount, rel)
		quota := "max"
		if r.CPUQuota > 0 {
			quota = strconv.FormatInt(r.CPUQuota, 10)
		}
		mem := "max"
		if r.Memory > 0 {
			mem = strconv.FormatInt(r.Memory, 10)
		}
		return errors.Join(
			write(d, "cpu.weight", strconv.FormatUint(SharesToWeight(r.CPUShares), 10)),
			write(d, "cpu.max", fmt.Sprintf("%s %d", quota, period(r))),
			write(d, "memory.max", mem),
			writePids(d, r),
		)
	}
	cpu := filepath.Join(m.cfg.Mount, "cpu", rel)
	memory := filepath.Join(m.cfg.Mount, "memory", rel)
	quota, mem := int64(-1), int64(-1)
	if r.CPUQuota > 0 {
		quota = r.CPUQuota
	}
	if r.Memory > 0 {
		mem = r.Memory
	}
	return errors.Join(
		write(cpu, "cpu.shares", strconv.FormatUint(r.CPUShares, 10)),
		write(cpu, "cpu.cfs_period_us", strconv.FormatUint(period(r), 10)),
		write(cpu, "cpu.cfs_quota_us", strconv.FormatInt(quota, 10)),
		write(memory, "memory.limit_in_bytes", strconv.FormatInt(mem, 10)),
		writePids(filepath.Join(m.cfg.Mount, "pids", rel), r),
	)
}

// pidsMax is r's pids.max: "max" (both versions' spelling) when unbounded.
// writePids writes r's bound on processes to pids.max. Unbounded, a host
// without the pids controller (on v2, one not delegated) is no error: there
// is nothing to write.
func writePids(dir string, r Resources) error {
	if r.Pids > 0 {
		return write(dir, "pids.max", strconv.FormatInt(r.Pids, 10))
	}
	if _, err := os.Stat(filepath.Join(dir, "pids.max")); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return write(dir, "pids.max", "max")
}

// defaultPeriod is the CFS period when r names none: 100 ms.
const defaultPeriod = 100000

func period(r Resources) uint64 {
	if r.CPUPeriod == 0 {
		return defaultPeriod
	}
	return r.CPUPeriod
}

// SharesToWeight converts cgroup v1 CPU shares (2..262144) to a cgroup v2
// cpu.weight (1..10000), the mapping the kubelet and runc use.
func SharesToWeight(shares uint64) uint64 {
	if shares == 0 {
		return 100 // v2's default weight
	}
	shares = min(max(shares, 2), 262144)
	return 1 + ((shares-2)*9999)/262142
}

func write(dir, file, value string) error {
	if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0o644); err != nil {
		return fmt.Errorf("cgroup %s: write %s: %w", dir, file, err)
	}
	return nil
}

// Remove removes n from every hierarchy it is in (the runtime may have
// created it in more than Ensure did). Its containers must be gone: a
// cgroup with processes or children cannot be removed, and the error says
// so. A cgroup already gone is not an error.
func (m *Manager) Remove(n Name) error {
	rel := filepath.FromSlash(m.Path(n))
	var dirs []string
	if m.cfg.V2 {
		dirs = []string{filepath.Join(m.cfg.Mount, rel)}
	} else {
		entries, err := os.ReadDir(m.cfg.Mount)
		if err != nil {
			return fmt.Errorf("cgroup hierarchies: %w", err)
		}
		for _, e := range entries {
			// Co-mounted hierarchies appear once as a directory and again
			// as links (cpu -> cpu,cpuacct): the directories suffice.
			if e.IsDir() && e.Type()&fs.ModeSymlink == 0 {
				dirs = append(dirs, filepath.Join(m.cfg.Mount, e.Name(), rel))
			}
		}
	}
	var errs []error
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// Exists reports whether n is present (in the memory hierarchy for v1).
func (m *Manager) Exists(n Name) bool {
	d := filepath.Join(m.cfg.Mount, filepath.FromSlash(m.Path(n)))
	if !m.cfg.V2 {
		d = filepath.Join(m.cfg.Mount, "memory", filepath.FromSlash(m.Path(n)))
	}
	_, err := os.Stat(d)
	return err == nil
}
