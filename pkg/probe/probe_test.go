package probe_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/classic-kubelet/kubelet/pkg/await"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/probe"
	probeexec "github.com/classic-kubelet/kubelet/pkg/probe/exec"
	probegrpc "github.com/classic-kubelet/kubelet/pkg/probe/grpc"
	probehttp "github.com/classic-kubelet/kubelet/pkg/probe/http"
	probetcp "github.com/classic-kubelet/kubelet/pkg/probe/tcp"
)

func TestHTTPProbe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			if r.Header.Get("X-Check") != "yes" {
				w.WriteHeader(400)
			}
		case "/redirect":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/away":
			http.Redirect(w, r, "http://192.0.2.1/", http.StatusFound) // another host: not followed
		case "/slow": // answers once the prober gave up (or, if it never does, much later)
			select {
			case <-r.Context().Done():
			case <-time.After(await.Timeout):
			}
		case "/fail":
			w.WriteHeader(500)
		case "/teapot":
			w.WriteHeader(399)
		}
	}))
	defer srv.Close()
	tls := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer tls.Close()
	p := probehttp.New()
	cases := []struct {
		url     string
		timeout time.Duration
		want    probe.Result
	}{
		{srv.URL + "/ok", time.Second, probe.Success},
		{srv.URL + "/redirect", time.Second, probe.Success},
		{srv.URL + "/away", time.Second, probe.Warning}, // the 302 not followed: a success with a warning
		{srv.URL + "/teapot", time.Second, probe.Warning},
		{srv.URL + "/fail", time.Second, probe.Failure},
		{srv.URL + "/slow", 100 * time.Millisecond, probe.Failure},
		{tls.URL + "/", time.Second, probe.Success}, // certificate not verified
		{"http://127.0.0.1:1/", time.Second, probe.Failure},
	}
	for _, c := range cases {
		u, _ := url.Parse(c.url)
		got, out, err := p.Probe(context.Background(), u, http.Header{"X-Check": {"yes"}}, c.timeout)
		if err != nil || got != c.want {
			t.Errorf("%s: %v %q %v, want %v", c.url, got, out, err, c.want)
		}
		if got == probe.Warning && !strings.HasPrefix(out, "Probe terminated redirects, Response body: ") {
			t.Errorf("%s: warning %q, want the kubelet's message", c.url, out)
		}
	}
}

func TestTCPProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if r, _, _ := probetcp.Probe(context.Background(), addr, time.Second); r != probe.Success {
		t.Errorf("open port: %v", r)
	}
	l.Close()
	if r, _, _ := probetcp.Probe(context.Background(), addr, time.Second); r != probe.Failure {
		t.Errorf("closed port: %v", r)
	}
}

func TestGRPCProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	addr := l.Addr().String()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	if r, out, err := probegrpc.Probe(context.Background(), addr, "", time.Second); r != probe.Success || err != nil {
		t.Errorf("serving: %v %q %v", r, out, err)
	}
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	if r, _, _ := probegrpc.Probe(context.Background(), addr, "", time.Second); r != probe.Failure {
		t.Errorf("not serving: %v", r)
	}
	if r, _, _ := probegrpc.Probe(context.Background(), addr, "unknown-service", time.Second); r != probe.Failure {
		t.Errorf("unknown service: %v", r)
	}
}

type fakeExec struct {
	code int
	out  string
	err  error
}

func (f fakeExec) Exec(context.Context, string, []string, time.Duration) (int, []byte, error) {
	return f.code, []byte(f.out), f.err
}

func TestExecProbe(t *testing.T) {
	cases := []struct {
		e       fakeExec
		want    probe.Result
		wantErr bool
	}{
		{fakeExec{0, "fine", nil}, probe.Success, false},
		{fakeExec{1, "bad", nil}, probe.Failure, false},
		{fakeExec{0, "", kubecontainer.ErrExecTimeout}, probe.Failure, false},
		{fakeExec{0, "", context.DeadlineExceeded}, probe.Failure, true},
	}
	for _, c := range cases {
		got, _, err := probeexec.Probe(context.Background(), c.e, "id", []string{"true"}, time.Second)
		if got != c.want || (err != nil) != c.wantErr {
			t.Errorf("%+v: %v %v", c.e, got, err)
		}
	}
}
