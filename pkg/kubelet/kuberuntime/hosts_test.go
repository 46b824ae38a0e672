package kuberuntime

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/container/containertest"
	"github.com/classic-kubelet/kubelet/pkg/safefile"
)

const localhostEntries = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n"

func TestHostsContent(t *testing.T) {
	aliases := []v1.HostAlias{{IP: "127.0.0.1", Hostnames: []string{"kubernetes"}}, {IP: "10.0.0.9", Hostnames: []string{"db", "db.internal"}}}
	const aliasLines = "\n# Entries added by HostAliases.\n127.0.0.1\tkubernetes\n10.0.0.9\tdb\tdb.internal\n"
	node := []byte("127.0.0.1 localhost\n192.0.2.1 node-1\n")
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"pod network", managedHostsContent("172.17.0.5", "web", "", nil),
			"# Kubernetes-managed hosts file.\n" + localhostEntries + "172.17.0.5\tweb\n"},
		{"pod network with a domain and aliases", managedHostsContent("172.17.0.5", "web-1", "shop.default.svc.cluster.local", aliases),
			"# Kubernetes-managed hosts file.\n" + localhostEntries + "172.17.0.5\tweb-1.shop.default.svc.cluster.local\tweb-1\n" + aliasLines},
		{"host network", nodeHostsContent(node, nil),
			"# Kubernetes-managed hosts file (host network).\n" + string(node)},
		{"host network with aliases", nodeHostsContent(node, aliases),
			"# Kubernetes-managed hosts file (host network).\n" + string(node) + aliasLines},
	} {
		if string(tc.got) != tc.want {
			t.Errorf("%s:\n%q\nwant\n%q", tc.name, tc.got, tc.want)
		}
	}
}

func TestHostsMount(t *testing.T) {
	node, err := os.ReadFile(etcHosts)
	if err != nil {
		t.Fatal(err)
	}
	m := newTestManager(t, Config{NodeName: "n", InfraImage: "pause:1", ClusterDomain: "example.test"}, containertest.NewFakeClient("pause:1"))
	aliases := []v1.HostAlias{{IP: "127.0.0.1", Hostnames: []string{"kubernetes"}}}
	ownHosts := v1.Container{Name: "own", VolumeMounts: []v1.VolumeMount{{Name: "h", MountPath: "/etc/hosts"}}}
	for _, tc := range []struct {
		name        string
		hostNetwork bool
		c           v1.Container
		podIP       string
		want        string // "" for no mount
	}{
		{"pod network", false, v1.Container{Name: "c"}, "172.17.0.5",
			"# Kubernetes-managed hosts file.\n" + localhostEntries + "172.17.0.5\tweb-1.shop.default.svc.example.test\tweb-1\n\n# Entries added by HostAliases.\n127.0.0.1\tkubernetes\n"},
		{"pod network, IP not known", false, v1.Container{Name: "c"}, "", ""},
		{"host network", true, v1.Container{Name: "c"}, "127.0.0.1",
			"# Kubernetes-managed hosts file (host network).\n" + string(node) + "\n# Entries added by HostAliases.\n127.0.0.1\tkubernetes\n"},
		{"container mounts its own /etc/hosts", true, ownHosts, "127.0.0.1", ""},
	} {
		pod := &v1.Pod{Spec: v1.PodSpec{HostNetwork: tc.hostNetwork, Hostname: "web-1", Subdomain: "shop", HostAliases: aliases, Containers: []v1.Container{tc.c}}}
		pod.Name = "web"
		api.SetDefaults(pod, "n", api.SourceFile)
		if err := os.MkdirAll(m.volumes.PodDir(pod.UID), 0o750); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(m.volumes.PodDir(pod.UID), podHostsFile)
		os.Remove(file)
		mnt, err := m.hostsMount(pod, &pod.Spec.Containers[0], tc.podIP)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if tc.want == "" {
			if mnt != nil {
				t.Errorf("%s: mount %+v, want none", tc.name, *mnt)
			}
			continue
		}
		if mnt == nil || mnt.Source != file || mnt.Target != "/etc/hosts" || mnt.ReadOnly {
			t.Fatalf("%s: mount %+v, want %s on /etc/hosts, writable", tc.name, mnt, file)
		}
		if got, _ := os.ReadFile(file); string(got) != tc.want {
			t.Errorf("%s: hosts file\n%q\nwant\n%q", tc.name, got, tc.want)
		}
		if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: hosts file mode %v (%v), want 0644", tc.name, fi.Mode(), err)
		}
	}
}

// The containers of a pod share one hosts file while its content is the
// same; new content replaces the file (a new inode) rather than rewriting
// the one running containers have mounted; a link is never followed.
func TestWriteIfChanged(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, podHostsFile)
	inode := func() uint64 {
		t.Helper()
		fi, err := os.Lstat(file)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	if err := writeIfChanged(dir, podHostsFile, []byte("a\n")); err != nil {
		t.Fatal(err)
	}
	first := inode()
	if err := writeIfChanged(dir, podHostsFile, []byte("a\n")); err != nil {
		t.Fatal(err)
	}
	if inode() != first {
		t.Error("unchanged content replaced the file")
	}
	for _, content := range []string{"a\nb\n", "a"} { // longer, then a prefix of the old content
		if err := writeIfChanged(dir, podHostsFile, []byte(content)); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(file); string(got) != content {
			t.Errorf("content %q, want %q", got, content)
		}
		if inode() == first {
			t.Errorf("new content %q written in place", content)
		}
		first = inode()
	}

	target := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(target, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(file)
	if err := os.Symlink(target, file); err != nil {
		t.Fatal(err)
	}
	if err := writeIfChanged(dir, podHostsFile, []byte("x")); !errors.Is(err, safefile.ErrEscape) {
		t.Errorf("hosts file a symlink: %v, want %v", err, safefile.ErrEscape)
	}
	if got, _ := os.ReadFile(target); string(got) != "keep" {
		t.Errorf("the link's target was written: %q", got)
	}
}
