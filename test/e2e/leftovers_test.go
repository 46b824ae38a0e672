package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	docker "github.com/fsouza/go-dockerclient"
	gwebsocket "github.com/gorilla/websocket"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
)

// inContainer reports whether a process whose command line contains cmd
// runs in the container, as docker top shows it.
func inContainer(t *testing.T, id, cmd string) bool {
	t.Helper()
	top, err := dockerc.TopContainer(id, "")
	if err != nil {
		t.Fatalf("docker top %s: %v", id, err)
	}
	for _, p := range top.Processes {
		if strings.Contains(strings.Join(p, " "), cmd) {
			return true
		}
	}
	return false
}

// shellPod is a pod of one container, sh, that sleeps: a place to exec.
func shellPod(name string) string {
	return lifecyclePod(name, "Always", `  containers:
  - name: sh
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "sleep 3600"]
`)
}

// An exec whose client goes away, over SPDY or WebSocket, does not keep
// its command running in the container: the agent kills its process, as
// the JSON exec's timeout does.
func TestExecEndsWithItsClient(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("gone.yaml", shellPod("gone"))
	id := a.waitRunning("gone", "sh")["sh"].ID
	cfg := &rest.Config{Host: a.api(false)}
	for i, c := range []struct {
		name string
		make func(u string) (remotecommand.Executor, error)
	}{
		{"SPDY", func(u string) (remotecommand.Executor, error) {
			return remotecommand.NewSPDYExecutor(cfg, "POST", mustURL(t, u))
		}},
		{"WebSocket", func(u string) (remotecommand.Executor, error) {
			return remotecommand.NewWebSocketExecutor(cfg, "GET", u)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := fmt.Sprintf("sleep %d", 3500+i)
			ex, err := c.make(a.api(false) + "/exec/default/gone/sh?command=sleep&command=" + strconv.Itoa(3500+i) + "&input=1&output=1")
			must(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			stdin, stdinW := net.Pipe() // never written: the command waits
			defer stdinW.Close()
			done := make(chan error, 1)
			go func() {
				done <- ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: &syncBuffer{}})
			}()
			waitFor(t, 15*time.Second, func() (bool, string) {
				return inContainer(t, id, cmd), cmd + " not running in the container yet"
			})
			cancel() // the client goes away
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the client's session did not end")
			}
			waitFor(t, 10*time.Second, func() (bool, string) {
				return !inContainer(t, id, cmd), cmd + " still runs in the container after its client went away"
			})
		})
	}
}

// peakRSS is a process's resident memory high-water mark, in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	must(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmHWM:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			must(t, err)
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// A WebSocket client sending one huge frame gets its connection closed,
// and the agent never holds the frame: its peak memory does not grow by
// the frame's size. Frames of a usual size go through.
func TestWebSocketFrameCap(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.writeManifest("frames.yaml", shellPod("frames"))
	a.waitRunning("frames", "sh")
	wsURL := strings.Replace(a.api(false), "http://", "ws://", 1) + "/exec/default/frames/sh?command=cat&input=1&output=1"
	const frame = 31 << 20
	// A write buffer larger than the message: gorilla sends it as one frame.
	d := gwebsocket.Dialer{Subprotocols: []string{"v4.channel.k8s.io"}, HandshakeTimeout: 5 * time.Second, WriteBufferSize: frame + 1024}
	var ws *gwebsocket.Conn
	waitFor(t, 15*time.Second, func() (bool, string) {
		var err error
		ws, _, err = d.Dial(wsURL, nil)
		return err == nil, fmt.Sprintf("dial: %v", err)
	})
	defer ws.Close()
	// A usual frame is echoed by cat.
	must(t, ws.WriteMessage(gwebsocket.BinaryMessage, append([]byte{0}, "ping\n"...)))
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	var echoed []byte
	for !bytes.Contains(echoed, []byte("ping\n")) {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("read the echo: %v (so far %q)", err, echoed)
		}
		if len(msg) > 0 && msg[0] == 1 {
			echoed = append(echoed, msg[1:]...)
		}
	}
	before := peakRSS(t, a.cmd.Process.Pid)
	big := make([]byte, frame)
	_ = ws.WriteMessage(gwebsocket.BinaryMessage, big) // may fail: the agent stops reading
	_ = ws.SetReadDeadline(time.Now().Add(15 * time.Second))
	for {
		_, _, err := ws.ReadMessage()
		if err == nil {
			continue // cat's echo of what got through
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("the connection is still open 15 s after a frame of %d MiB", frame>>20)
		}
		break
	}
	if grown := peakRSS(t, a.cmd.Process.Pid) - before; grown > frame/2 {
		t.Errorf("the agent's peak memory grew by %d MiB on a frame of %d MiB", grown>>20, frame>>20)
	}
	if code, _ := httpGet(a.api(true) + "/healthz"); code != 200 {
		t.Errorf("healthz after the frame: %d", code)
	}
}

