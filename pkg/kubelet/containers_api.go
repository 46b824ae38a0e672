package kubelet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// ErrNotFound is returned when a pod or container the API asks for is not
// on this node.
var ErrNotFound = errors.New("kubelet: not found")

// errNoInstance marks an ErrNotFound for a desired container that the last
// relist found no instance of.
var errNoInstance = errors.New("no instance")

// ContainerRef is a container the API may read logs from, exec in or report
// stats of.
type ContainerRef struct {
	ID      string
	Running bool
	Pod     *v1.Pod
}

// FindContainer returns the newest instance of a desired pod's container,
// or, with previous, the one before it (whose logs kubectl shows with
// --previous). uid, when not empty, must be the pod's.
func (k *Kubelet) FindContainer(namespace, pod, uid, container string, previous bool) (ContainerRef, error) {
	var p *v1.Pod
	for _, d := range k.desired.all() {
		if d.Namespace == namespace && d.Name == pod && (uid == "" || string(d.UID) == uid) {
			p = d
		}
	}
	if p == nil {
		return ContainerRef{}, fmt.Errorf("%w: pod %s/%s", ErrNotFound, namespace, pod)
	}
	if container == "" && len(p.Spec.Containers) == 1 {
		container = p.Spec.Containers[0].Name
	}
	if containerSpec(p, container) == nil && container != infraName {
		return ContainerRef{}, fmt.Errorf("%w: container %q in pod %s/%s", ErrNotFound, container, namespace, pod)
	}
	instances := k.cache.Get(p.UID).Instances(container)
	i := 0
	if previous {
		i = 1
	}
	if len(instances) <= i {
		if previous {
			return ContainerRef{}, fmt.Errorf("%w: no previous instance of container %q in pod %s/%s", ErrNotFound, container, namespace, pod)
		}
		return ContainerRef{}, fmt.Errorf("%w: %w of container %q in pod %s/%s", ErrNotFound, errNoInstance, container, namespace, pod)
	}
	return ContainerRef{ID: instances[i].ID, Running: instances[i].Running, Pod: p}, nil
}

// freshLookupTimeout bounds how long FindRunningContainer waits for the
// relist it asks for.
const freshLookupTimeout = 3 * time.Second

// FindRunningContainer is FindContainer for a request that needs the
// container running (exec, attach, port-forward). When the last relist
// shows no running instance it relists at once and looks again: a container
// started a moment ago is running in Docker before the periodic relist
// sees it, and a client that just saw it start must not be told otherwise.
func (k *Kubelet) FindRunningContainer(ctx context.Context, namespace, pod, uid, container string) (ContainerRef, error) {
	ref, err := k.FindContainer(namespace, pod, uid, container, false)
	if (err == nil && ref.Running) || (err != nil && !errors.Is(err, errNoInstance)) {
		return ref, err
	}
	since := time.Now()
	k.relist.RelistNow()
	ctx, cancel := context.WithTimeout(ctx, freshLookupTimeout)
	defer cancel()
	if _, werr := k.cache.GetNewerThan(ctx, "", since); werr != nil {
		return ref, err
	}
	return k.FindContainer(namespace, pod, uid, container, false)
}

// IsContainerLogFile reports whether path is the log file of a container of
// this agent (so /logs may follow a symlink to it).
func (k *Kubelet) IsContainerLogFile(path string) bool {
	clean := filepath.Clean(path)
	for _, p := range k.cache.All() {
		for _, c := range p.Containers {
			if c.LogPath != "" && filepath.Clean(c.LogPath) == clean {
				return true
			}
		}
	}
	return false
}

// Health reports whether the sync loop and the relist completed recently.
func (k *Kubelet) Health() (syncLoop, relist error) {
	if since := time.Since(k.LastSyncLoop()); since > syncLoopHealthThreshold {
		syncLoop = fmt.Errorf("sync loop last ran %v ago", since.Round(time.Second))
	}
	threshold := max(relistHealthMin, 5*k.relist.Period())
	last := k.LastRelist()
	switch since := time.Since(last); {
	case last.IsZero():
		relist = errors.New("no relist has completed yet (is Docker reachable?)")
	case since > threshold:
		relist = fmt.Errorf("last relist completed %v ago (is Docker reachable?)", since.Round(time.Second))
	}
	return syncLoop, relist
}

const (
	// syncLoopHealthThreshold: the sync loop wakes at least every
	// housekeeping period; much longer means it is stuck.
	syncLoopHealthThreshold = 10 * housekeepingPeriod
	// relistHealthMin is the shortest time without a relist that counts as
	// unhealthy (a relist period of 1 s makes it 5 s while Docker's event
	// stream is down, 25 s while it flows and the relist is stretched).
	relistHealthMin = 5 * time.Second
)

// Logs streams a container's output. The API reaches the runtime only
// through the Kubelet, so its calls are measured like the agent's own.
func (k *Kubelet) Logs(ctx context.Context, id string, o kubecontainer.LogOptions, w io.Writer) error {
	return k.docker.Logs(ctx, id, o, w)
}

// Exec runs a command in a running container (see Runtime.Exec).
func (k *Kubelet) Exec(ctx context.Context, id string, cmd []string, timeout time.Duration) (int, []byte, error) {
	return k.docker.Exec(ctx, id, cmd, timeout)
}

// ExecStream runs a command in a running container connected to streams
// (see Runtime.ExecStream).
func (k *Kubelet) ExecStream(ctx context.Context, id string, cmd []string, s kubecontainer.Streams) (int, error) {
	return k.docker.ExecStream(ctx, id, cmd, s)
}

// Attach connects streams to a running container (see Runtime.Attach).
func (k *Kubelet) Attach(ctx context.Context, id string, s kubecontainer.Streams) error {
	return k.docker.Attach(ctx, id, s)
}

// PortForward connects stream to port on the loopback of the pod whose
// infra container is infraID, as the kubelet does: the connection is made
// from inside the pod's network namespace, so a server listening on the
// pod's 127.0.0.1 is reached too. It returns when either side closes.
func (k *Kubelet) PortForward(ctx context.Context, infraID string, port int32, stream io.ReadWriteCloser) error {
	d, err := k.docker.Inspect(ctx, infraID)
	if err != nil {
		return err
	}
	if !d.Running || d.Pid <= 0 {
		return fmt.Errorf("pod sandbox %s is not running", infraID)
	}
	conn, err := dialInNetns(d.Pid, fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return fmt.Errorf("connect to port %d in the pod: %w", port, err)
	}
	defer conn.Close()
	errc := make(chan error, 2)
	go func() {
		_, err := io.Copy(conn, stream)
		if tc, ok := conn.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite() // the client is done sending; the server may still answer
		}
		errc <- err
	}()
	go func() {
		_, err := io.Copy(stream, conn)
		errc <- err
	}()
	select {
	case err = <-errc:
		if err == nil {
			err = <-errc
		}
	case <-ctx.Done():
	}
	return err
}

// HostIP is the node's address that pods' status.hostIP reports.
func (k *Kubelet) HostIP() string { return k.hostIP }

// StatusChanged is poked when a pod's status changes or a pod is gone (a
// single reader: the etcd status writer).
func (k *Kubelet) StatusChanged() <-chan struct{} { return k.status.Changed() }
