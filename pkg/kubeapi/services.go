package kubeapi

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Services lists and watches the cluster's Services (the Node authorizer
// lets a node read them all) for the containers' service variables.
type Services struct {
	inf    cache.SharedIndexInformer
	lister corelisters.ServiceLister
}

// NewServices watches the Services of client's cluster.
func NewServices(client kubernetes.Interface) *Services {
	f := informers.NewSharedInformerFactory(client, 0).Core().V1().Services()
	return &Services{inf: f.Informer(), lister: f.Lister()}
}

// Run lists and watches until ctx ends.
func (s *Services) Run(ctx context.Context) { s.inf.RunWithContext(ctx) }

// Services returns the Services as last seen, and whether they were ever
// listed.
func (s *Services) Services() ([]*v1.Service, bool) {
	if !s.inf.HasSynced() {
		return nil, false
	}
	l, _ := s.lister.List(labels.Everything())
	return l, true
}
