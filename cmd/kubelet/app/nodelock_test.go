package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNodeLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks", "n1.lock")
	first, err := lockFile(path, "n1", "/root/a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockFile(path, "n1", "/root/b"); err == nil || !strings.Contains(err.Error(), "is taken by another agent") || !strings.Contains(err.Error(), "root dir /root/a") {
		t.Errorf("second lock of a held name: %v", err)
	}
	first.release()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("lock file after release: %v", err)
	}
	// A file left by an agent that died (no one holds its lock) is no
	// obstacle, and is removed by the next agent's release.
	if err := os.WriteFile(path, []byte("pid 1, root dir /gone\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := lockFile(path, "n1", "/root/c")
	if err != nil {
		t.Fatalf("lock over a stale file: %v", err)
	}
	if data, _ := os.ReadFile(path); !strings.Contains(string(data), "root dir /root/c") {
		t.Errorf("lock file says %q", data)
	}
	again.release()
	if _, err := os.Lstat(path); !os.IsNotExist(err) {
		t.Errorf("lock file after the second release: %v", err)
	}
}

// An agent that opened the lock file just before its holder removed it
// must not count the lock it then gets on the removed file.
func TestIsFileAt(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name  string
		after func(path string) // what happens to path once it is open
		want  bool
	}{
		{"still there", func(string) {}, true},
		{"removed", func(p string) { _ = os.Remove(p) }, false},
		{"replaced by a new file", func(p string) { _ = os.Remove(p); _ = os.WriteFile(p, nil, 0o644) }, false},
		{"replaced by a symlink to it", func(p string) { _ = os.Rename(p, p+".real"); _ = os.Symlink(p+".real", p) }, false},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, string(rune('a'+i))+".lock")
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			c.after(path)
			got, err := isFileAt(f, path)
			if err != nil || got != c.want {
				t.Errorf("isFileAt = %v, %v; want %v", got, err, c.want)
			}
		})
	}
}

// Releasing never removes a file another agent has put at the path since.
func TestNodeLockReleaseKeepsAnotherFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "n2.lock")
	l, err := lockFile(path, "n2", "/root/a")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(path)
	if err := os.WriteFile(path, []byte("other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l.release()
	if data, err := os.ReadFile(path); err != nil || string(data) != "other\n" {
		t.Errorf("another agent's lock file after release: %q, %v", data, err)
	}
}
