package volumes

import (
	"net"
	"os"
	"path/filepath"
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
		{"sizeLimit past int64: the node's memory", 8 << 30, 0, q("1e30"), 8 << 30},
		{"sizeLimit past int64: the pod's limit", 8 << 30, 256 << 20, q("1e30"), 256 << 20},
		{"sizeLimit just below the node", 1 << 30, 0, q("1073741823"), 1<<30 - 1},
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

// A subPath is resolved beneath the volume's root: links that stay inside
// are followed (an atomic writer's names), one that leads out is refused;
// a missing path is made one component at a time, refusing links.
func TestOpenBeneath(t *testing.T) {
	root := t.TempDir()
	mustMkdir(t, root+"/a/b")
	mustSymlink(t, "/etc", root+"/link")
	mustSymlink(t, "b", root+"/a/rel")
	mustSymlink(t, "../a/b", root+"/a/up")
	mustSymlink(t, "../../x", root+"/a/esc")
	cases := []struct {
		sub     string
		wantErr string
	}{
		{"a/b", ""},
		{"a/new/dir", ""}, // created, as Kubernetes does
		{"a/rel", ""},
		{"a/up", ""},
		{"link", "not within volume path"},
		{"link/passwd", "not within volume path"},
		{"a/esc", "not within volume path"},
		{"link/new", "not within volume path"},
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

// Each hostPath type is checked at setup as the kubelet checks it, with its
// messages; the *OrCreate types make what is missing.
func TestCheckHostPath(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, sock, filepath.Join(dir, "link-to-sock"))
	block := blockDevice()
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name, path string
		typ        v1.HostPathType
		wantErr    string // "" for none
		made       os.FileMode
	}{
		{"unset checks nothing", missing, v1.HostPathUnset, "", 0},
		{"directory", dir, v1.HostPathDirectory, "", 0},
		{"directory missing", missing, v1.HostPathDirectory, "hostPath " + missing + " doesn't exist", 0},
		{"directory is a file", file, v1.HostPathDirectory, "hostPath type check failed: " + file + " is not a directory, it's a File", 0},
		{"directory or create: made", filepath.Join(dir, "new/dir"), v1.HostPathDirectoryOrCreate, "", os.ModeDir},
		{"directory or create: a file", file, v1.HostPathDirectoryOrCreate, "is not a directory, it's a File", 0},
		{"file", file, v1.HostPathFile, "", 0},
		{"file is a directory", dir, v1.HostPathFile, "hostPath type check failed: " + dir + " is not a file, it's a Directory", 0},
		{"file or create: made", filepath.Join(dir, "new-file"), v1.HostPathFileOrCreate, "", 0},
		{"file or create: a socket", sock, v1.HostPathFileOrCreate, "is not a file, it's a Socket", 0},
		{"socket", sock, v1.HostPathSocket, "", 0},
		{"socket through a link", filepath.Join(dir, "link-to-sock"), v1.HostPathSocket, "", 0},
		{"socket is a file", file, v1.HostPathSocket, "hostPath type check failed: " + file + " is not a socket file, it's a File", 0},
		{"socket missing", missing, v1.HostPathSocket, "hostPath " + missing + " doesn't exist", 0},
		{"char device", "/dev/null", v1.HostPathCharDev, "", 0},
		{"char device is a socket", sock, v1.HostPathCharDev, "is not a character device, it's a Socket", 0},
		{"block device", block, v1.HostPathBlockDev, "", 0},
		{"block device is a char device", "/dev/null", v1.HostPathBlockDev, "hostPath type check failed: /dev/null is not a block device, it's a CharDevice", 0},
		{"a fifo is no type", fifo, v1.HostPathFile, "hostPath type check failed, " + fifo + " is not a file, unable to determine its type: only recognise", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.path == "" {
				t.Skip("no block device on this machine (none of /dev/loop0, /dev/vda, /dev/sda, /dev/nvme0n1)")
			}
			typ := tc.typ
			err := checkHostPath(&v1.HostPathVolumeSource{Path: tc.path, Type: &typ})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("err %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
			if strings.HasSuffix(tc.name, "made") {
				fi, err := os.Stat(tc.path)
				if err != nil || fi.Mode().Type() != tc.made {
					t.Errorf("made %v (%v), want type %v", fi, err, tc.made)
				}
			}
		})
	}
}

// blockDevice is a block device of this machine, or "".
func blockDevice() string {
	for _, p := range []string{"/dev/loop0", "/dev/vda", "/dev/sda", "/dev/nvme0n1"} {
		if fi, err := os.Stat(p); err == nil && fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0 {
			return p
		}
	}
	return ""
}
