package pleg

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// A relist that found no pods may hand Set a nil map; events after it
// still land.
func TestUpdateAfterAnEmptySet(t *testing.T) {
	c := NewCache()
	c.Set(nil, time.Now())
	c.Update(map[types.UID]*kubecontainer.PodState{"a": {}})
	if c.Get("a") == nil {
		t.Fatal("the pod an event named is not in the cache")
	}
}
