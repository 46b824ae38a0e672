package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/classic-kubelet/kubelet/test/etcdtest"
)

// samplePluginResource is what Kubernetes' sample device plugin serves:
// two devices, Dev-1 and Dev-2, each allocated as a bind mount of
// /tmp/<device> (a file it creates on the host).
const samplePluginResource = "example.com/resource"

// startSamplePlugin runs Kubernetes' sample device plugin against the
// agent's device-plugin directory. The plugin knows only the kubelet's
// path (/var/lib/kubelet/device-plugins): it runs in a mount namespace of
// its own where that path is the agent's directory, over a tmpfs on
// /var/lib, so the host's /var/lib is never touched. It is killed at
// cleanup.
func startSamplePlugin(t *testing.T, a *agent) {
	t.Helper()
	bin := builtTool(t, "ensure-sample-device-plugin.sh")
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skipf("unshare (util-linux) is needed to run the sample device plugin: %v", err)
	}
	dir := filepath.Join(a.rootDir, "device-plugins")
	script := `set -e; mount --make-rprivate /; mount -t tmpfs tmpfs /var/lib; mkdir -p /var/lib/kubelet/device-plugins
mount --bind "$DIR" /var/lib/kubelet/device-plugins; exec "$PLUGIN"`
	cmd := exec.Command("unshare", "--mount", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "DIR="+dir, "PLUGIN="+bin)
	logPath := filepath.Join(t.TempDir(), "plugin.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the sample device plugin: %v", err)
	}
	t.Cleanup(func() {
		// Killed: on SIGTERM the sample plugin logs a closed inotify
		// watch in a loop until it exits. unshare and sh exec it, so
		// the process is the plugin's.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
		// The files the plugin made for its devices (fixed names: one
		// such test runs at a time).
		for _, dev := range []string{"Dev-1", "Dev-2"} {
			_ = os.Remove(filepath.Join("/tmp", dev))
		}
		if t.Failed() {
			t.Logf("sample device plugin log:\n%s", tailFile(logPath, 30))
		}
	})
}

