package cgroups

import (
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestUsage(t *testing.T) {
	files := func(root string, m map[string]string) {
		for name, data := range m {
			p := filepath.Join(root, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	pod := PodName(v1.PodQOSBestEffort, "u-1")
	for _, tc := range []struct {
		name      string
		cfg       Config
		files     map[string]string
		container string
		wantWS    int64
		wantPids  int64
	}{
		{"v1 cgroupfs pod", Config{Driver: DriverCgroupfs}, map[string]string{
			"memory/kubepods/besteffort/podu-1/memory.usage_in_bytes": "1000\n",
			"memory/kubepods/besteffort/podu-1/memory.stat":           "inactive_file 1\ntotal_inactive_file 300\n",
			"pids/kubepods/besteffort/podu-1/pids.current":            "7\n",
		}, "", 700, 7},
		{"v1 cgroupfs container", Config{Driver: DriverCgroupfs}, map[string]string{
			"memory/kubepods/besteffort/podu-1/abc/memory.usage_in_bytes": "500\n",
			"memory/kubepods/besteffort/podu-1/abc/memory.stat":           "total_inactive_file 600\n",
			"pids/kubepods/besteffort/podu-1/pids.current":                "1\n",
		}, "abc", 0, 1},
		{"v2 systemd container", Config{Driver: DriverSystemd, V2: true}, map[string]string{
			"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podu_1.slice/docker-abc.scope/memory.current": "2000\n",
			"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podu_1.slice/docker-abc.scope/memory.stat":    "anon 1\ninactive_file 500\n",
			"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-podu_1.slice/pids.current":                    "3\n",
		}, "abc", 1500, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Mount = t.TempDir()
			files(tc.cfg.Mount, tc.files)
			m, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if ws, err := m.MemoryWorkingSet(pod, tc.container); err != nil || ws != tc.wantWS {
				t.Errorf("working set %d, %v; want %d", ws, err, tc.wantWS)
			}
			if n, err := m.Processes(pod); err != nil || n != tc.wantPids {
				t.Errorf("processes %d, %v; want %d", n, err, tc.wantPids)
			}
			if _, err := m.MemoryWorkingSet(PodName(v1.PodQOSGuaranteed, "gone"), ""); err == nil {
				t.Error("no error for a missing cgroup")
			}
		})
	}
}
