package dockertools

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

func TestParseProcStatus(t *testing.T) {
	const head = "Name:\tsleep\nUmask:\t0022\nState:\tS (sleeping)\n"
	for _, tc := range []struct {
		name, status string
		want         *kubecontainer.ContainerUser
	}{
		{"root in busybox", head + "Uid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t0 10 \n",
			&kubecontainer.ContainerUser{UID: 0, GID: 0, SupplementalGroups: []int64{0, 10}}},
		{"runAsUser, runAsGroup, supplementalGroups", head + "Uid:\t1000\t1000\t1000\t1000\nGid:\t3000\t3000\t3000\t3000\nGroups:\t4000 50000 \n",
			&kubecontainer.ContainerUser{UID: 1000, GID: 3000, SupplementalGroups: []int64{3000, 4000, 50000}}},
		{"no groups", head + "Uid:\t65534\t65534\t65534\t65534\nGid:\t65534\t65534\t65534\t65534\nGroups:\t\n",
			&kubecontainer.ContainerUser{UID: 65534, GID: 65534, SupplementalGroups: []int64{65534}}},
		{"truncated", head + "Uid:\t0\t0\t0\t0\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcStatus(strings.NewReader(tc.status))
			if tc.want == nil {
				if err == nil {
					t.Errorf("parsed %+v, want an error", got)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parseProcStatus = %+v %v, want %+v", got, err, tc.want)
			}
		})
	}
}

// The process is the container's only where its cgroup names the
// container: a PID of another namespace's daemon is some other process.
func TestProcessUserChecksTheCgroup(t *testing.T) {
	root := t.TempDir()
	old := procRoot
	procRoot = root
	t.Cleanup(func() { procRoot = old })
	const id = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	write := func(pid, cgroup string) {
		dir := filepath.Join(root, pid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		_ = os.WriteFile(filepath.Join(dir, "cgroup"), []byte(cgroup), 0o644)
		_ = os.WriteFile(filepath.Join(dir, "status"), []byte("Uid:\t7\t7\t7\t7\nGid:\t8\t8\t8\t8\nGroups:\t9\n"), 0o644)
	}
	write("100", "0::/system.slice/docker-"+id+".scope\n")
	write("200", "0::/user.slice/session-1.scope\n")
	for _, tc := range []struct {
		name string
		pid  int
		want *kubecontainer.ContainerUser
	}{
		{"the container's", 100, &kubecontainer.ContainerUser{UID: 7, GID: 8, SupplementalGroups: []int64{8, 9}}},
		{"another process", 200, nil},
		{"no such process", 300, nil},
		{"no pid", 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := processUser(id, tc.pid); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("processUser(pid %d) = %+v, want %+v", tc.pid, got, tc.want)
			}
		})
	}
}
