// Command cluster runs a real Kubernetes control plane with one agent as
// its node, in the foreground, until Ctrl-C: `make cluster` (hack/cluster.sh)
// runs it. It prints the KUBECONFIG to export. On exit it stops the agent,
// removes the node's containers (the cluster they belonged to goes with
// them), stops the control plane and removes its directory.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	docker "github.com/fsouza/go-dockerclient"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/classic-kubelet/kubelet/test/cleanup"
	"github.com/classic-kubelet/kubelet/test/cluster"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func run() error {
	host, _ := os.Hostname()
	binDir := flag.String("bin-dir", "", "Directory of kube-apiserver, kube-controller-manager, kube-scheduler and kubectl (hack/ensure-control-plane.sh prints it).")
	dir := flag.String("dir", "/tmp/classic-kubelet-cluster", "Directory of the cluster's certificates, kubeconfigs, etcd data, logs and the agent's root dir; emptied at start, removed at exit.")
	agentBin := flag.String("agent", "bin/kubelet", "The agent binary; empty: the control plane alone.")
	node := flag.String("node-name", strings.ToLower(host), "The node's name (the agent's --hostname-override).")
	port := flag.Int("port", 10250, "The agent's full-access port, on the node IP (the API server reaches it there).")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: %s [flags] [-- agent flags...]\n", os.Args[0])
		flag.PrintDefaults()
	}
	flag.Parse()
	if *binDir == "" {
		return errors.New("--bin-dir is required")
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// One cluster per directory: a second `make cluster` would otherwise
	// empty the first one's directory under it.
	unlock, err := lock(*dir + ".lock")
	if err != nil {
		return err
	}
	defer unlock()
	if err := os.RemoveAll(*dir); err != nil {
		return err
	}
	defer os.RemoveAll(*dir)

	began := time.Now()
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	c, err := cluster.Start(startCtx, *dir, cluster.Options{BinDir: *binDir})
	cancel()
	if err != nil {
		return err
	}
	defer c.Stop()
	fmt.Fprintf(os.Stderr, "cluster: control plane up in %v at %s (logs: %s/*.log)\n", time.Since(began).Round(100*time.Millisecond), c.Server, c.Dir)

	var exited <-chan error
	if *agentBin != "" {
		a, err := startAgent(c, *agentBin, *node, *port, flag.Args())
		if err != nil {
			return err
		}
		defer a.stop()
		exited = a.exited
		if err := waitReady(ctx, c, *node, a.exited); err != nil {
			return fmt.Errorf("%w; last lines of %s:\n%s", err, a.logPath, tail(a.logPath, 30))
		}
		fmt.Fprintf(os.Stderr, "cluster: node %s Ready (agent log: %s)\n", *node, a.logPath)
	}
	fmt.Printf("export KUBECONFIG=%s\n", c.AdminKubeconfig)
	fmt.Fprintf(os.Stderr, "cluster: kubectl is %s; Ctrl-C stops the cluster\n", c.KubectlPath())
	select {
	case <-ctx.Done():
		fmt.Fprintln(os.Stderr, "cluster: stopping")
		return nil
	case err := <-exited:
		return fmt.Errorf("agent exited: %v", err)
	}
}

// agent is the node's agent process.
type agent struct {
	cmd     *exec.Cmd
	node    string
	rootDir string
	logPath string
	exited  chan error // receives how it exited, once
	done    chan struct{}
}

func startAgent(c *cluster.Cluster, bin, node string, port int, extra []string) (*agent, error) {
	creds, err := c.NodeCredentials(node, c.Address)
	if err != nil {
		return nil, err
	}
	a := &agent{node: node, rootDir: filepath.Join(c.Dir, "kubelet"), logPath: filepath.Join(c.Dir, "kubelet.log"),
		exited: make(chan error, 1), done: make(chan struct{})}
	logf, err := os.Create(a.logPath)
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--kubeconfig", creds.Kubeconfig,
		"--node-ip", c.Address,
		"--hostname-override", node,
		"--root-dir", a.rootDir,
		// The API server connects to the node IP: the full-access port
		// listens there, with client certificates of the cluster CA,
		// tokens checked by TokenReview, and every request authorized by
		// SubjectAccessReview.
		"--address", c.Address, "--port", fmt.Sprint(port),
		"--tls-cert-file", creds.CertFile, "--tls-private-key-file", creds.KeyFile,
		"--client-ca-file", creds.ClientCAFile,
		"--authentication-token-webhook", "--authorization-mode=Webhook",
	}, extra...)
	a.cmd = exec.Command(bin, args...)
	a.cmd.Stdout, a.cmd.Stderr = logf, logf
	// A group of its own: Ctrl-C reaches this program only, which stops the
	// agent before the control plane. Should this program be killed, the
	// agent is stopped as by Ctrl-C, with the control plane.
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := a.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start agent: %w", err)
	}
	go func() {
		err := a.cmd.Wait()
		logf.Close()
		a.exited <- err
		close(a.done)
	}()
	return a, nil
}

// stop stops the agent (SIGTERM, then SIGKILL after 15 s) and removes what
// it left: its containers, their cgroups and volume mounts.
func (a *agent) stop() {
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.done:
	case <-time.After(15 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.done
	}
	if d, err := docker.NewClientFromEnv(); err == nil {
		cleanup.NodeContainers(d, a.node)
	}
	cleanup.PodCgroups(cleanup.PodDirUIDs(a.rootDir))
	cleanup.UnmountUnder(a.rootDir)
}

// waitReady waits until the node is registered and Ready.
func waitReady(ctx context.Context, c *cluster.Cluster, node string, exited <-chan error) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	why := "not registered"
	for {
		n, err := c.Admin().CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err == nil {
			why = "not Ready"
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady {
					if cond.Status == corev1.ConditionTrue {
						return nil
					}
					why = fmt.Sprintf("Ready=%s: %s", cond.Status, cond.Message)
				}
			}
		}
		select {
		case err := <-exited:
			return fmt.Errorf("agent exited: %v", err)
		case <-ctx.Done():
			return fmt.Errorf("node %s: %s: %w", node, why, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// lock takes an exclusive lock on path, failing at once if it is held.
func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another cluster runs in this directory (%s is locked): %w", path, err)
	}
	return func() { f.Close() }, nil
}

func tail(path string, lines int) string {
	data, _ := os.ReadFile(path)
	parts := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}
