package nodestatus

import (
	"errors"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

func TestImages(t *testing.T) {
	t.Parallel()
	img := func(size int64, names ...string) kubecontainer.Image {
		return kubecontainer.Image{Names: names, Size: size}
	}
	many := []string{"r@sha256:1", "a:1", "a:2", "a:3", "a:4", "a:5"}
	images := []kubecontainer.Image{img(10, "small:1"), img(30, many...), img(20, "mid@sha256:2", "mid:1"), img(5)}
	cases := []struct {
		name  string
		limit int
		want  []v1.ContainerImage
	}{
		{"the largest first, five names at most", -1, []v1.ContainerImage{
			{Names: many[:5], SizeBytes: 30}, {Names: []string{"mid@sha256:2", "mid:1"}, SizeBytes: 20},
			{Names: []string{"small:1"}, SizeBytes: 10}, {SizeBytes: 5}}},
		{"bounded by the limit", 2, []v1.ContainerImage{
			{Names: many[:5], SizeBytes: 30}, {Names: []string{"mid@sha256:2", "mid:1"}, SizeBytes: 20}}},
		{"none asked: none", 0, nil},
		{"a limit past the list: all", 50, []v1.ContainerImage{
			{Names: many[:5], SizeBytes: 30}, {Names: []string{"mid@sha256:2", "mid:1"}, SizeBytes: 20},
			{Names: []string{"small:1"}, SizeBytes: 10}, {SizeBytes: 5}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Images(images, tc.limit)
			for i := range got { // nil and empty names are one to the API
				if len(got[i].Names) == 0 {
					got[i].Names = nil
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("images %+v, want %+v", got, tc.want)
			}
		})
	}
	if images[0].Size != 10 {
		t.Errorf("the caller's list was reordered")
	}
}

func TestRuntimeHandlers(t *testing.T) {
	t.Parallel()
	got := RuntimeHandlers([]string{"io.containerd.runc.v2", "runc"})
	var names []string
	for _, h := range got {
		names = append(names, h.Name)
		if f := h.Features; f == nil || f.RecursiveReadOnlyMounts == nil || *f.RecursiveReadOnlyMounts || f.UserNamespaces == nil || *f.UserNamespaces {
			t.Errorf("handler %q features %+v, want both false (the agent supports neither)", h.Name, f)
		}
	}
	if want := []string{"", "io.containerd.runc.v2", "runc"}; !reflect.DeepEqual(names, want) {
		t.Errorf("handlers %q, want the default one first, then Docker's runtimes %q", names, want)
	}
}

// The runtime's handlers and images are asked once per runtimeRefresh, and
// a failure keeps the last good list.
func TestBuildRuntimeRefresh(t *testing.T) {
	t.Parallel()
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	var lists int
	var listErr error
	b := &Builder{Name: "n", RootDir: t.TempDir(), Health: func() (error, error) { return nil, nil },
		RuntimeVersion: func() (string, error) { return "28.0.0", nil }, Clock: clk, MaxImages: 50,
		Runtimes: func() ([]string, error) { return []string{"runc"}, nil },
		Images: func() ([]kubecontainer.Image, error) {
			lists++
			return []kubecontainer.Image{{Names: []string{"a:1"}, Size: int64(lists)}}, listErr
		}}
	n := b.Build()
	b.Build()
	if lists != 1 || len(n.Status.Images) != 1 || len(n.Status.RuntimeHandlers) != 2 {
		t.Fatalf("lists %d, images %+v, handlers %+v", lists, n.Status.Images, n.Status.RuntimeHandlers)
	}
	if f := n.Status.Features; f == nil || f.SupplementalGroupsPolicy == nil || *f.SupplementalGroupsPolicy {
		t.Errorf("features %+v, want supplementalGroupsPolicy false (Strict is refused)", f)
	}
	if !reflect.DeepEqual(n.Status.DeclaredFeatures, []string{"ExtendWebSocketsToKubelet"}) {
		t.Errorf("declaredFeatures %q", n.Status.DeclaredFeatures)
	}
	clk.SetTime(clk.Now().Add(runtimeRefresh))
	listErr = errors.New("docker down")
	if n = b.Build(); lists != 2 || len(n.Status.Images) != 1 || n.Status.Images[0].SizeBytes != 1 {
		t.Errorf("after a failed list: lists %d, images %+v; want the last good one", lists, n.Status.Images)
	}
	listErr = nil
	if n = b.Build(); lists != 3 || n.Status.Images[0].SizeBytes != 3 {
		t.Errorf("after a good list: lists %d, images %+v", lists, n.Status.Images)
	}
}
