package cgroups

import (
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// IsV2 reports whether the cgroup file system at mount is the unified
// (v2) hierarchy.
func IsV2(mount string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(mount, &st); err != nil {
		return false, fmt.Errorf("cgroup file system %s: %w", mount, err)
	}
	return st.Type == unix.CGROUP2_SUPER_MAGIC, nil
}

// Detected is a Manager configured when first used: the cgroup driver is
// the runtime's, which may not answer yet when the agent starts. Until
// detect succeeds, every call that needs the file system fails (Exists
// says no), and detect is asked again on the next call.
type Detected struct {
	detect func() (Config, error)

	mu sync.Mutex
	m  *Manager // nil until detect succeeded
}

// NewDetected returns a Manager that asks detect for its configuration.
func NewDetected(detect func() (Config, error)) *Detected {
	return &Detected{detect: detect}
}

func (d *Detected) manager() (*Manager, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m != nil {
		return d.m, nil
	}
	cfg, err := d.detect()
	if err != nil {
		return nil, fmt.Errorf("cgroup driver: %w", err)
	}
	m, err := New(cfg)
	if err != nil {
		return nil, err
	}
	d.m = m
	return m, nil
}

// Ensure is Manager.Ensure.
func (d *Detected) Ensure(n Name, r Resources) error {
	m, err := d.manager()
	if err != nil {
		return err
	}
	return m.Ensure(n, r)
}

// Remove is Manager.Remove.
func (d *Detected) Remove(n Name) error {
	m, err := d.manager()
	if err != nil {
		return err
	}
	return m.Remove(n)
}

// Exists is Manager.Exists (false until the driver is known).
func (d *Detected) Exists(n Name) bool {
	m, err := d.manager()
	return err == nil && m.Exists(n)
}

// RuntimeParent is Manager.RuntimeParent; called only after Ensure
// succeeded, it spells cgroupfs paths until then.
func (d *Detected) RuntimeParent(n Name) string {
	m, err := d.manager()
	if err != nil {
		return (&Manager{cfg: Config{Driver: DriverCgroupfs}}).RuntimeParent(n)
	}
	return m.RuntimeParent(n)
}

// Path is Manager.Path, with the same fallback as RuntimeParent.
func (d *Detected) Path(n Name) string {
	m, err := d.manager()
	if err != nil {
		return (&Manager{cfg: Config{Driver: DriverCgroupfs}}).Path(n)
	}
	return m.Path(n)
}
