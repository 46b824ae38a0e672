package kuberuntime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/metrics"
)

// The API's streams reach the runtime through the Manager, measured like
// the agent's own calls, with the runtime's results passed back.
func TestStreamsGoThroughTheMeasuredRuntime(t *testing.T) {
	fake := containertest.NewFakeClient()
	fake.SetExecResult(7, "hello")
	met := metrics.New("n")
	m := newTestManager(t, Config{Metrics: met}, NewInstrumentedRuntime(fake, met))
	ctx := context.Background()

	var logs bytes.Buffer
	if err := m.Logs(ctx, "c1", kubecontainer.LogOptions{}, &logs); err != nil || logs.String() != "log of c1\n" {
		t.Errorf("logs %q %v", logs.String(), err)
	}
	if code, out, err := m.Exec(ctx, "c1", []string{"echo"}, 0); code != 7 || string(out) != "hello" || err != nil {
		t.Errorf("exec %d %q %v", code, out, err)
	}
	var stdout bytes.Buffer
	if code, err := m.ExecStream(ctx, "c1", []string{"sh"}, kubecontainer.Streams{Stdout: &stdout}); code != 7 || stdout.String() != "hello" || err != nil {
		t.Errorf("exec stream %d %q %v", code, stdout.String(), err)
	}
	fake.InjectError("attach", errors.New("not running"))
	if err := m.Attach(ctx, "c1", kubecontainer.Streams{}); err == nil {
		t.Error("attach error lost")
	}
	want := []string{"logs c1", "exec c1 echo", "exec c1 sh", "attach c1"}
	if got := fake.Calls(); strings.Join(got, ";") != strings.Join(want, ";") {
		t.Errorf("calls %v, want %v", got, want)
	}
	for op, want := range map[string]float64{"container_logs": 1, "exec_sync": 1, "exec": 1, "attach": 1} {
		if total, _, _ := opCounts(t, met, op); total != want {
			t.Errorf("%s counted %v times, want %v", op, total, want)
		}
	}
	if _, errs, _ := opCounts(t, met, "attach"); errs != 1 {
		t.Errorf("attach errors %v, want 1", errs)
	}
}

// PortForward refuses a sandbox that is not running.
func TestPortForwardRefusals(t *testing.T) {
	fake := containertest.NewFakeClient()
	fake.AddContainer(kubecontainer.ContainerDetail{ID: "stopped", Name: "s"})
	fake.AddContainer(kubecontainer.ContainerDetail{ID: "nopid", Name: "n", Running: true})
	m := newTestManager(t, Config{}, fake)
	for id, want := range map[string]string{
		"absent":  "not found",
		"stopped": "pod sandbox stopped is not running",
		"nopid":   "pod sandbox nopid is not running",
	} {
		client, server := net.Pipe()
		err := m.PortForward(context.Background(), id, 80, server)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", id, err, want)
		}
		client.Close()
		server.Close()
	}
}

// PortForward connects from inside the sandbox's network namespace (here
// the test's own: the sandbox's pid is this process) to the port on its
// loopback, both ways, and returns once both sides are done.
func TestPortForwardInNetns(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan string, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			served <- err.Error()
			return
		}
		defer conn.Close()
		got := make([]byte, len("ping"))
		_, _ = io.ReadFull(conn, got)
		_, _ = conn.Write(append([]byte("echo:"), got...))
		served <- string(got)
	}()
	port := int32(ln.Addr().(*net.TCPAddr).Port)

	fake := containertest.NewFakeClient()
	fake.AddContainer(kubecontainer.ContainerDetail{ID: "infra", Name: "i", Running: true, Pid: os.Getpid()})
	m := newTestManager(t, Config{}, fake)
	client, stream := net.Pipe()
	errc := make(chan error, 1)
	go func() { errc <- m.PortForward(context.Background(), "infra", port, stream) }()

	if _, err := client.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len("echo:ping"))
	if _, err := io.ReadFull(client, buf); err != nil {
		select {
		case err := <-errc:
			if strings.Contains(fmt.Sprint(err), "enter the pod's network namespace") {
				t.Skipf("no setns here: %v", err)
			}
			t.Fatalf("port-forward: %v", err)
		default:
			t.Fatalf("read: %v", err)
		}
	}
	if string(buf) != "echo:ping" {
		t.Errorf("answer %q", buf)
	}
	if got := <-served; got != "ping" {
		t.Errorf("the server got %q", got)
	}
	client.Close() // the client is done
	if err := <-errc; err != nil {
		t.Errorf("port-forward ended with %v", err)
	}
}

// A port nobody listens on fails, named.
func TestPortForwardRefused(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := int32(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	fake := containertest.NewFakeClient()
	fake.AddContainer(kubecontainer.ContainerDetail{ID: "infra", Name: "i", Running: true, Pid: os.Getpid()})
	m := newTestManager(t, Config{}, fake)
	client, stream := net.Pipe()
	defer client.Close()
	err = m.PortForward(context.Background(), "infra", port, stream)
	if strings.Contains(fmt.Sprint(err), "enter the pod's network namespace") {
		t.Skipf("no setns here: %v", err)
	}
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("connect to port %d in the pod", port)) {
		t.Errorf("error %v", err)
	}
}
