package diskusage

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// countdownCtx is a context whose deadline passes after its Err has been
// asked n times: the walk's budget running out at a chosen point, with no
// clock.
type countdownCtx struct {
	context.Context
	n int
}

func (c *countdownCtx) Err() error {
	if c.n <= 0 {
		return context.DeadlineExceeded
	}
	c.n--
	return nil
}

// The volumes' walk counts allocated blocks as du does, and stops when its
// budget is spent.
func TestDuBytes(t *testing.T) {
	const mib = 1 << 20
	write := func(t *testing.T, path string, size int) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name     string
		build    func(t *testing.T, dir string)
		ctx      func() context.Context
		min, max int64
		whole    bool
	}{
		{"missing", func(t *testing.T, dir string) { os.Remove(dir) }, nil, 0, 0, true},
		{"written file", func(t *testing.T, dir string) { write(t, dir+"/f", 8*mib) }, nil, 8 * mib, 9 * mib, true},
		{"sparse file counts its blocks, not its length", func(t *testing.T, dir string) {
			f, err := os.Create(dir + "/sparse")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if err := f.Truncate(1 << 30); err != nil {
				t.Fatal(err)
			}
		}, nil, 0, mib, true},
		{"hard links once", func(t *testing.T, dir string) {
			write(t, dir+"/f", 4*mib)
			for i := range 10 {
				if err := os.Link(dir+"/f", dir+"/link"+strconv.Itoa(i)); err != nil {
					t.Fatal(err)
				}
			}
		}, nil, 4 * mib, 5 * mib, true},
		{"symlink not followed", func(t *testing.T, dir string) {
			outside := t.TempDir() + "/big"
			write(t, outside, 4*mib)
			if err := os.Symlink(outside, dir+"/link"); err != nil {
				t.Fatal(err)
			}
		}, nil, 0, mib, true},
		{"nested directories", func(t *testing.T, dir string) {
			for _, p := range []string{"/a/f", "/a/b/f", "/a/b/c/f", "/a/b/c/d/f"} {
				write(t, dir+p, mib)
			}
		}, nil, 4 * mib, 5 * mib, true},
		{"many empty files, then a large one", func(t *testing.T, dir string) {
			for i := range 1000 {
				write(t, dir+"/"+strconv.Itoa(i), 0)
			}
			write(t, dir+"/zz-big", 4*mib)
		}, nil, 4 * mib, 5 * mib, true},
		{"budget spent from the start", func(t *testing.T, dir string) { write(t, dir+"/a/f", 4*mib) },
			func() context.Context { return &countdownCtx{Context: context.Background()} }, 0, mib, false},
		{"budget runs out midway", func(t *testing.T, dir string) {
			for i := range 100 {
				write(t, dir+"/"+strconv.Itoa(i), 64<<10)
			}
		}, func() context.Context { return &countdownCtx{Context: context.Background(), n: 20} }, 10 * 64 << 10, 30 * 64 << 10, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.build(t, dir)
			ctx := context.Background()
			if tc.ctx != nil {
				ctx = tc.ctx()
			}
			n, whole := DirBytes(ctx, dir)
			if n < tc.min || n > tc.max || whole != tc.whole {
				t.Errorf("%d bytes (whole %v), want %d to %d (whole %v)", n, whole, tc.min, tc.max, tc.whole)
			}
		})
	}
}
