package runtimeclass

import (
	"context"
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fakeClasses is a RuntimeClass store: a name absent from it is NotFound,
// and err, if set, is every read's error.
type fakeClasses struct {
	handlers map[string]string
	err      error
}

func (f *fakeClasses) RuntimeClass(_ context.Context, name string) (*nodev1.RuntimeClass, error) {
	if f.err != nil {
		return nil, f.err
	}
	h, ok := f.handlers[name]
	if !ok {
		return nil, apierrors.NewNotFound(nodev1.Resource("runtimeclasses"), name)
	}
	return &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: h}, nil
}

func TestHandler(t *testing.T) {
	t.Parallel()
	docker := func() ([]string, error) { return []string{"io.containerd.runc.v2", "runc"}, nil }
	dockerDown := func() ([]string, error) { return nil, errors.New("docker info: connection refused") }
	classes := &fakeClasses{handlers: map[string]string{"standard": "runc", "sandboxed": "runsc"}}
	cases := []struct {
		name     string
		classes  Classes // nil: standalone
		runtimes Runtimes
		class    *string
		want     string
		wantErr  string
	}{
		{"no class: the default handler", classes, dockerDown, nil, "", ""},
		{"empty class: the default handler", classes, dockerDown, ptr(""), "", ""},
		{"node: the class's handler", classes, docker, ptr("standard"), "runc", ""},
		{"node: a handler Docker lacks, in cri-dockerd's words", classes, docker, ptr("sandboxed"), "", `RuntimeHandler "runsc" not supported`},
		{"node: an absent class, in the kubelet's lister's words", classes, docker, ptr("gone"), "", `runtimeclass.node.k8s.io "gone" not found`},
		{"node: the API server failing", &fakeClasses{err: errors.New("connection refused")}, docker, ptr("standard"), "", "failed to lookup RuntimeClass standard: connection refused"},
		{"node: Docker not answering", classes, dockerDown, ptr("standard"), "", "runtime handlers: docker info: connection refused"},
		{"standalone: the name is the Docker runtime", nil, docker, ptr("io.containerd.runc.v2"), "io.containerd.runc.v2", ""},
		{"standalone: a runtime Docker lacks", nil, docker, ptr("kata"), "", `RuntimeHandler "kata" not supported`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{RuntimeClassName: tc.class}}
			got, err := NewResolver(tc.classes, tc.runtimes).Handler(context.Background(), pod)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("handler %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// An absent class stays a NotFound to the caller, as the kubelet's lister
// reports it.
func TestHandlerNotFoundIsNotFound(t *testing.T) {
	t.Parallel()
	_, err := NewResolver(&fakeClasses{}, nil).Handler(context.Background(), &v1.Pod{Spec: v1.PodSpec{RuntimeClassName: ptr("x")}})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("error %v, want a NotFound", err)
	}
}

func ptr(s string) *string { return &s }
