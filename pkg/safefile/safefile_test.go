package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// layout makes root (with dir "d" and file "d/f") and outside (with file
// "secret"), and plants the links a hostile container would.
func layout(t *testing.T) (root, outside string) {
	t.Helper()
	base := t.TempDir()
	root, outside = filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(root, "d"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must(t, os.WriteFile(filepath.Join(root, "d", "f"), []byte("inside"), 0o644))
	must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o600))
	must(t, os.Symlink(outside, filepath.Join(root, "dirlink")))
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "filelink")))
	must(t, os.Symlink("../outside", filepath.Join(root, "d", "rellink")))
	return root, outside
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// outsideUnchanged checks that nothing outside root was written or chmod-ed.
func outsideUnchanged(t *testing.T, outside string) {
	t.Helper()
	entries, _ := os.ReadDir(outside)
	if len(entries) != 1 {
		t.Errorf("outside holds %d entries, want only its secret", len(entries))
	}
	fi, err := os.Stat(filepath.Join(outside, "secret"))
	must(t, err)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("outside secret mode %v, want 0600", fi.Mode().Perm())
	}
	data, _ := os.ReadFile(filepath.Join(outside, "secret"))
	if string(data) != "secret" {
		t.Errorf("outside secret now %q", data)
	}
	di, _ := os.Stat(outside)
	if di.Mode().Perm() != 0o755 {
		t.Errorf("outside dir mode %v, want 0755", di.Mode().Perm())
	}
}

func TestWriteBeneath(t *testing.T) {
	for _, tc := range []struct {
		name, rel string
		refused   bool
	}{
		{"plain file", "d/new", false},
		{"new directories", "a/b/c", false},
		{"replace a file", "d/f", false},
		{"through a directory link", "dirlink/x", true},
		{"through a relative link", "d/rellink/x", true},
		{"over a file link", "filelink", false}, // the link is replaced, not followed
		{"dot-dot", "../outside/x", true},
		{"absolute", "/tmp/x", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, outside := layout(t)
			err := WriteBeneath(root, tc.rel, []byte("v"), 0o640, 0o755, -1)
			if tc.refused {
				if err == nil {
					t.Fatalf("WriteBeneath(%q) succeeded, want refused", tc.rel)
				}
			} else {
				must(t, err)
				fi, err := os.Lstat(filepath.Join(root, tc.rel))
				must(t, err)
				if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o640 {
					t.Errorf("%s: mode %v, want a regular file 0640", tc.rel, fi.Mode())
				}
			}
			outsideUnchanged(t, outside)
		})
	}
}

func TestMkdirBeneath(t *testing.T) {
	root, outside := layout(t)
	fd, err := MkdirBeneath(root, "x/y", 0o777, -1)
	must(t, err)
	unix.Close(fd)
	if fi, _ := os.Stat(filepath.Join(root, "x", "y")); fi == nil || fi.Mode().Perm() != 0o777 {
		t.Errorf("x/y not made 0777: %v", fi)
	}
	for _, rel := range []string{"dirlink", "dirlink/sub", "d/rellink", "filelink", "../outside"} {
		if fd, err := MkdirBeneath(root, rel, 0o777, -1); err == nil {
			unix.Close(fd)
			t.Errorf("MkdirBeneath(%q) succeeded, want refused", rel)
		}
	}
	outsideUnchanged(t, outside)
}

func TestOpenBeneath(t *testing.T) {
	root, outside := layout(t)
	for _, impl := range []string{"openat2", "walk"} {
		t.Run(impl, func(t *testing.T) {
			open := func(rel string, flags int) (*os.File, error) {
				if impl == "openat2" {
					return OpenBeneath(root, rel, flags, 0o644)
				}
				parts, err := split(rel)
				if err != nil {
					return nil, err
				}
				rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY, 0)
				must(t, err)
				defer unix.Close(rfd)
				fd, err := walk(rfd, parts, flags, 0o644)
				if err != nil {
					return nil, err
				}
				return os.NewFile(uintptr(fd), rel), nil
			}
			f, err := open("d/f", unix.O_RDONLY)
			must(t, err)
			f.Close()
			for _, rel := range []string{"filelink", "dirlink/secret", "d/rellink/secret", "../outside/secret"} {
				if f, err := open(rel, unix.O_RDWR|unix.O_TRUNC); err == nil {
					f.Close()
					t.Errorf("open(%q) succeeded, want refused", rel)
				}
			}
			outsideUnchanged(t, outside)
		})
	}
}

func TestOpenBeneathNamesEscapes(t *testing.T) {
	root, _ := layout(t)
	_, err := OpenBeneath(root, "dirlink/secret", unix.O_RDONLY, 0)
	if !errors.Is(err, ErrEscape) || !strings.Contains(err.Error(), "dirlink/secret") {
		t.Errorf("error %v, want ErrEscape naming the path", err)
	}
}

func TestWriteAtomic(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sub", "state.json")
	must(t, WriteAtomic(p, []byte("one")))
	must(t, WriteAtomic(p, []byte("two")))
	data, err := os.ReadFile(p)
	must(t, err)
	if string(data) != "two" {
		t.Errorf("content %q, want two", data)
	}
	entries, _ := os.ReadDir(filepath.Dir(p))
	if len(entries) != 1 {
		t.Errorf("%d files left beside it, want none", len(entries)-1)
	}
}
