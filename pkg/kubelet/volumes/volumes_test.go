package volumes

import (
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestMemoryVolumeSize(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	for _, tc := range []struct {
		name           string
		node, podLimit int64
		sizeLimit      *resource.Quantity
		want           int64
	}{
		{"node only", 8 << 30, 0, nil, 8 << 30},
		{"pod limit below node", 8 << 30, 256 << 20, nil, 256 << 20},
		{"sizeLimit smallest", 8 << 30, 256 << 20, q("64Mi"), 64 << 20},
		{"sizeLimit above pod limit", 8 << 30, 256 << 20, q("1Gi"), 256 << 20},
		{"sizeLimit above node", 1 << 30, 0, q("1Ti"), 1 << 30},
		{"zero sizeLimit means unset", 1 << 30, 0, q("0"), 1 << 30},
		{"node unknown, pod limit", 0, 128 << 20, nil, 128 << 20},
		{"nothing known", 0, 0, nil, 0},
	} {
		if got := memoryVolumeSize(tc.node, tc.podLimit, tc.sizeLimit); got != tc.want {
			t.Errorf("%s: size %d, want %d", tc.name, got, tc.want)
		}
	}
	limits := func(mem string) v1.ResourceRequirements {
		return v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse(mem)}}
	}
	pod := &v1.Pod{Spec: v1.PodSpec{
		InitContainers: []v1.Container{{Name: "i", Resources: limits("300Mi")}},
		Containers:     []v1.Container{{Name: "a", Resources: limits("100Mi")}, {Name: "b", Resources: limits("150Mi")}},
	}}
	if got := podMemoryLimit(pod); got != 300<<20 {
		t.Errorf("pod limit %d, want the init container's 300Mi", got)
	}
	pod.Spec.Containers[1].Resources = v1.ResourceRequirements{}
	if got := podMemoryLimit(pod); got != 0 {
		t.Errorf("pod limit %d with a container unlimited, want none", got)
	}
}

// A subPath is opened one component at a time: a symlink anywhere in it
// is refused, whatever it points at.
func TestOpenBeneath(t *testing.T) {
	root := t.TempDir()
	mustMkdir(t, root+"/a/b")
	mustSymlink(t, "/etc", root+"/link")
	mustSymlink(t, "b", root+"/a/rel")
	cases := []struct {
		sub     string
		wantErr string
	}{
		{"a/b", ""},
		{"a/new/dir", ""}, // created, as Kubernetes does
		{"link", "symlink"},
		{"link/passwd", "symlink"},
		{"a/rel", "symlink"},
		{"../x", "'..'"},
		{"/etc", "relative"},
	}
	for _, c := range cases {
		fd, _, err := openBeneath(root, c.sub)
		if err == nil {
			closeFD(fd)
		}
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%s: %v", c.sub, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: err %v, want %q", c.sub, err, c.wantErr)
		}
	}
}

func mustMkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, p string) {
	t.Helper()
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

func closeFD(fd int) { _ = unix.Close(fd) }
