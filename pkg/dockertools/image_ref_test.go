package dockertools

import (
	"context"
	"testing"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// A container status's imageID, as the kubelet with cri-dockerd reports it
// (cri-dockerd core/convert.go, toPullableImageID): the first repo digest
// under docker-pullable://, else the image's ID under docker://.
func TestPullableImageID(t *testing.T) {
	const id = "sha256:5b0d4a2f"
	for _, tc := range []struct {
		name    string
		digests []string
		want    string
	}{
		{"pulled", []string{"busybox@sha256:abc"}, "docker-pullable://busybox@sha256:abc"},
		{"pulled from two repositories", []string{"reg.test/app@sha256:abc", "app@sha256:abc"}, "docker-pullable://reg.test/app@sha256:abc"},
		{"built here", nil, "docker://" + id},
		{"untagged leftovers", []string{"<none>@<none>"}, "docker://" + id},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PullableImageID(id, tc.digests); got != tc.want {
				t.Errorf("PullableImageID(%q, %q) = %q, want %q", id, tc.digests, got, tc.want)
			}
		})
	}
}

// Inspect gives each container its image's imageID; the image is
// inspected once while no pull or removal happens, and a repo digest a
// pull gave it shows after the pull.
func TestInspectImageRef(t *testing.T) {
	e, c := newEngine(t)
	ctx := context.Background()
	spec := &kubecontainer.CreateSpec{Name: "k8s_app.1_p_ns_u_0001", Image: "img:1",
		Labels: map[string]string{kubecontainer.LabelOwner: "n", kubecontainer.LabelPodUID: "u"}}
	id, err := c.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	inspectRef := func() string {
		t.Helper()
		d, err := c.Inspect(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return d.ImageRef
	}
	if got := inspectRef(); got != "docker://sha256:img1" {
		t.Errorf("imageID of an image with no repo digest = %q, want docker://sha256:img1", got)
	}
	e.mu.Lock()
	e.images["sha256:img1"].RepoDigests = []string{"img@sha256:d1"}
	before := e.inspects
	e.mu.Unlock()
	if got := inspectRef(); got != "docker://sha256:img1" {
		t.Errorf("imageID before a pull = %q, want the remembered docker://sha256:img1", got)
	}
	e.mu.Lock()
	if e.inspects != before {
		t.Errorf("%d image inspects for a second container inspect, want none", e.inspects-before)
	}
	e.mu.Unlock()
	if err := c.PullAuth(ctx, "reg.test/app:2", nil, 0); err != nil {
		t.Fatal(err)
	}
	if got := inspectRef(); got != "docker-pullable://img@sha256:d1" {
		t.Errorf("imageID after a pull = %q, want docker-pullable://img@sha256:d1", got)
	}
}
