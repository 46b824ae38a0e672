package cgroups

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestNames(t *testing.T) {
	cases := []struct {
		driver, qos          string
		wantParent, wantPath string
	}{
		{DriverCgroupfs, "Guaranteed", "/kubepods/pod6f1c-42", "/kubepods/pod6f1c-42"},
		{DriverCgroupfs, "Burstable", "/kubepods/burstable/pod6f1c-42", "/kubepods/burstable/pod6f1c-42"},
		{DriverCgroupfs, "BestEffort", "/kubepods/besteffort/pod6f1c-42", "/kubepods/besteffort/pod6f1c-42"},
		{DriverSystemd, "Guaranteed", "kubepods-pod6f1c_42.slice", "/kubepods.slice/kubepods-pod6f1c_42.slice"},
		{DriverSystemd, "Burstable", "kubepods-burstable-pod6f1c_42.slice",
			"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6f1c_42.slice"},
		{DriverSystemd, "BestEffort", "kubepods-besteffort-pod6f1c_42.slice",
			"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod6f1c_42.slice"},
	}
	for _, c := range cases {
		m, err := New(Config{Driver: c.driver})
		if err != nil {
			t.Fatal(err)
		}
		n := PodName(v1.PodQOSClass(c.qos), "6f1c-42")
		if got := m.RuntimeParent(n); got != c.wantParent {
			t.Errorf("%s %s: runtime parent %q, want %q", c.driver, c.qos, got, c.wantParent)
		}
		if got := m.Path(n); got != c.wantPath {
			t.Errorf("%s %s: path %q, want %q", c.driver, c.qos, got, c.wantPath)
		}
	}
	if _, err := New(Config{Driver: "lxc"}); err == nil {
		t.Error("an unknown driver was accepted")
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(data))
}

