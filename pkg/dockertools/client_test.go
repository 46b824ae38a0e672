package dockertools

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// Cancelling an event subscription leaves no goroutine behind (the library
// never closes the listener's channel).
func TestEventsCancelLeaksNoGoroutine(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/events") {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	c, err := NewClient("tcp://" + strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent() // the server's own
	for range 5 {
		ctx, cancel := context.WithCancel(context.Background())
		events, err := c.Events(ctx)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		for range events {
		}
	}
	c.c.HTTPClient.CloseIdleConnections()
	goleak.VerifyNone(t, before)
}

// One subscription asks Docker for the container actions that change state
// or health and the image actions that may make an image present, and
// turns each into the runtime's event.
func TestEventsOneSubscriptionOfContainersAndImages(t *testing.T) {
	filters := make(chan map[string][]string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var f map[string][]string
		_ = json.Unmarshal([]byte(r.URL.Query().Get("filters")), &f)
		filters <- f
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, `{"Type":"container","Action":"die","timeNano":1700000000000000001,"Actor":{"ID":"c1","Attributes":{"exitCode":"3","io.classic-kubelet.node":"n"}}}
{"Type":"image","Action":"load","timeNano":1700000000000000002,"Actor":{"ID":"sha256:abc"}}
`)
	}))
	defer srv.Close()
	c, err := NewClient("tcp://" + strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	events, err := c.Events(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []kubecontainer.Event
	for ev := range events { // closed when the stream ends
		got = append(got, ev)
	}
	want := []kubecontainer.Event{
		{Type: kubecontainer.ContainerEvent, ContainerID: "c1", Action: "die", ExitCode: 3, Time: time.Unix(0, 1700000000000000001),
			Labels: map[string]string{"exitCode": "3", "io.classic-kubelet.node": "n"}},
		{Type: kubecontainer.ImageEvent, Image: "sha256:abc", Action: "load", Time: time.Unix(0, 1700000000000000002)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events\n%+v\nwant\n%+v", got, want)
	}
	f := <-filters
	if !slices.Equal(f["type"], []string{"container", "image"}) {
		t.Errorf("types subscribed %v", f["type"])
	}
	for _, action := range []string{"die", "destroy", "oom", "health_status", "pull", "load", "tag", "import"} {
		if !slices.Contains(f["event"], action) {
			t.Errorf("action %s not subscribed: %v", action, f["event"])
		}
	}
	for _, action := range []string{"exec_create", "exec_start", "exec_die", "kill", "attach"} {
		if slices.Contains(f["event"], action) {
			t.Errorf("action %s subscribed: every exec probe would cost events", action)
		}
	}
}

// A CPU limit lifted in place reads as Docker keeps it (-1) but is
// reported unlimited (0), as for a container created without one: the
// resize is then seen done, not due again at every sync.
func TestInspectLiftedCPUQuotaIsUnlimited(t *testing.T) {
	for _, tc := range []struct {
		name        string
		quota, want int64
	}{{"lifted", -1, 0}, {"never set", 0, 0}, {"set", 40000, 40000}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !strings.HasSuffix(r.URL.Path, "/containers/abc/json") {
					http.NotFound(w, r)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(map[string]any{"Id": "abc", "Name": "/x", "Config": map[string]any{"Image": "i"},
					"State":      map[string]any{"Status": "running", "Running": true},
					"HostConfig": map[string]any{"CpuShares": 204, "CpuQuota": tc.quota, "CpuPeriod": 100000, "Memory": 64 << 20}})
			}))
			defer srv.Close()
			c, err := NewClient("tcp://" + strings.TrimPrefix(srv.URL, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			d, err := c.Inspect(context.Background(), "abc")
			if err != nil {
				t.Fatal(err)
			}
			if d.CPUQuota != tc.want || d.CPUShares != 204 || d.CPUPeriod != 100000 || d.Memory != 64<<20 {
				t.Errorf("quota %d shares %d period %d memory %d, want quota %d", d.CPUQuota, d.CPUShares, d.CPUPeriod, d.Memory, tc.want)
			}
			c.c.HTTPClient.CloseIdleConnections()
		})
	}
}
