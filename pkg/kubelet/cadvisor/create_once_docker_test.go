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

	docker "github.com/fsouza/go-dockerclient"
	cadvisorapi "github.com/google/cadvisor/info/v1"
)

// housekeepers counts cAdvisor's per-container housekeeping goroutines.
func housekeepers() int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "manager.(*containerData).housekeeping(")
}

// Against the real daemon: containers started at once, while cAdvisor's
// global housekeeping lists the cgroups every 100 ms (every minute in the
// agent) so that its listing meets nearly every start. Once the containers
// are removed, every housekeeping goroutine they had is gone. Without
// createOnce, each container created twice leaves one behind for good.
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

	c := New(endpoint, 10*time.Second)
	if c.Err() != nil {
		t.Fatal(c.Err())
	}
	defer c.Stop()
	time.Sleep(time.Second) // cAdvisor's start-up creations
	before := housekeepers()

	const n = 12
	ids := make([]string, 0, n)
	defer func() {
		for _, id := range ids {
			client.RemoveContainer(docker.RemoveContainerOptions{ID: id, Force: true})
		}
	}()
	for range n {
		ctr, err := client.CreateContainer(docker.CreateContainerOptions{
			Config: &docker.Config{Image: image, Labels: map[string]string{
				"io.classic-kubelet.test": fmt.Sprintf("create-once-%d", os.Getpid())}},
			HostConfig: &docker.HostConfig{NetworkMode: "none"},
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
	var wg sync.WaitGroup
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
	waitFor(t, 30*time.Second, "cAdvisor to track every container", func() bool {
		for _, id := range ids {
			if _, err := c.DockerContainer(id, &cadvisorapi.ContainerInfoRequest{NumStats: 1}); err != nil {
				return false
			}
		}
		return true
	})
	during := housekeepers()
	for _, id := range ids {
		if err := client.RemoveContainer(docker.RemoveContainerOptions{ID: id, Force: true}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for housekeepers() > before && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if after := housekeepers(); after != before {
		t.Fatalf("cAdvisor housekeeping goroutines: %d before, %d with %d containers, %d after their removal; want %d after",
			before, during, n, after, before)
	}
	t.Logf("housekeeping goroutines: %d before, %d with %d containers, back to %d", before, during, n, before)
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
