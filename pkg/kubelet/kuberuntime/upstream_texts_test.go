package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/images"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/volumes"
	probegrpc "github.com/classic-kubelet/kubelet/pkg/probe/grpc"
)

// The texts users read in statuses and events, each produced by our code
// and compared with what a kubelet v1.37 says in the same case (the file
// of upstream's that words it is named on each row).
func TestUpstreamTexts(t *testing.T) {
	ctx := context.Background()
	pod := containertest.Pod(v1.RestartPolicyAlways, "web")
	web := &pod.Spec.Containers[0]

	fake := containertest.NewFakeClient("img:1", "pause:1")
	fake.SetExecResult(3, "boom\n")
	m, _ := newSyncManager(t, Config{}, fake)
	execHook := &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "echo boom; exit 3"}}}
	hookErr := m.runHook(ctx, pod, web, "c1", "10.0.0.1", execHook)

	serving, notServing := grpcHealthServer(t, true), grpcHealthServer(t, false)
	noHealthAddr := grpcServerWithoutHealth(t)
	closed := closedAddr(t)

	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	directory, file := v1.HostPathDirectory, v1.HostPathFile

	for _, tc := range []struct {
		name     string
		upstream string // the upstream file that words it
		got      string
		want     string
	}{
		{"ErrImageNeverPull waiting message and event", "pkg/kubelet/images/image_manager.go",
			images.NeverPullMessage("registry.test/absent:1"),
			`Container image "registry.test/absent:1" is not present with pull policy of Never`},
		{"ErrImageNeverPull Failed event", "pkg/kubelet/kuberuntime/kuberuntime_container.go",
			"Error: " + failedEventDetail(&kubecontainer.StartError{Reason: kubecontainer.ReasonErrImageNeverPull, Message: "x"}),
			"Error: ErrImageNeverPull"},
		{"PostStartHookError message of an exec hook", "pkg/kubelet/lifecycle/handlers.go",
			fmt.Sprint(hookErr),
			`Exec lifecycle hook ([sh -c echo boom; exit 3]) for Container "web" in Pod "p_default(uid1)" failed - error: command 'sh -c echo boom; exit 3' exited with 3: boom` + "\n" + `, message: "boom\n"`},
		{"PostStartHookError message of an HTTP hook", "pkg/kubelet/lifecycle/handlers.go",
			hookFailure(pod, web, &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/started"}}, errors.New("connection refused"), "").Error(),
			`HTTP lifecycle hook (/started) for Container "web" in Pod "p_default(uid1)" failed - error: connection refused`},
		{"gRPC probe: serving", "pkg/probe/grpc/grpc.go",
			grpcOutput(ctx, serving.addr, time.Second), "service healthy"},
		{"gRPC probe: not serving", "pkg/probe/grpc/grpc.go",
			grpcOutput(ctx, notServing.addr, time.Second), `service unhealthy (responded with "NOT_SERVING")`},
		{"gRPC probe: no health service", "pkg/probe/grpc/grpc.go",
			grpcOutput(ctx, noHealthAddr, time.Second),
			"error: this server does not implement the grpc health protocol (grpc.health.v1.Health): unknown service grpc.health.v1.Health"},
		{"gRPC probe: nothing listening", "pkg/probe/grpc/grpc.go",
			grpcOutput(ctx, closed, 300*time.Millisecond),
			fmt.Sprintf("timeout: failed to connect service %q within 300ms: context deadline exceeded", closed)},
		{"FailedMount: hostPath missing", "pkg/volume/hostpath/host_path.go, pkg/volume/util/operationexecutor",
			failedMount(t, m, v1.HostPathVolumeSource{Path: filepath.Join(dir, "absent"), Type: &directory}),
			fmt.Sprintf(`MountVolume.SetUp failed for volume "data" : hostPath %s doesn't exist`, filepath.Join(dir, "absent"))},
		{"FailedMount: hostPath of another kind", "pkg/volume/hostpath/host_path.go, pkg/volume/util/operationexecutor",
			failedMount(t, m, v1.HostPathVolumeSource{Path: filepath.Join(dir, "adir"), Type: &file}),
			fmt.Sprintf(`MountVolume.SetUp failed for volume "data" : hostPath type check failed: %s is not a file, it's a Directory`, filepath.Join(dir, "adir"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("our text differs from upstream's (%s):\n got %q\nwant %q", tc.upstream, tc.got, tc.want)
			}
		})
	}
}

func grpcOutput(ctx context.Context, addr string, timeout time.Duration) string {
	_, out, err := probegrpc.Probe(ctx, addr, "", timeout)
	if err != nil {
		return "error: " + err.Error()
	}
	return out
}

// failedMount is the FailedMount event of a pod whose one volume is hp.
func failedMount(t *testing.T, m *Manager, hp v1.HostPathVolumeSource) string {
	t.Helper()
	pod := containertest.Pod(v1.RestartPolicyAlways, "web")
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{HostPath: &hp}}}
	_, err := m.volumes.Setup(context.Background(), pod)
	var se *volumes.SetupError
	if !errors.As(err, &se) {
		t.Fatalf("setup of %+v: %v, want a SetupError", hp, err)
	}
	return se.Event()
}

type healthServer struct{ addr string }

// grpcHealthServer serves the standard health service, its overall
// status SERVING or NOT_SERVING.
func grpcHealthServer(t *testing.T, serving bool) *healthServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	h := health.NewServer()
	if !serving {
		h.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	}
	healthpb.RegisterHealthServer(s, h)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return &healthServer{addr: l.Addr().String()}
}

// grpcServerWithoutHealth serves gRPC without the health service.
func grpcServerWithoutHealth(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return l.Addr().String()
}

// closedAddr is an address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
