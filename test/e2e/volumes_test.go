package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// hostPath volumes of type Socket, CharDevice and BlockDevice run (before:
// refused at validation, the whole pod invalid); a path of the wrong type
// is a FailedMount with the kubelet's message and is retried, and the pod
// starts once the socket is there.
func TestHostPathSocketAndDevices(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "--backoff-initial", "1s", "--backoff-max", "2s")
	sock := filepath.Join(t.TempDir(), "app.sock")
	if err := os.WriteFile(sock, nil, 0o644); err != nil { // not a socket yet
		t.Fatal(err)
	}
	vols := fmt.Sprintf(`  - {name: sock, hostPath: {path: %s, type: Socket}}
  - {name: devnull, hostPath: {path: /dev/null, type: CharDevice}}
`, sock)
	mounts := "[{name: sock, mountPath: /run/app.sock}, {name: devnull, mountPath: /host/null}"
	check := "test -S /run/app.sock && test -c /host/null"
	if blk := blockDevice(); blk != "" {
		vols += fmt.Sprintf("  - {name: blk, hostPath: {path: %s, type: BlockDevice}}\n", blk)
		mounts += ", {name: blk, mountPath: /host/blk}"
		check += " && test -b /host/blk"
	} else {
		t.Log("no block device on this machine: the BlockDevice volume is left out")
	}
	a.writeManifest("devices.yaml", lifecyclePod("devices", "Always", `  volumes:
`+vols+`  containers:
  - name: app
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: `+sleeper+`
    volumeMounts: `+mounts+`]
`))
	// As the kubelet's: the container waits in ContainerCreating, the
	// reason is the pod's FailedMount event.
	want := "hostPath type check failed: " + sock + " is not a socket file, it's a File"
	waitFor(t, 20*time.Second, func() (bool, string) {
		reason, _ := a.waitingReason("devices", "app")
		for _, e := range a.events("devices") {
			if e.Reason == "FailedMount" && strings.Contains(e.Message, want) {
				return reason == "ContainerCreating", fmt.Sprintf("waiting %q, want ContainerCreating", reason)
			}
		}
		return false, fmt.Sprintf("no FailedMount event %q", want)
	})
	if n := len(a.containers("devices")); n != 0 {
		t.Errorf("%d containers made for a pod whose volume is not set up", n)
	}
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	a.waitRunning("devices", "app")
	if code, out := a.execIn("devices", "app", "sh", "-c", check); code != 0 {
		t.Errorf("%s: exit %d %s", check, code, out)
	}
}

// A volume that cannot be set up makes the kubelet's Warning FailedMount
// event about the pod, its retries folded into the event's count (before:
// no event, only a waiting reason and a log line).
func TestFailedMountEvent(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "--backoff-initial", "1s", "--backoff-max", "1s")
	missing := filepath.Join(t.TempDir(), "missing")
	a.writeManifest("nomount.yaml", lifecyclePod("nomount", "Always", `  volumes: [{name: data, hostPath: {path: `+missing+`, type: Directory}}]
  containers:
  - name: app
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: `+sleeper+`
    volumeMounts: [{name: data, mountPath: /data}]
`))
	want := `MountVolume.SetUp failed for volume "data" : hostPath ` + missing + ` doesn't exist`
	waitFor(t, 30*time.Second, func() (bool, string) {
		var mounts []eventJSON
		for _, e := range a.events("nomount") {
			if e.Reason == "FailedMount" {
				mounts = append(mounts, e)
			}
		}
		if len(mounts) != 1 {
			return false, fmt.Sprintf("%d FailedMount events, want one: %+v", len(mounts), mounts)
		}
		e := mounts[0]
		return e.Type == "Warning" && e.Message == want && e.Count >= 3,
			fmt.Sprintf("event %s %q count %d, want a Warning %q counted at least 3 times", e.Type, e.Message, e.Count, want)
	})
}

// blockDevice is a block device of this machine, or "".
func blockDevice() string {
	for _, p := range []string{"/dev/loop0", "/dev/vda", "/dev/sda", "/dev/nvme0n1"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0 {
			return p
		}
	}
	return ""
}

// A Memory emptyDir whose sizeLimit is past any node (1e30) is sized to the
// node's memory, as the kubelet sizes it (before: it waited in FailedMount,
// "the node's memory is unknown").
func TestMemoryEmptyDirHugeSizeLimit(t *testing.T) {
	t.Parallel()
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		t.Fatal(err)
	}
	pages := (int64(si.Totalram)*int64(si.Unit) + 4095) / 4096 // tmpfs rounds its size up to pages
	a := startAgent(t)
	a.writeManifest("memhuge.yaml", lifecyclePod("memhuge", "Always", `  volumes: [{name: cache, emptyDir: {medium: Memory, sizeLimit: 1e30}}]
  containers:
  - name: app
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: `+sleeper+`
    volumeMounts: [{name: cache, mountPath: /cache}]
`))
	waitFor(t, 20*time.Second, func() (bool, string) {
		reason, msg := a.waitingReason("memhuge", "app")
		return len(a.running("memhuge")) == 2, fmt.Sprintf("waiting %q %q", reason, msg)
	})
	want := fmt.Sprintf("size=%dk", pages*4)
	if _, out := a.execIn("memhuge", "app", "sh", "-c", "grep ' /cache ' /proc/mounts"); !strings.Contains(out, want) {
		t.Errorf("/cache mount: %q, want a tmpfs of the node's memory (%s)", out, want)
	}
}

// A pod's volumes are measured as du measures them, however many files
// they hold: 1e5 empty files and a 100 MiB file count the 100 MiB (before:
// the walk stopped at 100,000 entries and reported a few bytes).
func TestVolumeDiskUsageManyFiles(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "--disk-usage-period", "2s")
	a.writeManifest("many.yaml", lifecyclePod("many", "Always", `  volumes: [{name: scratch, emptyDir: {}}]
  containers:
  - name: writer
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "cd /scratch && seq 1 100000 | xargs touch && head -c 104857600 /dev/zero > zz-big && touch /written && exec sleep 100000"]
    volumeMounts: [{name: scratch, mountPath: /scratch}]
`))
	a.waitRunning("many", "writer")
	waitFor(t, 60*time.Second, func() (bool, string) {
		code, _ := a.execIn("many", "writer", "test", "-e", "/written")
		return code == 0, "the files are not written yet"
	})
	waitFor(t, 30*time.Second, func() (bool, string) {
		code, body := httpGet(a.api(true) + "/stats/summary")
		var sum statsapi.Summary
		if code != 200 || json.Unmarshal([]byte(body), &sum) != nil {
			return false, fmt.Sprintf("GET /stats/summary = %d %.300s", code, body)
		}
		for _, p := range sum.Pods {
			if p.PodRef.Name == "many" {
				return p.EphemeralStorage != nil && *p.EphemeralStorage.UsedBytes >= 100<<20,
					fmt.Sprintf("ephemeral storage %s, want at least 100 MiB", fsUsed(p.EphemeralStorage))
			}
		}
		return false, "pod many not in the summary"
	})
}
