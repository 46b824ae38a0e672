// Package etcdtest runs clusters of real etcd server processes (Debian's
// etcd-server) for tests: data on tmpfs, ports picked free, a unique
// cluster token, members that can be killed and restarted.
package etcdtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Member is one etcd server process.
type Member struct {
	Name, Dir, ClientURL, PeerURL string
	cmd                           *exec.Cmd
	exited                        chan struct{}
}

// PID is the member's process ID (0 when it is not running).
func (m *Member) PID() int {
	if m.cmd == nil {
		return 0
	}
	return m.cmd.Process.Pid
}

// Cluster is a cluster of etcd server processes.
type Cluster struct {
	t       testing.TB
	Token   string
	Members []*Member
	extra   []string
}

func freeURL(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "http://" + l.Addr().String()
}

// Start starts an n-member cluster and waits until every member answers;
// extra flags go to every member. Cleanup kills the members and removes
// their data.
func Start(t testing.TB, n int, extra ...string) *Cluster {
	t.Helper()
	if _, err := exec.LookPath("etcd"); err != nil {
		t.Fatalf("etcd server not installed (hack/ensure-test-deps.sh installs etcd-server): %v", err)
	}
	base, err := os.MkdirTemp("/dev/shm", "etcdtest-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, Token: filepath.Base(base), extra: extra}
	for i := range n {
		c.Members = append(c.Members, &Member{Name: fmt.Sprintf("m%d", i), Dir: filepath.Join(base, fmt.Sprintf("m%d", i)),
			ClientURL: freeURL(t), PeerURL: freeURL(t)})
	}
	t.Cleanup(func() {
		for _, m := range c.Members {
			c.Kill(m)
		}
		os.RemoveAll(base)
	})
	for _, m := range c.Members {
		c.start(m, "new")
	}
	c.WaitHealthy(30 * time.Second)
	return c
}

// WaitHealthy waits until every running member answers a status request.
func (c *Cluster) WaitHealthy(timeout time.Duration) {
	c.t.Helper()
	cl := c.Client()
	defer cl.Close()
	deadline := time.Now().Add(timeout)
	for {
		var bad error
		for _, m := range c.Members {
			if m.cmd == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			if _, err := cl.Status(ctx, m.ClientURL); err != nil {
				bad = fmt.Errorf("member %s: %w", m.Name, err)
			}
			cancel()
		}
		if bad == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("etcd cluster not healthy after %v: %v", timeout, bad)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Restart starts a killed member again, as a member of the existing
// cluster, on its data.
func (c *Cluster) Restart(m *Member) { c.start(m, "existing") }

func (c *Cluster) start(m *Member, state string) {
	c.t.Helper()
	var initial []string
	for _, o := range c.Members {
		initial = append(initial, o.Name+"="+o.PeerURL)
	}
	log, err := os.OpenFile(m.Dir+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	args := append([]string{"--name", m.Name, "--data-dir", m.Dir,
		"--listen-client-urls", m.ClientURL, "--advertise-client-urls", m.ClientURL,
		"--listen-peer-urls", m.PeerURL, "--initial-advertise-peer-urls", m.PeerURL,
		"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-token", c.Token, "--initial-cluster-state", state,
		"--log-level", "warn", "--logger", "zap"}, c.extra...)
	m.cmd = exec.Command("etcd", args...)
	m.cmd.Stdout, m.cmd.Stderr = log, log
	if err := m.cmd.Start(); err != nil {
		c.t.Fatalf("start etcd %s: %v", m.Name, err)
	}
	m.exited = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); log.Close(); close(done) }(m.cmd, m.exited)
}

// Kill kills a member with SIGKILL and waits for it.
func (c *Cluster) Kill(m *Member) {
	if m.cmd == nil {
		return
	}
	_ = m.cmd.Process.Kill()
	<-m.exited
	m.cmd = nil
}

// Endpoints are the members' client URLs.
func (c *Cluster) Endpoints() []string {
	var eps []string
	for _, m := range c.Members {
		eps = append(eps, m.ClientURL)
	}
	return eps
}

// Client connects to every member.
func (c *Cluster) Client() *clientv3.Client {
	c.t.Helper()
	cl, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		c.t.Fatal(err)
	}
	return cl
}

// Leader is the member that leads now (nil if no running member says it
// does).
func (c *Cluster) Leader(cl *clientv3.Client) *Member {
	for _, m := range c.Members {
		if m.cmd == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := cl.Status(ctx, m.ClientURL)
		cancel()
		if err == nil && st.Leader == st.Header.MemberId {
			return m
		}
	}
	return nil
}
