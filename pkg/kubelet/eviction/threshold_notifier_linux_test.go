package eviction

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/cgroups"
)

// allocateHelperEnv, set to a size in MiB, makes the test binary the
// allocating process of TestMemoryThresholdNotificationKernel.
const allocateHelperEnv = "EVICTION_TEST_ALLOCATE_MIB"

// allocateHelper waits for a line on stdin (the test moves it into its
// cgroup meanwhile), then allocates and touches the MiB it was given,
// says "allocated" and holds them until stdin closes.
func allocateHelper() {
	mib, err := strconv.Atoi(os.Getenv(allocateHelperEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadString('\n'); err != nil {
		os.Exit(2)
	}
	b := make([]byte, mib<<20)
	for i := 0; i < len(b); i += os.Getpagesize() {
		b[i] = 1
	}
	fmt.Println("allocated")
	_, _ = io.Copy(io.Discard, in)
	runtime.KeepAlive(b)
}

// The kernel's side, on a child memory cgroup of this host's (cgroup v1,
// as root): a level registered 16 MiB above the cgroup's usage is crossed
// by a process that allocates 64 MiB in it, and the notifier, armed as the
// eviction loop arms it, says so on Crossed. Skipped where there is no
// cgroup v1 memory controller or the test is not root; under CI=true a
// cgroup that cannot be created there fails it.
func TestMemoryThresholdNotificationKernel(t *testing.T) {
	mount := requireMemoryV1(t)
	dir := filepath.Join(mount, fmt.Sprintf("classic-kubelet-eviction-test-%d-%d", os.Getpid(), time.Now().UnixNano()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("create a memory cgroup: %v", err)
		}
		t.Skipf("cannot create a memory cgroup: %v", err)
	}
	t.Cleanup(func() { // after the helper's exit (cleanups run last first)
		if err := os.Remove(dir); err != nil {
			t.Errorf("remove the test's cgroup: %v", err)
		}
	})

	usage, err := cgroups.ReadInt(filepath.Join(dir, "memory.usage_in_bytes"))
	if err != nil {
		t.Fatal(err)
	}
	stat, err := cgroups.ReadStat(filepath.Join(dir, "memory.stat"))
	if err != nil {
		t.Fatal(err)
	}
	// A threshold on a 1 GiB "node" whose level is 16 MiB above the usage.
	const capacity = 1 << 30
	level := usage + 16<<20
	q := resource.NewQuantity(capacity-level+stat["total_inactive_file"], resource.BinarySI)
	n := newMemoryNotifier(dir, []Threshold{{Signal: SignalMemoryAvailable, Value: Value{Quantity: q}}}, armEventfd)
	defer n.Stop()
	rearm(t, n, Observations{SignalMemoryAvailable: {Available: capacity - usage, Capacity: capacity}})
	if got := n.armed.levels; !slices.Equal(got, []int64{level}) {
		t.Fatalf("armed at %v, want [%d]", got, level)
	}
	notPending(t, n.Crossed(), "notification before the allocation")

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), allocateHelperEnv+"=64")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("allocating helper: %v", err)
		}
	})
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		t.Fatalf("move the helper into the cgroup: %v", err)
	}
	start := time.Now()
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "allocated\n" {
		t.Fatalf("helper said %q, %v", line, err)
	}
	after, _ := cgroups.ReadInt(filepath.Join(dir, "memory.usage_in_bytes"))
	select {
	case <-n.Crossed():
		t.Logf("notified within %v of the start of the allocation (usage %d MiB, level %d MiB)",
			time.Since(start).Round(time.Millisecond), after>>20, level>>20)
	case <-time.After(10 * time.Second):
		t.Fatalf("no notification: usage %d MiB after the allocation, level %d MiB", after>>20, level>>20)
	}
}

// A real watch blocked in epoll_wait is woken at once by Wake and then
// closed: the path the notifier's Stop and re-arms take.
func TestEventfdWatchWake(t *testing.T) {
	mount := requireMemoryV1(t)
	// A level no usage reaches.
	w, err := armEventfd(mount, []int64{1 << 62})
	if err != nil {
		t.Fatal(err)
	}
	result := make(chan error, 1)
	go func() {
		crossed, err := w.Wait()
		if err == nil && crossed {
			err = fmt.Errorf("crossed a level of 4 EiB")
		}
		result <- err
	}()
	w.Wake()
	select {
	case err := <-result:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait not woken")
	}
	if crossed, err := w.Wait(); crossed || err != nil {
		t.Errorf("Wait after Wake: %v, %v; want false at once", crossed, err)
	}
	if err := w.Close(); err != nil {
		t.Error(err)
	}
}

// requireMemoryV1 returns the cgroup v1 memory controller's mount, skipping
// the test where there is none (cgroup v2 has no memory threshold
// notification) or it is not root (it writes cgroup.event_control).
func requireMemoryV1(t *testing.T) string {
	t.Helper()
	const mount = "/sys/fs/cgroup/memory"
	if os.Geteuid() != 0 {
		t.Skip("not root: cannot write cgroup.event_control")
	}
	if _, err := os.Stat(filepath.Join(mount, "cgroup.event_control")); err != nil {
		t.Skipf("no cgroup v1 memory controller (%v): cgroup v2 has no memory threshold notification", err)
	}
	return mount
}
