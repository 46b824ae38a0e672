package cadvisor

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/cadvisor/cache/memory"
	cadvisorapi "github.com/google/cadvisor/info/v1"
	cadvisorapiv2 "github.com/google/cadvisor/info/v2"
	"github.com/google/cadvisor/manager"
)

// fakeManager knows Docker containers by ID, each named by a cgroup, and
// counts the spec lookups Recent makes.
type fakeManager struct {
	manager.Manager
	cgroups map[string]string // Docker ID -> cAdvisor name
	lookups int
}

func (f *fakeManager) GetContainerSpec(id string, opts cadvisorapiv2.RequestOptions) (map[string]cadvisorapiv2.ContainerSpec, error) {
	f.lookups++
	name, ok := f.cgroups[id]
	if opts.IdType != cadvisorapiv2.TypeDocker || !ok {
		return nil, fmt.Errorf("unknown container %q", id)
	}
	return map[string]cadvisorapiv2.ContainerSpec{name: {}}, nil
}

func (f *fakeManager) Exists(name string) bool {
	for _, n := range f.cgroups {
		if n == name {
			return true
		}
	}
	return false
}

// Recent reads samples from the store by cgroup, asks cAdvisor for a
// Docker container's name once, and forgets the names of containers
// cAdvisor has dropped.
func TestRecentReadsTheStoreAndForgetsGoneContainers(t *testing.T) {
	fm := &fakeManager{cgroups: map[string]string{}}
	samples := memory.New(time.Minute, nil)
	c := &Client{ready: make(chan struct{}), m: fm, samples: samples, names: map[string]string{}}
	close(c.ready)
	add := func(id string) {
		name := "/kubepods/pod1/" + id
		fm.cgroups[id] = name
		ref := cadvisorapi.ContainerInfo{ContainerReference: cadvisorapi.ContainerReference{Name: name}}
		for i := 0; i < 3; i++ {
			st := &cadvisorapi.ContainerStats{Timestamp: time.Now().Add(time.Duration(i) * time.Second)}
			st.Cpu.Usage.Total = uint64(i)
			if err := samples.AddStats(&ref, st); err != nil {
				t.Fatal(err)
			}
		}
	}
	add("a")
	for i := 0; i < 3; i++ {
		got, err := c.Recent("a", true, 2)
		if err != nil || len(got) != 2 || got[1].Cpu.Usage.Total != 2 {
			t.Fatalf("Recent(a): %v, %v", got, err)
		}
	}
	if fm.lookups != 1 {
		t.Errorf("%d name lookups for one container, want 1", fm.lookups)
	}
	if got, err := c.Recent("/kubepods/pod1/a", false, 1); err != nil || len(got) != 1 {
		t.Errorf("Recent by cgroup: %v, %v", got, err)
	}
	if _, err := c.Recent("nope", true, 1); err == nil {
		t.Error("Recent of an unknown container: no error")
	}

	// Under churn the names held stay within twice the live containers.
	for i := 0; i < 1000; i++ {
		id := fmt.Sprint("c", i)
		add(id)
		if _, err := c.Recent(id, true, 1); err != nil {
			t.Fatal(err)
		}
		delete(fm.cgroups, id)
	}
	if n := len(c.names); n > 64 {
		t.Errorf("%d names held after churn with 1 live container, want at most 64", n)
	}
	if _, ok := c.names["a"]; !ok {
		t.Error("the live container's name was swept")
	}
}