// podResources asks the agent's pod-resources API.
func podResources(t *testing.T, a *agent) (podresourcesapi.PodResourcesListerClient, func()) {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(a.rootDir, "pod-resources", "kubelet.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	return podresourcesapi.NewPodResourcesListerClient(conn), func() { _ = conn.Close() }
}

// containerDeviceIDs are the devices of resource a pod's container holds,
// as the pod-resources API lists them.
func containerDeviceIDs(ctx context.Context, c podresourcesapi.PodResourcesListerClient, pod, container, resource string) ([]string, error) {
	resp, err := c.List(ctx, &podresourcesapi.ListPodResourcesRequest{})
	if err != nil {
		return nil, err
	}
	for _, p := range resp.PodResources {
		if p.Name != pod {
			continue
		}
		for _, ct := range p.Containers {
			if ct.Name != container {
				continue
			}
			var ids []string
			for _, d := range ct.Devices {
				if d.ResourceName == resource {
					ids = append(ids, d.DeviceIds...)
				}
			}
			return ids, nil
		}
	}
	return nil, fmt.Errorf("pod %s container %s not listed", pod, container)
}

func devicePod(name string, count int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: default}
spec:
  containers:
  - name: app
    image: %s
    imagePullPolicy: IfNotPresent
    command: ["sleep", "3600"]
    resources:
      limits: {%s: %d}
`, name, testImage, samplePluginResource, count)
}

// Kubernetes' sample device plugin registers with the agent: the node
// reports its two devices (the Node object in etcd, the pod-resources
// API); a pod asking one runs with the mount the plugin's Allocate
// answered; a pod asking three is rejected as the kubelet rejects it
// (UnexpectedAdmissionError, the allocation's message); the pod-resources
// API lists the assignment; after a restart of the agent (the plugin
// registers again), the container still runs, unrestarted, with the same
// device, and a pod asking the device left gets it.
func TestDevicePluginSampleAllocatesAcrossRestart(t *testing.T) {
	t.Parallel()
	cluster := etcdtest.Start(t, 1)
	cl := cluster.Client()
	defer cl.Close()
	prefix := "/dev-" + cluster.Token
	a := startAgent(t, "--etcd-servers", strings.Join(cluster.Endpoints(), ","), "--etcd-prefix", prefix,
		"--node-lease-renew-interval", "1s")
	waitFor(t, 20*time.Second, func() (bool, string) {
		_, err := os.Stat(filepath.Join(a.rootDir, "device-plugins", "kubelet.sock"))
		return err == nil, fmt.Sprintf("no registration socket: %v", err)
	})
	startSamplePlugin(t, a)
	pr, closePR := podResources(t, a)
	defer closePR()
	ctx := context.Background()

	// Registered: two healthy devices, in the pod-resources API and in
	// the Node's capacity and allocatable.
	waitFor(t, 20*time.Second, func() (bool, string) {
		resp, err := pr.GetAllocatableResources(ctx, &podresourcesapi.AllocatableResourcesRequest{})
		if err != nil {
			return false, err.Error()
		}
		var ids []string
		for _, d := range resp.Devices {
			if d.ResourceName == samplePluginResource {
				ids = append(ids, d.DeviceIds...)
			}
		}
		return len(ids) == 2, fmt.Sprintf("allocatable devices %v, want Dev-1 and Dev-2", resp.Devices)
	})
	waitFor(t, 20*time.Second, func() (bool, string) {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		r, err := cl.Get(c, prefix+"/"+a.node+"/node")
		if err != nil || len(r.Kvs) == 0 {
			return false, fmt.Sprintf("no node key yet (%v)", err)
		}
		var n struct {
			Status struct{ Capacity, Allocatable map[string]string }
		}
		if err := json.Unmarshal(r.Kvs[0].Value, &n); err != nil {
			return false, err.Error()
		}
		return n.Status.Capacity[samplePluginResource] == "2" && n.Status.Allocatable[samplePluginResource] == "2",
			fmt.Sprintf("node capacity %v allocatable %v, want %s: 2", n.Status.Capacity, n.Status.Allocatable, samplePluginResource)
	})

	// One device: the container gets the plugin's mount.
	a.writeManifest("dev1.yaml", devicePod("dev1", 1))
	running := a.waitRunning("dev1", "app")
	id := running["app"].ID
	d := inspect(t, id)
	var mounted []string
	for _, m := range d.Mounts {
		if strings.HasPrefix(m.Source, "/tmp/Dev-") && m.Source == m.Destination {
			mounted = append(mounted, m.Source)
		}
	}
	if len(mounted) != 1 {
		t.Fatalf("container mounts %+v, want one /tmp/Dev-N from the plugin's Allocate", d.Mounts)
	}
	device := strings.TrimPrefix(mounted[0], "/tmp/")
	ids, err := containerDeviceIDs(ctx, pr, "dev1", "app", samplePluginResource)
	if err != nil || len(ids) != 1 || ids[0] != device {
		t.Fatalf("pod-resources lists dev1/app with %v (%v), want [%s]", ids, err, device)
	}

	// More than are free: rejected as the kubelet rejects it.
	a.writeManifest("dev3.yaml", devicePod("dev3", 3))
	want := fmt.Sprintf("Pod was rejected: Allocate failed due to requested number of devices unavailable for %s. Requested: 3, Available: 1, which is unexpected", samplePluginResource)
	waitFor(t, 20*time.Second, func() (bool, string) {
		var p struct {
			Status struct{ Phase, Reason, Message string }
		}
		code, body := httpGet(a.api(true) + "/pods/default/dev3")
		if code != 200 || json.Unmarshal([]byte(body), &p) != nil {
			return false, fmt.Sprintf("GET /pods/default/dev3: %d %s", code, body)
		}
		return p.Status.Phase == "Failed" && p.Status.Reason == "UnexpectedAdmissionError" && p.Status.Message == want,
			fmt.Sprintf("dev3 status %+v; want Failed, UnexpectedAdmissionError, %q", p.Status, want)
	})
	if cs := a.containers("dev3"); len(cs) != 0 {
		t.Errorf("dev3 has %d containers, want none", len(cs))
	}
	a.removeManifest("dev3.yaml")

	// Restart: the assignment is read back, the container kept.
	a.stop(syscall.SIGTERM)
	a.start()
	waitFor(t, 20*time.Second, func() (bool, string) {
		ids, err := containerDeviceIDs(ctx, pr, "dev1", "app", samplePluginResource)
		return err == nil && len(ids) == 1 && ids[0] == device, fmt.Sprintf("after the restart, dev1/app holds %v (%v), want [%s]", ids, err, device)
	})
	// The plugin sees the new registration socket and registers again
	// (the sample plugin waits 10 s first); until then the node lists no
	// healthy device. Then the device left goes to a new pod, not dev1's.
	waitFor(t, 30*time.Second, func() (bool, string) {
		resp, err := pr.GetAllocatableResources(ctx, &podresourcesapi.AllocatableResourcesRequest{})
		if err != nil {
			return false, err.Error()
		}
		return len(resp.Devices) == 1 && len(resp.Devices[0].DeviceIds) == 2, fmt.Sprintf("allocatable devices %v, want Dev-1 and Dev-2 again", resp.Devices)
	})
	a.writeManifest("dev1b.yaml", devicePod("dev1b", 1))
	a.waitRunningWithin(20*time.Second, "dev1b", "app")
	other, err := containerDeviceIDs(ctx, pr, "dev1b", "app", samplePluginResource)
	if err != nil || len(other) != 1 || other[0] == device {
		t.Errorf("dev1b holds %v (%v), want the device dev1 does not hold (%s)", other, err, device)
	}
	if now := a.running("dev1")["app"]; now.ID != id {
		t.Errorf("dev1's container is %q after the restart, want %q kept running", now.ID, id)
	}
	if _, err := os.Stat(filepath.Join(a.rootDir, "device-plugins", "kubelet_internal_checkpoint")); err != nil {
		t.Errorf("checkpoint: %v", err)
	}
}