// On a fake v1 hierarchy (directories stand for the kernel's): the pod
// cgroup is made in the sized hierarchies and given the bounds; removal
// takes it out of every hierarchy, the runtime's extra ones included.
func TestV1(t *testing.T) {
	mount := t.TempDir()
	for _, s := range []string{"cpu", "cpuacct", "memory", "pids", "cpuset", "blkio"} {
		if err := os.Mkdir(filepath.Join(mount, s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, driver := range []string{DriverCgroupfs, DriverSystemd} {
		m, _ := New(Config{Mount: mount, Driver: driver})
		n := PodName(v1.PodQOSBurstable, "u-1")
		if err := m.Ensure(n, Resources{CPUShares: 256, CPUQuota: 50000, CPUPeriod: 100000, Memory: 64 << 20, Pids: 100}); err != nil {
			t.Fatal(err)
		}
		rel := filepath.FromSlash(m.Path(n))
		for file, want := range map[string]string{
			"cpu/" + rel + "/cpu.shares":               "256",
			"cpu/" + rel + "/cpu.cfs_quota_us":         "50000",
			"cpu/" + rel + "/cpu.cfs_period_us":        "100000",
			"memory/" + rel + "/memory.limit_in_bytes": "67108864",
			"pids/" + rel + "/pids.max":                "100",
		} {
			if got := read(t, filepath.Join(mount, file)); got != want {
				t.Errorf("%s: %s = %q, want %q", driver, file, got, want)
			}
		}
		if !m.Exists(n) {
			t.Errorf("%s: Exists = false after Ensure", driver)
		}
		// Unbounded: -1, as the kernel spells it.
		if err := m.Ensure(n, Resources{CPUShares: 2, CPUQuota: -1}); err != nil {
			t.Fatal(err)
		}
		if q, l, p := read(t, filepath.Join(mount, "cpu", rel, "cpu.cfs_quota_us")), read(t, filepath.Join(mount, "memory", rel, "memory.limit_in_bytes")),
			read(t, filepath.Join(mount, "pids", rel, "pids.max")); q != "-1" || l != "-1" || p != "max" {
			t.Errorf("%s: unbounded quota %s, limit %s, pids %s; want -1, -1, max", driver, q, l, p)
		}

		// Removal: a real cgroup directory's files vanish with it; here the
		// test empties them first. The runtime made the path in cpuset too.
		if err := os.MkdirAll(filepath.Join(mount, "cpuset", rel), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, s := range v1Sized {
			entries, _ := os.ReadDir(filepath.Join(mount, s, rel))
			for _, e := range entries {
				os.Remove(filepath.Join(mount, s, rel, e.Name()))
			}
		}
		if err := m.Remove(n); err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"cpu", "memory", "cpuset"} {
			if _, err := os.Stat(filepath.Join(mount, s, rel)); !os.IsNotExist(err) {
				t.Errorf("%s: %s/%s still there after Remove", driver, s, rel)
			}
		}
		if m.Exists(n) {
			t.Errorf("%s: Exists after Remove", driver)
		}
		if err := m.Remove(n); err != nil {
			t.Errorf("%s: removing a removed cgroup: %v", driver, err)
		}
		if _, err := os.Stat(filepath.Join(mount, "cpu", filepath.Dir(rel))); err != nil {
			t.Errorf("%s: the QoS cgroup went with the pod's: %v", driver, err)
		}
	}
}

// On a fake v2 hierarchy: each level delegates cpu, memory and pids to the
// next, and the bounds are written in v2's files and units.
func TestV2(t *testing.T) {
	mount := t.TempDir()
	controllers := "cpuset cpu io memory hugetlb pids rdma misc"
	m, _ := New(Config{Mount: mount, Driver: DriverCgroupfs, V2: true})
	n := PodName(v1.PodQOSBurstable, "u1")
	// The kernel gives every new cgroup its cgroup.controllers; the fake
	// does it for the levels above the pod beforehand.
	for _, d := range []string{"", "kubepods", "kubepods/burstable"} {
		os.MkdirAll(filepath.Join(mount, d), 0o755)
		os.WriteFile(filepath.Join(mount, d, "cgroup.controllers"), []byte(controllers), 0o644)
	}
	if err := m.Ensure(n, Resources{CPUShares: 1024, CPUQuota: 150000, CPUPeriod: 100000, Memory: 1 << 30, Pids: 1000}); err != nil {
		t.Fatal(err)
	}
	pod := filepath.Join(mount, "kubepods/burstable/podu1")
	for file, want := range map[string]string{
		pod + "/cpu.weight": "39", pod + "/cpu.max": "150000 100000", pod + "/memory.max": "1073741824", pod + "/pids.max": "1000",
		mount + "/cgroup.subtree_control":                    "+cpu +memory +pids",
		mount + "/kubepods/cgroup.subtree_control":           "+cpu +memory +pids",
		mount + "/kubepods/burstable/cgroup.subtree_control": "+cpu +memory +pids",
	} {
		if got := read(t, file); got != want {
			t.Errorf("%s = %q, want %q", strings.TrimPrefix(file, mount), got, want)
		}
	}
	if err := m.Ensure(n, Resources{CPUShares: 2, CPUQuota: -1}); err != nil {
		t.Fatal(err)
	}
	if got := read(t, pod+"/cpu.max") + "," + read(t, pod+"/memory.max") + "," + read(t, pod+"/cpu.weight") + "," + read(t, pod+"/pids.max"); got != "max 100000,max,1,max" {
		t.Errorf("unbounded: %q", got)
	}
}

func TestSharesToWeight(t *testing.T) {
	for shares, want := range map[uint64]uint64{2: 1, 1024: 39, 262144: 10000, 1: 1, 1 << 30: 10000} {
		if got := SharesToWeight(shares); got != want {
			t.Errorf("SharesToWeight(%d) = %d, want %d", shares, got, want)
		}
	}
}

// pids.max: a bound is written; unbounded, "max" where the controller's
// file exists and nothing (no error) where it does not.
func TestWritePids(t *testing.T) {
	with, without := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(with, "pids.max"), []byte("100"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writePids(with, Resources{}); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(with, "pids.max")); string(data) != "max" {
		t.Errorf("unbounded with the file: %q, want max", data)
	}
	if err := writePids(without, Resources{}); err != nil {
		t.Errorf("unbounded without the controller: %v, want no error", err)
	}
	if err := writePids(without, Resources{Pids: 50}); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(filepath.Join(without, "pids.max")); string(data) != "50" {
		t.Errorf("bounded: %q, want 50", data)
	}
}
