package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// process is one server the cluster started, in a process group of its
// own so that stopping it also stops anything it forked, and so that a
// terminal's Ctrl-C reaches only the program that owns the cluster, which
// then stops the servers in order.
type process struct {
	name    string
	bin     string
	args    []string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{} // closed once the process has been waited for
	err     error         // how it exited; read after exited is closed
}

// startProcess starts bin with args, stdout and stderr appended to
// <dir>/<name>.log.
func startProcess(dir, name, bin string, args ...string) (*process, error) {
	logPath := fmt.Sprintf("%s/%s.log", dir, name)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Pdeathsig: a test binary killed by its timeout (or kill -9) never
	// runs Stop, and must not leave a control plane behind. The signal is
	// tied to the OS thread that started the process, and Go ends a thread
	// when a goroutine locked to it exits (the e2e tests' setns helpers do
	// so on purpose): a kube-apiserver was killed that way in its first
	// seconds. So the process is started, and waited for, by a goroutine
	// locked to its thread for the process's whole life: no other
	// goroutine can run there, let alone end it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &process{name: name, bin: bin, args: args, logPath: logPath, cmd: cmd, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer logf.Close()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return p, nil
}

// running reports whether the process has not exited.
func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after grace, and
// waits for the process; it is idempotent. A server's own children (none of
// the control plane's have any) go with the group.
func (p *process) stop(grace time.Duration) {
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
	}
	// Even after the leader exited, a member of its group may be left.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	<-p.exited
}

// failure describes why the process is not (or not yet) what was waited
// for, with the tail of its log.
func (p *process) failure(why error) error {
	state := "still running"
	if !p.running() {
		state = fmt.Sprintf("exited: %v", p.err)
	}
	return fmt.Errorf("%s (%s): %w; last lines of %s:\n%s", p.name, state, why, p.logPath, logTail(p.logPath, 30))
}

func logTail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	parts := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}
