package kubeapi

import (
	"context"
	"errors"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	"k8s.io/client-go/tools/cache"
)

// trustBundlesSyncWait is how long a projection waits for the first list;
// past it the pod's volume fails to set up and is retried.
const trustBundlesSyncWait = 10 * time.Second

// TrustBundles watches the cluster's ClusterTrustBundles (every node may),
// as the kubelet's informer does, from the first pod that projects one: a
// bundle made or edited is in the next setup or refresh of a pod's volume.
// A node whose pods project none never lists them.
type TrustBundles struct {
	inf    cache.SharedIndexInformer
	lister certlisters.ClusterTrustBundleLister
	wanted chan struct{} // closed at the first ClusterTrustBundles call
	want   sync.Once
}

// NewTrustBundles watches the ClusterTrustBundles of client's cluster once
// Run runs and one is asked for.
func NewTrustBundles(client kubernetes.Interface) *TrustBundles {
	f := informers.NewSharedInformerFactory(client, 0).Certificates().V1().ClusterTrustBundles()
	return &TrustBundles{inf: f.Informer(), lister: f.Lister(), wanted: make(chan struct{})}
}

// Run lists and watches, from the first ClusterTrustBundles call until ctx
// ends.
func (t *TrustBundles) Run(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-t.wanted:
		t.inf.RunWithContext(ctx)
	}
}

// ClusterTrustBundles returns the bundles as last seen, waiting for the
// first list.
func (t *TrustBundles) ClusterTrustBundles(ctx context.Context) ([]certificatesv1.ClusterTrustBundle, error) {
	t.want.Do(func() { close(t.wanted) })
	ctx, cancel := context.WithTimeout(ctx, trustBundlesSyncWait)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), t.inf.HasSynced) {
		return nil, errors.New("ClusterTrustBundle informer has not yet synced")
	}
	list, err := t.lister.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	out := make([]certificatesv1.ClusterTrustBundle, len(list))
	for i, b := range list {
		out[i] = *b
	}
	return out, nil
}
