package pleg

import (
	"context"
	"flag"
	"sort"
	"testing"
	"time"

	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/types"

	"github.com/classic-kubelet/kubelet/pkg/dockertools"
	"github.com/classic-kubelet/kubelet/pkg/dockertools/dockertest"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

func TestMain(m *testing.M) {
	_ = flag.Set("logtostderr", "true")
	flag.Parse()
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"))
}

func TestRelistInspectsOnlyWhatChanged(t *testing.T) {
	fake := dockertest.NewFakeClient()
	labels := func(uid string) map[string]string {
		return map[string]string{dockertools.LabelOwner: "n", dockertools.LabelPodUID: uid}
	}
	fake.AddContainer(kubecontainer.ContainerDetail{ID: "c1", Name: "k8s_a.h_p_default_u1_00000001", Labels: labels("u1"), Running: true, LogPath: "/l/c1"})
	fake.AddContainer(kubecontainer.ContainerDetail{ID: "c2", Name: "k8s_b.h_q_default_u2_00000002", Labels: labels("u2"), Running: true, LogPath: "/l/c2"})
	fake.AddContainer(kubecontainer.ContainerDetail{ID: "other", Name: "k8s_b.h_q_default_u3_00000002",
		Labels: map[string]string{dockertools.LabelOwner: "another-node", dockertools.LabelPodUID: "u3"}, Running: true})

	var dirty []types.UID
	cache := NewCache()
	r := NewRelister(fake, "n", time.Second, cache, func(uids []types.UID) { dirty = append(dirty, uids...) })
	var seen []string
	r.OnLogPath = func(c *kubecontainer.ContainerState) { seen = append(seen, c.ID) }
	steps := []struct {
		name        string
		change      func()
		inspects    int
		dirty       []types.UID
		podsInCache int
	}{
		{"first relist inspects all", func() {}, 2, []types.UID{"u1", "u2"}, 2},
		{"nothing changed: no inspect, nothing dirty", func() {}, 0, nil, 2},
		// Docker reports "die" before its list stops showing the container
		// running: a container named by an event is inspected regardless.
		{"an event names a container", func() { r.markEvented("c2") }, 1, []types.UID{"u2"}, 2},
		{"a container exited", func() { fake.Exit("c1", 1) }, 1, []types.UID{"u1"}, 2},
		{"a container was removed", func() { _ = fake.Remove(context.Background(), "c2") }, 0, []types.UID{"u2"}, 1},
	}
	for _, s := range steps {
		s.change()
		fake.Calls()
		dirty = nil
		if err := r.relist(context.Background()); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if n := fake.CountCalls("inspect"); n != s.inspects {
			t.Errorf("%s: %d inspects, want %d", s.name, n, s.inspects)
		}
		if n := fake.CountCalls("list"); n != 1 {
			t.Errorf("%s: %d lists, want 1", s.name, n)
		}
		sort.Slice(dirty, func(i, j int) bool { return dirty[i] < dirty[j] })
		if len(dirty) != len(s.dirty) || (len(dirty) > 0 && dirty[0] != s.dirty[0]) {
			t.Errorf("%s: dirty %v, want %v", s.name, dirty, s.dirty)
		}
		if n := len(cache.All()); n != s.podsInCache {
			t.Errorf("%s: %d pods cached, want %d", s.name, n, s.podsInCache)
		}
	}
	sort.Strings(seen)
	if len(seen) != 2 || seen[0] != "c1" || seen[1] != "c2" {
		t.Errorf("onLogPath saw %v, want each of c1 and c2 once", seen)
	}
	if st := cache.Get("u1"); st == nil || st.Containers[0].Running || st.Containers[0].ExitCode != 1 {
		t.Errorf("cache of u1 = %+v, want the exited container with code 1", st)
	}
	fake.InjectError("list", kubecontainer.ErrRuntimeUnavailable)
	before := cache.LastUpdate()
	if err := r.relist(context.Background()); err == nil {
		t.Error("relist succeeded with Docker down")
	}
	if !cache.LastUpdate().Equal(before) {
		t.Error("a failed relist advanced the cache timestamp")
	}
}
