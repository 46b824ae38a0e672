package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/classic-kubelet/kubelet/test/cleanup"
)

const cgroupMount = "/sys/fs/cgroup"

// readCgroup reads one file of a v1 hierarchy ("" if absent).
func readCgroup(hierarchy, path, file string) string {
	data, err := os.ReadFile(filepath.Join(cgroupMount, hierarchy, path, file))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

func requireCgroupV1(t *testing.T) {
	t.Helper()
	info, err := dockerc.Info()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cgroupMount, "memory")); err != nil || info.CgroupDriver != "cgroupfs" {
		// cgroup v2 and the systemd driver are covered by the unit tests
		// of pkg/kubelet/cgroups on fake hierarchies.
		t.Skipf("this test reads cgroup v1 with Docker's cgroupfs driver; Docker has %q", info.CgroupDriver)
	}
}

// Each pod's containers are in its pod cgroup under its QoS class, sized as
// the kubelet sizes it; pod-level resources bound the pod as a whole; the
// summary's pod totals come from the pod cgroup; the cgroups go with the
// pods, from every hierarchy.
func TestPodCgroups(t *testing.T) {
	requireCgroupV1(t)
	a := startAgent(t)
	pod := func(name, spec string) string {
		return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: %s}\nspec:\n  terminationGracePeriodSeconds: 1\n%s", name, spec)
	}
	c := func(name, res string) string {
		return fmt.Sprintf("  - {name: %s, image: %s, imagePullPolicy: Never, command: [sleep, '100000']%s}\n", name, testImage, res)
	}
	a.writeManifest("gua.yaml", pod("gua", "  containers:\n"+c("a", ", resources: {limits: {cpu: 500m, memory: 64Mi}}")+c("b", ", resources: {limits: {cpu: 250m, memory: 32Mi}}")))
	a.writeManifest("bur.yaml", pod("bur", "  containers:\n"+c("a", ", resources: {requests: {cpu: 100m}, limits: {memory: 64Mi}}")))
	a.writeManifest("be.yaml", pod("be", "  containers:\n"+c("a", "")))
	// An init container leaves 32 MiB of page cache in the pod cgroup: the
	// pod's memory, though no running container holds it.
	a.writeManifest("cache.yaml", pod("cache", `  volumes: [{name: d, emptyDir: {}}]
  initContainers:
  - {name: fill, image: `+testImage+`, imagePullPolicy: Never, command: [sh, -c, 'dd if=/dev/zero of=/d/f bs=1M count=32'], volumeMounts: [{name: d, mountPath: /d}]}
  containers:
`+c("a", ", volumeMounts: [{name: d, mountPath: /d}]")))
	// Pod-level limits bound containers that have none: 100 MiB held in
	// memory is killed at 48 MiB.
	a.writeManifest("podlevel.yaml", pod("podlevel", `  restartPolicy: Never
  resources: {limits: {cpu: '1', memory: 48Mi}}
  containers:
  - {name: hog, image: `+testImage+`, imagePullPolicy: Never, command: [awk, 'BEGIN{s=sprintf("%100000000s","x"); print length(s)}']}
`))

	type want struct {
		parent                string
		shares, quota, memory string
	}
	wants := map[string]want{
		"gua":   {"/kubepods/pod%s", "768", "75000", "100663296"},
		"bur":   {"/kubepods/burstable/pod%s", "102", "-1", "67108864"},
		"be":    {"/kubepods/besteffort/pod%s", "2", "-1", ""},
		"cache": {"/kubepods/besteffort/pod%s", "2", "-1", ""},
	}
	uids := map[string]string{}
	for name, w := range wants {
		names := []string{"a"}
		if name == "gua" {
			names = append(names, "b")
		}
		running := a.waitRunning(name, names...)
		d := inspect(t, running["a"].ID)
		uid := d.Config.Labels["io.kubernetes.pod.uid"]
		uids[name] = uid
		path := fmt.Sprintf(w.parent, uid)
		if d.HostConfig.CgroupParent != path {
			t.Errorf("%s: CgroupParent %q, want %q", name, d.HostConfig.CgroupParent, path)
		}
		if infra := inspect(t, running["POD"].ID); infra.HostConfig.CgroupParent != path {
			t.Errorf("%s: infra CgroupParent %q, want %q", name, infra.HostConfig.CgroupParent, path)
		}
		procs, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", d.State.Pid))
		if !strings.Contains(string(procs), ":memory:"+path+"/"+d.ID) {
			t.Errorf("%s: the container's process is not in %s:\n%s", name, path, procs)
		}
		if got := readCgroup("cpu", path, "cpu.shares"); got != w.shares {
			t.Errorf("%s: pod cpu.shares %q, want %s", name, got, w.shares)
		}
		if got := readCgroup("cpu", path, "cpu.cfs_quota_us"); got != w.quota {
			t.Errorf("%s: pod cpu.cfs_quota_us %q, want %s", name, got, w.quota)
		}
		if got := readCgroup("memory", path, "memory.limit_in_bytes"); w.memory != "" && got != w.memory {
			t.Errorf("%s: pod memory.limit_in_bytes %q, want %s", name, got, w.memory)
		}
	}
	// Burstable's weight is the sum of its pods' requests (set by
	// housekeeping, every 2 s).
	waitFor(t, 10*time.Second, func() (bool, string) {
		got := readCgroup("cpu", "/kubepods/burstable", "cpu.shares")
		return got == "102", "kubepods/burstable cpu.shares " + got
	})

	waitFor(t, 60*time.Second, func() (bool, string) {
		st := a.status("podlevel")
		if len(st.ContainerStatuses) == 1 && st.ContainerStatuses[0].State.Terminated != nil {
			return true, ""
		}
		return false, fmt.Sprintf("podlevel: %+v", st)
	})
	if st := a.status("podlevel"); st.ContainerStatuses[0].State.Terminated.ExitCode != 137 || st.Phase != "Failed" {
		t.Errorf("a container holding 100 MiB in a pod limited to 48 MiB: exit %d, phase %s; want 137 (killed), Failed",
			st.ContainerStatuses[0].State.Terminated.ExitCode, st.Phase)
	}

	// The summary's pod memory is the pod cgroup's: the init container's
	// page cache counts.
	waitFor(t, 30*time.Second, func() (bool, string) {
		_, body := httpGet(a.api(true) + "/stats/summary")
		var s struct {
			Pods []struct {
				PodRef struct{ Name string } `json:"podRef"`
				Memory *struct {
					UsageBytes uint64 `json:"usageBytes"`
				} `json:"memory"`
				Containers []struct {
					Memory *struct {
						UsageBytes uint64 `json:"usageBytes"`
					} `json:"memory"`
				} `json:"containers"`
			} `json:"pods"`
		}
		_ = json.Unmarshal([]byte(body), &s)
		for _, p := range s.Pods {
			if p.PodRef.Name == "cache" && p.Memory != nil && len(p.Containers) == 1 && p.Containers[0].Memory != nil {
				return p.Memory.UsageBytes >= 30<<20 && p.Containers[0].Memory.UsageBytes < 30<<20,
					fmt.Sprintf("pod memory %d, its container's %d; want the pod ≥ 30 MiB (the init container's page cache)", p.Memory.UsageBytes, p.Containers[0].Memory.UsageBytes)
			}
		}
		return false, "no stats of pod cache yet"
	})

	for _, f := range []string{"gua.yaml", "bur.yaml", "be.yaml", "cache.yaml"} {
		a.removeManifest(f)
	}
	for name, uid := range uids {
		waitFor(t, 30*time.Second, func() (bool, string) {
			left := cleanup.PodCgroupDirs(uid)
			return len(left) == 0, fmt.Sprintf("pod %s's cgroup left in %v", name, left)
		})
	}
}

// An agent that starts making pod cgroups adopts the containers it ran
// without them where they are: none restarts.
func TestPodCgroupsAdoptContainersWhereTheyAre(t *testing.T) {
	t.Parallel()
	requireCgroupV1(t)
	a := startAgent(t, "--cgroups-per-qos=false")
	a.writeManifest("pod.yaml", twoContainerPod("old", "x"))
	before := a.waitRunning("old", "server", "sidecar")
	if p := inspect(t, before["server"].ID).HostConfig.CgroupParent; p != "" {
		t.Fatalf("--cgroups-per-qos=false: CgroupParent %q", p)
	}
	a.stop(syscall.SIGTERM)
	a.extraArgs = nil
	a.start()
	a.waitRounds(4)
	after := a.running("old")
	for name, c := range before {
		if after[name].ID != c.ID {
			t.Errorf("%s was replaced (%s -> %s) when pod cgroups were turned on", name, c.ID[:12], after[name].ID[:12])
		}
	}
}
