package eviction

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestObserveMemory(t *testing.T) {
	meminfo := "MemTotal:        1024000 kB\nMemFree:          200000 kB\nMemAvailable:     600000 kB\n"
	for _, tc := range []struct {
		name  string
		v2    bool
		files map[string]string
		want  int64
	}{
		// v1: capacity - (usage - total_inactive_file).
		{"v1", false, map[string]string{
			"proc/meminfo":                        meminfo,
			"cgroup/memory/memory.usage_in_bytes": "524288000\n",
			"cgroup/memory/memory.stat":           "cache 1\ninactive_file 7\ntotal_inactive_file 104857600\n",
		}, 1024000<<10 - (524288000 - 104857600)},
		// v2: usage is MemTotal - MemFree; the root's memory.stat gives
		// inactive_file.
		{"v2", true, map[string]string{
			"proc/meminfo":       meminfo,
			"cgroup/memory.stat": "anon 5\ninactive_file 102400000\n",
		}, 1024000<<10 - ((1024000-200000)<<10 - 102400000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, root, tc.files)
			n := Node{Proc: filepath.Join(root, "proc"), CgroupMount: filepath.Join(root, "cgroup"), CgroupV2: tc.v2}
			obs, errs := n.Observe(map[Signal]bool{SignalMemoryAvailable: true})
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			if got := obs[SignalMemoryAvailable]; got.Available != tc.want || got.Capacity != 1024000<<10 {
				t.Errorf("got %+v, want available %d of %d", got, tc.want, 1024000<<10)
			}
		})
	}
}

func TestObserveMissingSignalIsLeftOut(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"proc/sys/kernel/pid_max":     "4194304\n",
		"proc/sys/kernel/threads-max": "1000\n",
		"proc/loadavg":                "0.1 0.2 0.3 2/300 12345\n",
	})
	n := Node{Proc: filepath.Join(root, "proc"), CgroupMount: filepath.Join(root, "none"), RootDir: root}
	obs, errs := n.Observe(map[Signal]bool{SignalMemoryAvailable: true, SignalPIDAvailable: true, SignalNodeFsAvailable: true})
	if len(errs) != 1 {
		t.Errorf("errors %v, want one (memory)", errs)
	}
	if _, ok := obs[SignalMemoryAvailable]; ok {
		t.Error("memory observed without its files")
	}
	if got := obs[SignalPIDAvailable]; got != (Observation{Available: 700, Capacity: 1000}) {
		t.Errorf("pids %+v, want 700 of threads-max 1000", got)
	}
	if _, ok := obs[SignalNodeFsInodesFree]; ok {
		t.Error("inodes observed though not asked for")
	}
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		t.Fatal(err)
	}
	if got := obs[SignalNodeFsAvailable]; got.Capacity != int64(st.Blocks)*int64(st.Bsize) || got.Available <= 0 {
		t.Errorf("nodefs %+v, want the capacity statfs gives", got)
	}
}
