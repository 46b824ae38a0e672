package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	docker "github.com/fsouza/go-dockerclient"
	"golang.org/x/sys/unix"

	"github.com/classic-kubelet/kubelet/test/cleanup"
)

// mountPropagation and recursiveReadOnly as the kubelet with its runtime
// (before: the whole pod refused, "mountPropagation: Forbidden"). A
// HostToContainer mount sees what the host mounts under it afterwards: on
// a hostPath that is a shared mount, and on an emptyDir (the agent made its
// root dir shared, as the kubelet). A mount whose source cannot propagate,
// and recursiveReadOnly Enabled (Docker 20.10's binds cannot be made
// recursively read-only), wait with the kubelet's reasons and messages;
// IfPossible is a read-only mount. A privileged container's Bidirectional
// mount is made rshared (this machine's Docker cannot start a privileged
// container: the test checks what the agent asked of Docker).
func TestMountPropagation(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "--backoff-initial", "1s", "--backoff-max", "2s")
	dir := t.TempDir()
	t.Cleanup(func() { cleanup.UnmountUnder(dir) })
	shared, private := filepath.Join(dir, "shared"), filepath.Join(dir, "private")
	for _, d := range []string{shared, filepath.Join(shared, "fromhost"), private} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := unix.Mount(shared, shared, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("", shared, "", unix.MS_SHARED, ""); err != nil {
		t.Fatal(err)
	}
	a.writeManifest("prop.yaml", lifecyclePod("prop", "Always", `  volumes:
  - {name: shared, hostPath: {path: `+shared+`}}
  - {name: scratch, emptyDir: {}}
  containers:
  - name: watcher
    image: `+testImage+`
    command: `+sleeper+`
    volumeMounts:
    - {name: shared, mountPath: /shared, mountPropagation: HostToContainer}
    - {name: scratch, mountPath: /scratch, mountPropagation: HostToContainer}
    - {name: scratch, mountPath: /ro, readOnly: true, recursiveReadOnly: IfPossible}
`))
	a.writeManifest("refused.yaml", lifecyclePod("refused", "Always", `  volumes:
  - {name: private, hostPath: {path: `+private+`}}
  containers:
  - name: slave
    image: `+testImage+`
    command: `+sleeper+`
    volumeMounts: [{name: private, mountPath: /private, mountPropagation: HostToContainer}]
  - name: rro
    image: `+testImage+`
    command: `+sleeper+`
    volumeMounts: [{name: private, mountPath: /private, readOnly: true, recursiveReadOnly: Enabled}]
`))
	a.writeManifest("bidi.yaml", lifecyclePod("bidi", "Always", `  volumes: [{name: shared, hostPath: {path: `+shared+`}}]
  containers:
  - name: mounter
    image: `+testImage+`
    command: `+sleeper+`
    securityContext: {privileged: true}
    volumeMounts: [{name: shared, mountPath: /shared, mountPropagation: Bidirectional}]
`))
	running := a.waitRunning("prop", "watcher")

	// Mounted on the host after the container started: seen inside.
	var scratch string
	for _, m := range inspect(t, running["watcher"].ID).Mounts {
		if m.Destination == "/scratch" {
			scratch = m.Source
		}
	}
	if !strings.HasPrefix(scratch, a.rootDir+"/") {
		t.Fatalf("the emptyDir's source %q is not under the root dir %s", scratch, a.rootDir)
	}
	for _, m := range []struct{ at, text string }{{filepath.Join(shared, "fromhost"), "hostpath"}, {filepath.Join(scratch, "in"), "emptydir"}} {
		if err := os.MkdirAll(m.at, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", m.at, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(m.at, "f"), []byte(m.text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for path, want := range map[string]string{"/shared/fromhost/f": "hostpath", "/scratch/in/f": "emptydir"} {
		if code, out := a.execIn("prop", "watcher", "cat", path); code != 0 || out != want {
			t.Errorf("cat %s in the HostToContainer mount: exit %d %q, want %q", path, code, out, want)
		}
	}
	if code, out := a.execIn("prop", "watcher", "touch", "/ro/x"); code == 0 {
		t.Errorf("a recursiveReadOnly IfPossible mount is writable: %q", out)
	}
	if err := unix.Unmount(filepath.Join(scratch, "in"), 0); err != nil {
		t.Errorf("unmount the emptyDir's tmpfs: %v", err)
	}

	// The kubelet's reasons and messages for what cannot be honoured.
	for _, w := range []struct{ container, reason, message string }{
		{"slave", "CreateContainerError", `volumeMounts[0] (private) mountPropagation HostToContainer: path "` + private + `" is mounted on "`},
		{"slave", "CreateContainerError", `but it is not a shared or slave mount`},
		{"rro", "CreateContainerConfigError", `failed to resolve recursive read-only mode: volume "private" requested recursive read-only mode, but it is not supported by the runtime`},
	} {
		waitFor(t, 20*time.Second, func() (bool, string) {
			reason, msg := a.waitingReason("refused", w.container)
			return reason == w.reason && strings.Contains(msg, w.message), fmt.Sprintf("%s waits with %q %q, want %q with %q", w.container, reason, msg, w.reason, w.message)
		})
	}
	if n := len(a.containers("refused")); n != 1 { // the infra container
		t.Errorf("%d containers made for the refused pod, want only its infra container", n)
	}

	// Bidirectional: rshared, as the kubelet asks its runtime.
	var made *docker.Container
	waitFor(t, 20*time.Second, func() (bool, string) {
		for _, c := range a.containers("bidi") {
			if c.Labels["io.kubernetes.container.name"] != "mounter" {
				continue
			}
			if d, err := dockerc.InspectContainerWithOptions(docker.InspectContainerOptions{ID: c.ID}); err == nil {
				made = d
				return true, ""
			}
		}
		reason, msg := a.waitingReason("bidi", "mounter")
		return false, fmt.Sprintf("mounter waits with %q %q", reason, msg)
	})
	if want := shared + ":/shared:rshared"; !contains(made.HostConfig.Binds, want) {
		t.Errorf("binds %v, want %q", made.HostConfig.Binds, want)
	}
}
