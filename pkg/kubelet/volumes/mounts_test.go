package volumes

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

func TestRecursiveReadOnly(t *testing.T) {
	mode := func(m v1.RecursiveReadOnlyMode) *v1.RecursiveReadOnlyMode { return &m }
	hostToContainer := v1.MountPropagationHostToContainer
	cases := []struct {
		name  string
		mount v1.VolumeMount
		want  string // "" = honoured (as a plain read-only mount at most)
	}{
		{"unset", v1.VolumeMount{Name: "v"}, ""},
		{"Disabled", v1.VolumeMount{Name: "v", RecursiveReadOnly: mode(v1.RecursiveReadOnlyDisabled)}, ""},
		{"IfPossible degrades", v1.VolumeMount{Name: "v", ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyIfPossible)}, ""},
		{"Enabled", v1.VolumeMount{Name: "v", ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyEnabled)},
			`volume "v" requested recursive read-only mode, but it is not supported by the runtime`},
		{"not read-only", v1.VolumeMount{Name: "v", RecursiveReadOnly: mode(v1.RecursiveReadOnlyIfPossible)},
			`volume "v" requested recursive read-only mode, but it is not read-only`},
		{"with propagation", v1.VolumeMount{Name: "v", ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyIfPossible), MountPropagation: &hostToContainer},
			`not compatible with propagation "HostToContainer"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := recursiveReadOnly(tc.mount)
			if (err != nil) != (tc.want != "") || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
}

// The propagation a mount asks for needs the source's mount to propagate:
// checked against the real mount table, on a private bind, a shared one
// (MakeRShared, as at the agent's start) and a slave of it.
func TestPropagationOption(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounts need root")
	}
	dir := t.TempDir()
	private, shared, slave := filepath.Join(dir, "private"), filepath.Join(dir, "shared"), filepath.Join(dir, "slave")
	for _, d := range []string{private, shared, slave} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, d := range []string{slave, shared, private} {
			_ = unix.Unmount(d, unix.MNT_DETACH)
		}
	})
	if err := unix.Mount(private, private, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("", private, "", unix.MS_PRIVATE, ""); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second call finds it shared and does nothing
		if err := MakeRShared(shared); err != nil {
			t.Fatal(err)
		}
	}
	if mounts, err := mountsUnder(dir); err != nil || len(mounts) != 2 {
		t.Fatalf("mounts under %s: %v %v, want the private bind and one shared one", dir, mounts, err)
	}
	if err := unix.Mount(shared, slave, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("", slave, "", unix.MS_SLAVE, ""); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(shared, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	mode := func(m v1.MountPropagationMode) *v1.MountPropagationMode { return &m }
	cases := []struct {
		src  string
		mode *v1.MountPropagationMode
		want string // the option, or the error's words after "error: "
	}{
		{private, nil, ""},
		{private, mode(v1.MountPropagationNone), ""},
		{private, mode(v1.MountPropagationHostToContainer), "error: is mounted on \"" + private + "\" but it is not a shared or slave mount"},
		{private, mode(v1.MountPropagationBidirectional), "error: is mounted on \"" + private + "\" but it is not a shared mount"},
		{sub, mode(v1.MountPropagationBidirectional), "rshared"},
		{sub, mode(v1.MountPropagationHostToContainer), "rslave"},
		{slave, mode(v1.MountPropagationHostToContainer), "rslave"},
		{slave, mode(v1.MountPropagationBidirectional), "error: not a shared mount"},
	}
	for _, tc := range cases {
		got, err := propagationOption(tc.src, tc.mode)
		if err != nil {
			got = "error: " + err.Error()
		}
		if wantErr, ok := strings.CutPrefix(tc.want, "error: "); ok {
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Errorf("%s %v: got %q, want an error with %q", tc.src, tc.mode, got, wantErr)
			}
		} else if got != tc.want {
			t.Errorf("%s %v: got %q, want %q", tc.src, tc.mode, got, tc.want)
		}
	}
}
