package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	docker "github.com/fsouza/go-dockerclient"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/classic-kubelet/kubelet/test/cleanup"
)

// AgentOptions says how to run an agent as a node of the cluster.
type AgentOptions struct {
	// Binary is the agent.
	Binary string
	// Node is the node's name (--hostname-override).
	Node string
	// IP is the node's IP: its InternalIP, where the full-access port
	// listens and the API server reaches it.
	IP string
	// Port is the full-access port.
	Port int
	// RootDir is the agent's --root-dir; LogPath its standard output and
	// error.
	RootDir, LogPath string
	// NetNS, if set, is the network namespace (a path) the agent runs in:
	// its machine's (Network).
	NetNS string
	// Args come after the agent's node flags (a later flag wins).
	Args []string
}

// Agent is an agent process that is a node of the cluster.
type Agent struct {
	Node    string
	RootDir string
	LogPath string
	// Exited receives how the agent exited, once.
	Exited <-chan error

	cmd  *exec.Cmd
	done chan struct{}
}

// StartAgent starts an agent as a node of the cluster, with a kubelet's
// credentials (system:node:<name>, issued here) and serving certificate,
// webhook authentication and authorization of its API, as the API server
// expects of a kubelet.
func (c *Cluster) StartAgent(o AgentOptions) (*Agent, error) {
	creds, err := c.NodeCredentials(o.Node, o.IP)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(o.LogPath), 0o755); err != nil {
		return nil, err
	}
	logf, err := os.Create(o.LogPath)
	if err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	a := &Agent{Node: o.Node, RootDir: o.RootDir, LogPath: o.LogPath, Exited: exited, done: make(chan struct{})}
	args := append([]string{
		"--kubeconfig", creds.Kubeconfig,
		"--node-ip", o.IP,
		"--hostname-override", o.Node,
		"--root-dir", o.RootDir,
		// Several nodes share this host: each its own pod log tree.
		"--pod-logs-dir", filepath.Join(o.RootDir, "pod-logs"),
		// The API server connects to the node IP: the full-access port
		// listens there, with client certificates of the cluster CA,
		// tokens checked by TokenReview, and every request authorized by
		// SubjectAccessReview.
		"--address", o.IP, "--port", fmt.Sprint(o.Port),
		"--tls-cert-file", creds.CertFile, "--tls-private-key-file", creds.KeyFile,
		"--client-ca-file", creds.ClientCAFile,
		"--authentication-token-webhook", "--authorization-mode=Webhook",
	}, o.Args...)
	bin := o.Binary
	if o.NetNS != "" {
		// nsenter --net only: the mount namespace stays the host's, where
		// Docker sees the agent's volume mounts.
		args = append([]string{"--net=" + o.NetNS, "--", bin}, args...)
		bin = "nsenter"
	}
	a.cmd = exec.Command(bin, args...)
	a.cmd.Stdout, a.cmd.Stderr = logf, logf
	// A group of its own: Ctrl-C reaches the program that owns the
	// cluster only, which stops the agent before the control plane. Should
	// that program be killed, the agent is stopped as by Ctrl-C.
	// Started and waited for on a locked thread, as startProcess does: the
	// signal follows the thread that started the agent.
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer logf.Close()
		if err := a.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- a.cmd.Wait()
		close(a.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start agent %s: %w", o.Node, err)
	}
	return a, nil
}

// Stop stops the agent (SIGTERM, then SIGKILL after 15 s) and removes what
// it left: its containers, their cgroups and volume mounts. It is
// idempotent.
func (a *Agent) Stop() {
	select {
	case <-a.done:
	default:
		_ = a.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-a.done:
		case <-time.After(15 * time.Second):
			_ = a.cmd.Process.Kill()
			<-a.done
		}
	}
	if d, err := docker.NewClientFromEnv(); err == nil {
		cleanup.NodeContainers(d, a.Node)
	}
	cleanup.PodCgroups(cleanup.PodDirUIDs(a.RootDir))
	cleanup.UnmountUnder(a.RootDir)
}

// WaitNodeReady waits until the node is registered and Ready, the agent
// exits (exited), or ctx ends.
func (c *Cluster) WaitNodeReady(ctx context.Context, node string, exited <-chan error) error {
	why := "not registered"
	for {
		n, err := c.admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err == nil {
			why = "not Ready"
			if cond := nodeCondition(n, corev1.NodeReady); cond != nil {
				if cond.Status == corev1.ConditionTrue {
					return nil
				}
				why = fmt.Sprintf("Ready=%s: %s", cond.Status, cond.Message)
			}
		}
		select {
		case err := <-exited:
			return fmt.Errorf("agent of node %s exited: %v", node, err)
		case <-ctx.Done():
			return fmt.Errorf("node %s: %s: %w", node, why, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func nodeCondition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}
