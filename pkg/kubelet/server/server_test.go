package server

import (
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/classic-kubelet/kubelet/pkg/config"
)

var update = flag.Bool("update", false, "rewrite golden files")

type fakeHost struct{ pods []*v1.Pod }

func (f *fakeHost) GetPods() []*v1.Pod { return f.pods }
func (f *fakeHost) GetPod(ns, name string) (*v1.Pod, bool) {
	for _, p := range f.pods {
		if p.Namespace == ns && p.Name == name {
			return p.DeepCopy(), true
		}
	}
	return nil, false
}

type fakeSource struct{ calls []string }

func (f *fakeSource) Upsert(_ context.Context, body []byte) ([]string, error) {
	if strings.Contains(string(body), "bad") {
		return nil, errors.New("document 1: spec.containers[0].bad: unknown field")
	}
	f.calls = append(f.calls, "upsert")
	return []string{"default/a"}, nil
}
func (f *fakeSource) Replace(_ context.Context, _ []byte) ([]string, error) {
	f.calls = append(f.calls, "replace")
	return []string{}, nil
}
func (f *fakeSource) Delete(_ context.Context, ns, name string) bool {
	f.calls = append(f.calls, "delete "+ns+"/"+name)
	return name == "a"
}

type fakeSources struct{}

func (fakeSources) Status() []config.SourceStatus {
	t := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return []config.SourceStatus{
		{Name: "file", Seen: true, Pods: 1, LastSuccess: &t},
		{Name: "http", LastError: "HTTP 500", LastErrorAt: &t},
	}
}

func testServer(t *testing.T) (*fakeSource, *httptest.Server, *httptest.Server) {
	t.Helper()
	start := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	host := &fakeHost{pods: []*v1.Pod{{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "server", Image: "srv:1"}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, PodIP: "172.17.0.2", StartTime: &start,
			ContainerStatuses: []v1.ContainerStatus{{Name: "server", Ready: true, ContainerID: "docker://abc",
				State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: start}}}}},
	}}}
	src := &fakeSource{}
	s := New(host, src, fakeSources{})
	full := httptest.NewServer(s.Handler(false))
	ro := httptest.NewServer(s.Handler(true))
	t.Cleanup(func() { full.Close(); ro.Close() })
	return src, full, ro
}

func do(t *testing.T, method, url, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp, string(data)
}

func TestRoutes(t *testing.T) {
	src, full, ro := testServer(t)
	cases := []struct {
		name       string
		base       *httptest.Server
		method     string
		path, body string
		code       int
		contains   string
		golden     string
		allow      string
	}{
		{"healthz", full, "GET", "/healthz", "", 200, "ok", "", ""},
		{"healthz read-only", ro, "GET", "/healthz", "", 200, "ok", "", ""},
		{"pods", ro, "GET", "/pods", "", 200, "", "pods.json", ""},
		{"one pod", full, "GET", "/pods/default/web", "", 200, `"kind": "Pod"`, "", ""},
		{"missing pod", full, "GET", "/pods/default/nope", "", 404, `"message": "pod default/nope not found"`, "", ""},
		{"sources", ro, "GET", "/sources", "", 200, "", "sources.json", ""},
		{"unknown path", full, "GET", "/nope", "", 404, `"kind": "Status"`, "", ""},
		{"trailing junk", full, "GET", "/pods/default/web/extra", "", 404, "no such endpoint", "", ""},
		{"wrong method", full, "DELETE", "/healthz", "", 405, "not allowed", "", "GET"},
		{"wrong method lists all allowed", full, "PATCH", "/pods", "", 405, "not allowed", "", "GET, POST, PUT"},
		{"post on read-only", ro, "POST", "/pods", "{}", 405, "read-only port", "", ""},
		{"delete on read-only", ro, "DELETE", "/pods/default/a", "", 405, "read-only port", "", ""},
		{"post", full, "POST", "/pods", "apiVersion: v1", 200, `"default/a"`, "", ""},
		{"post invalid names the field", full, "POST", "/pods", "bad", 400, "spec.containers[0].bad", "", ""},
		{"post too big", full, "POST", "/pods", strings.Repeat("x", MaxBodyBytes+1), 413, "larger than", "", ""},
		{"put", full, "PUT", "/pods", "apiVersion: v1\nkind: List\nitems: []", 200, `"pods": []`, "", ""},
		{"delete", full, "DELETE", "/pods/default/a", "", 200, `"default/a"`, "", ""},
		{"delete other source's pod", full, "DELETE", "/pods/default/web", "", 404, "not a pod of the API source", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := do(t, c.method, c.base.URL+c.path, c.body)
			if resp.StatusCode != c.code {
				t.Fatalf("status %d, want %d; body %s", resp.StatusCode, c.code, body)
			}
			if c.code >= 400 && resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("error content type %q, want JSON", resp.Header.Get("Content-Type"))
			}
			if c.contains != "" && !strings.Contains(body, c.contains) {
				t.Errorf("body %s lacks %q", body, c.contains)
			}
			if c.allow != "" && resp.Header.Get("Allow") != c.allow {
				t.Errorf("Allow %q, want %q", resp.Header.Get("Allow"), c.allow)
			}
			if c.golden != "" {
				path := filepath.Join("testdata", c.golden)
				if *update {
					_ = os.WriteFile(path, []byte(body), 0o644)
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if body != string(want) {
					t.Errorf("body differs from %s:\n%s", path, body)
				}
			}
		})
	}
	want := "upsert,replace,delete default/a,delete default/web"
	if got := strings.Join(src.calls, ","); got != want {
		t.Errorf("source calls %s, want %s (read-only and invalid requests must not reach it)", got, want)
	}
}
