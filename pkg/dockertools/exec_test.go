package dockertools

import (
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// execInspectServer answers GET /exec/<id>/json with a running exec whose
// PID is pid, on listener ln.
func execInspectServer(t *testing.T, ln net.Listener, pid int) {
	t.Helper()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"Running": true, "Pid": %d}`, pid)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
}

// A timed-out exec's process is killed by the PID Docker reports only when
// that PID can be this host's and the container's: never for a daemon
// reached over TCP (its PIDs are another host's), never for a process
// outside the container's cgroup.
func TestKillExecNeverKillsAHostProcess(t *testing.T) {
	for _, tc := range []struct {
		name     string
		endpoint func(t *testing.T) (string, net.Listener)
	}{
		{"tcp endpoint", func(t *testing.T) (string, net.Listener) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			return "tcp://" + ln.Addr().String(), ln
		}},
		{"unix endpoint, process outside the container", func(t *testing.T) (string, net.Listener) {
			sock := filepath.Join(t.TempDir(), "docker.sock")
			ln, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			return "unix://" + sock, ln
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			victim := exec.Command("sleep", "30")
			if err := victim.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = victim.Process.Kill(); _ = victim.Wait() }()
			endpoint, ln := tc.endpoint(t)
			execInspectServer(t, ln, victim.Process.Pid)
			c, err := NewClient(endpoint)
			if err != nil {
				t.Fatal(err)
			}
			c.killExec("0123456789abcdef0123456789abcdef", "exec1", "test")
			// No waiting, and no signal 0 (which a killed, unreaped child
			// still accepts): a SIGKILL killExec sent was queued before it
			// returned and seals the process's fate, so the SIGTERM sent now
			// is dropped. The process dies of SIGTERM unless killExec killed it.
			_ = victim.Process.Signal(syscall.SIGTERM)
			_ = victim.Wait()
			if ws := victim.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
				t.Fatalf("the host process named by the exec's PID was killed: %v", victim.ProcessState)
			}
		})
	}
}
