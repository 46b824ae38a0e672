package kubeapi

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/classic-kubelet/kubelet/pkg/await"
)

// One object named by many pods costs one GET per TTL, even when all the
// pods ask at once.
func TestObjectsOneReadPerTTL(t *testing.T) {
	c := fake.NewClientset(&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt", Namespace: "ns"}})
	var mu sync.Mutex
	gets := 0
	release := make(chan struct{})
	c.PrependReactor("get", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		gets++
		mu.Unlock()
		<-release // all the pods' reads are in flight together
		return false, nil, nil
	})
	clk := clocktesting.NewFakeClock(time.Now())
	o := NewObjects(c)
	o.clock = clk
	read := func() {
		var wg sync.WaitGroup
		for i := 0; i < 50; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := o.ConfigMap(context.Background(), "ns", "kube-root-ca.crt"); err != nil {
					t.Error(err)
				}
			}()
		}
		// Every read is in flight: waiting for the one GET, or making it.
		await.Parked(t, 50, "kubeapi.(*Objects).ConfigMap(", "singleflight.")
		close(release)
		wg.Wait()
	}
	read()
	clk.Step(30 * time.Second)
	if _, err := o.ConfigMap(context.Background(), "ns", "kube-root-ca.crt"); err != nil {
		t.Fatal(err)
	}
	if gets != 1 {
		t.Errorf("%d GETs for 51 reads within the TTL, want 1", gets)
	}
	clk.Step(time.Minute)
	release = make(chan struct{})
	read()
	if gets != 2 {
		t.Errorf("%d GETs after the TTL, want 2", gets)
	}
}
