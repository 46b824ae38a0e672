package cadvisor

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/cgroups"
	docker "github.com/fsouza/go-dockerclient"
	cadvisorapi "github.com/google/cadvisor/info/v1"
)

// housekeepers counts cAdvisor's per-container housekeeping goroutines.
func housekeepers() int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "manager.(*containerData).housekeeping(")
}

// Against the real daemon: pods laid out as the agent does, a pod cgroup
// under kubepods with a container in it, made at once while cAdvisor's
// global housekeeping lists the cgroups every 100 ms (every minute in the
// agent) so that its listing meets nearly every creation. Once the pods are
// removed, every housekeeping goroutine they had is gone. Without
// createOnce, each container or pod cgroup created twice leaves one behind
// for good.
func TestCAdvisorHousekeepsEachContainerOnce(t *testing.T) {
	const endpoint = "unix:///var/run/docker.sock"
	const image = "classic-kubelet/pause:1" // make images
	client, err := docker.NewClient(endpoint)
	if err == nil {
		_, err = client.InspectImage(image)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Docker and %s are required under CI=true (make images): %v", image, err)
		}
		t.Skipf("no Docker or no %s (make images): %v", image, err)
	}
	old := flag.Lookup("global_housekeeping_interval").Value.String()
	if err := flag.Set("global_housekeeping_interval", "100ms"); err != nil {
		t.Fatal(err)
	}
	defer flag.Set("global_housekeeping_interval", old)

	c := New(endpoint, 10*time.Second, nil)
	if c.Err() != ErrStarting {
		t.Fatalf("a new client answers %v before cAdvisor has started, want ErrStarting", c.Err())
	}
	<-c.ready
	if c.Err() != nil {
		t.Fatal(c.Err())
	}
	defer c.Stop()
	cg := cgroupManager(t, client)
	// On a node where no agent has run yet the pods' parent, kubepods, is
	// made by the first pod and stays (the agent keeps it too), and with
	// it its one housekeeping goroutine.
	topMade := 0
	if !cg.Exists(cgroups.Top) {
		topMade = 1
	}
	before := settledHousekeepers(t)

	const n = 12
	pods := make([]cgroups.Name, n)
	ids := make([]string, 0, n)
	defer func() {
		for _, id := range ids {
			client.RemoveContainer(docker.RemoveContainerOptions{ID: id, Force: true})
		}
		for _, pod := range pods {
			cg.Remove(pod)
		}
	}()
	var wg sync.WaitGroup
	for i := range pods {
		pods[i] = append(cgroups.Top, fmt.Sprintf("pod-create-once-%d-%d", os.Getpid(), i))
		wg.Go(func() {
			if err := cg.Ensure(pods[i], cgroups.Resources{}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, pod := range pods {
		ctr, err := client.CreateContainer(docker.CreateContainerOptions{
			Config: &docker.Config{Image: image, Labels: map[string]string{
				"io.classic-kubelet.test": fmt.Sprintf("create-once-%d", os.Getpid())}},
			HostConfig: &docker.HostConfig{NetworkMode: "none", CgroupParent: cg.RuntimeParent(pod)},
		})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ctr.ID)
	}
	// The first start alone: go-dockerclient learns the server's API
	// version at a client's first start, unguarded.
	if err := client.StartContainer(ids[0], nil); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids[1:] {
		wg.Go(func() {
			if err := client.StartContainer(id, nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	req := &cadvisorapi.ContainerInfoRequest{NumStats: 1}
	tracked := poll(30*time.Second, func() bool {
		for i, id := range ids {
			if _, err := c.DockerContainer(id, req); err != nil {
				return false
			}
			if _, err := c.ContainerInfo(cg.Path(pods[i]), req); err != nil {
				return false
			}
		}
		return true
	})
	if !tracked {
		t.Fatal("timed out waiting for cAdvisor to track every pod cgroup and container")
	}
	during := housekeepers()
	for i, id := range ids {
		if err := client.RemoveContainer(docker.RemoveContainerOptions{ID: id, Force: true}); err != nil {
			t.Fatal(err)
		}
		if err := cg.Remove(pods[i]); err != nil {
			t.Fatal(err)
		}
	}
	want := before + topMade
	poll(30*time.Second, func() bool { return housekeepers() <= want })
	if after := housekeepers(); after != want {
		t.Fatalf("cAdvisor housekeeping goroutines: %d before (kubepods made by the test: %d), %d with %d pods, %d after their removal; want %d after",
			before, topMade, during, n, after, want)
	}
	t.Logf("housekeeping goroutines: %d before, %d with %d pods, back to %d", before, during, n, want)
}

// settledHousekeepers waits for cAdvisor's start-up creations to end (the
// count unchanged for a second; on a loaded machine they took longer than
// a second, and the count taken early was one short) and returns the count.
func settledHousekeepers(t *testing.T) int {
	n, same := housekeepers(), 0
	if !poll(20*time.Second, func() bool {
		if m := housekeepers(); m == n {
			same++
		} else {
			n, same = m, 0
		}
		return same > 10 // a second of samples after the first
	}) {
		t.Logf("cAdvisor's housekeeping goroutines still change after 20 s: %d", n)
	}
	return n
}

// cgroupManager lays pod cgroups out as the agent does on this node.
func cgroupManager(t *testing.T, client *docker.Client) *cgroups.Manager {
	t.Helper()
	info, err := client.Info()
	if err != nil {
		t.Fatal(err)
	}
	const mount = "/sys/fs/cgroup"
	v2, err := cgroups.IsV2(mount)
	if err != nil {
		t.Fatal(err)
	}
	m, err := cgroups.New(cgroups.Config{Mount: mount, Driver: info.CgroupDriver, V2: v2})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// poll checks ok every 100 ms until it holds (true) or d has passed
// (false). cAdvisor's goroutines follow the real daemon's containers and
// the host's cgroups, on its own timers: only looking again can tell, and
// a quiet second (settledHousekeepers) is measured in time.
func poll(d time.Duration, ok func() bool) bool {
	for deadline := time.Now().Add(d); !ok(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}