// An agent killed between an infra container's create and its start leaves
// a container that never ran; the agent that follows makes the pod a new
// one and removes the leftover, as the kubelet's GC removes sandboxes that
// are neither ready nor the newest.
func TestNeverStartedInfraContainerRemoved(t *testing.T) {
	t.Parallel()
	a := startAgent(t, "--gc-period", "2s")
	a.writeManifest("left.yaml", lifecyclePod("left", "Always", `  containers:
  - name: app
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "sleep 3600"]
`))
	infra := inspect(t, a.waitRunning("left", "app")["POD"].ID)
	a.stop(syscall.SIGKILL)
	// What the killed agent left: the pod's infra container, created and
	// never started (and nothing else of the pod).
	for _, c := range a.containers("left") {
		must(t, dockerc.RemoveContainer(docker.RemoveContainerOptions{ID: c.ID, Force: true}))
	}
	left, err := dockerc.CreateContainer(docker.CreateContainerOptions{Name: strings.TrimPrefix(infra.Name, "/"),
		Config: &docker.Config{Image: pauseImage, Labels: infra.Config.Labels}})
	must(t, err)
	a.start()
	a.waitRunning("left", "app")
	waitFor(t, 30*time.Second, func() (bool, string) {
		_, err := dockerc.InspectContainerWithOptions(docker.InspectContainerOptions{ID: left.ID})
		_, gone := err.(*docker.NoSuchContainer)
		return gone, fmt.Sprintf("the never-started infra container %s is still there (%v)", left.ID[:12], err)
	})
	if n := len(a.running("left")); n != 2 {
		t.Errorf("%d containers of the pod run after the collection, want 2", n)
	}
}

// A pod name of 253 characters (the longest a name may be) still gets its
// /var/log/containers link: cut, as the kubelet cuts it, to the longest
// file name.
func TestLogLinkOfALongPodName(t *testing.T) {
	t.Parallel()
	name := strings.Repeat("a", 63) + "." + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 61)
	a := startAgent(t)
	a.writeManifest("long.yaml", lifecyclePod(name, "Always", `  containers:
  - name: app
    image: `+testImage+`
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "echo from the long pod; sleep 3600"]
`))
	id := a.waitRunning(name, "app")["app"].ID
	logPath := inspect(t, id).LogPath
	want := (name + "_default_app-" + id)[:251] + ".log"
	waitFor(t, 20*time.Second, func() (bool, string) {
		target, err := os.Readlink(filepath.Join(a.logDir, want))
		return err == nil && target == logPath, fmt.Sprintf("link %s: %q, %v; want %s", want, target, err, logPath)
	})
	data, err := os.ReadFile(filepath.Join(a.logDir, want))
	if err != nil || !strings.Contains(string(data), "from the long pod") {
		t.Errorf("log through the link: %q, %v", data, err)
	}
}

// The node lock file goes with the agent that held it on a clean stop; one
// left by a kill -9 does not stop the next start.
func TestNodeLockFileRemovedOnStop(t *testing.T) {
	t.Parallel()
	a := startAgent(t)
	a.waitAPI()
	lock := filepath.Join("/run/classic-kubelet", a.node+".lock")
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("lock file of a running agent: %v", err)
	}
	a.stop(syscall.SIGKILL)
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("lock file after kill -9: %v", err) // the kernel dropped the lock, the file stays
	}
	a.start()
	a.waitAPI()
	a.stop(syscall.SIGTERM)
	if a.exitErr != nil {
		t.Errorf("agent stopped with SIGTERM: %v", a.exitErr)
	}
	if _, err := os.Stat(lock); !os.IsNotExist(err) {
		t.Errorf("lock file after a clean stop: %v", err)
	}
}

// An exec session open when the agent stops ends with it: the agent waits
// for it (briefly) and its command's process is killed, as when its client
// goes. Before, sessions ran under no owner: the stop left the command
// running in the container.
func TestExecEndsWhenTheAgentStops(t *testing.T) {
	a := startAgent(t)
	a.writeManifest("stopping.yaml", shellPod("stopping"))
	id := a.waitRunning("stopping", "sh")["sh"].ID
	ex, err := remotecommand.NewSPDYExecutor(&rest.Config{Host: a.api(false)}, "POST",
		mustURL(t, a.api(false)+"/exec/default/stopping/sh?command=sleep&command=3499&input=1&output=1"))
	must(t, err)
	stdin, stdinW := net.Pipe() // never written: the command waits
	defer stdinW.Close()
	done := make(chan error, 1)
	go func() {
		done <- ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdin: stdin, Stdout: &syncBuffer{}})
	}()
	waitFor(t, 15*time.Second, func() (bool, string) {
		return inContainer(t, id, "sleep 3499"), "sleep 3499 not running in the container yet"
	})
	stopped := time.Now()
	a.stop(syscall.SIGTERM)
	if d := time.Since(stopped); d > 5*time.Second {
		t.Errorf("the agent took %v to stop with a session open", d)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the client's session did not end with the agent")
	}
	waitFor(t, 10*time.Second, func() (bool, string) {
		return !inContainer(t, id, "sleep 3499"), "sleep 3499 still runs in the container after the agent stopped"
	})
	if c := inspect(t, id); !c.State.Running {
		t.Error("the pod's container stopped with the agent")
	}
}
