package kubeapi

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// objectTTL is how long a config map or secret read is used before it is
// read again: the delay of an edit reaching a running pod's volume, as the
// kubelet's cache-based change detection (its default TTL is a minute).
const objectTTL = time.Minute

// Objects reads config maps, secrets and RuntimeClasses one at a time, as the Node
// authorizer allows, each kept objectTTL (a hundred pods naming one config
// map cost one GET a minute), and requests service account tokens.
type Objects struct {
	client kubernetes.Interface
	clock  clock.PassiveClock
	ttl    time.Duration

	mu    sync.Mutex
	cache map[string]cached
	// reads folds concurrent misses of one object into one GET: the pods
	// naming it resync together, and would all ask at once when it expires.
	reads singleflight.Group
}

type cached struct {
	obj any
	err error // a NotFound is kept too: an optional object that is absent
	at  time.Time
}

// NewObjects reads objects through client.
func NewObjects(client kubernetes.Interface) *Objects {
	return &Objects{client: client, clock: clock.RealClock{}, ttl: objectTTL, cache: map[string]cached{}}
}

func (o *Objects) get(ctx context.Context, key string, read func() (any, error)) (any, error) {
	now := o.clock.Now()
	o.mu.Lock()
	c, ok := o.cache[key]
	o.mu.Unlock()
	if ok && now.Sub(c.at) < o.ttl {
		return c.obj, c.err
	}
	v, err, _ := o.reads.Do(key, func() (any, error) { return read() })
	obj := v
	if err != nil && !apierrors.IsNotFound(err) {
		if ok && c.err == nil {
			return c.obj, nil // the API server is away: the last copy serves
		}
		return nil, err
	}
	o.mu.Lock()
	o.cache[key] = cached{obj: obj, err: err, at: now}
	o.mu.Unlock()
	return obj, err
}

// ConfigMap returns a config map, as read at most ttl ago.
func (o *Objects) ConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	obj, err := o.get(ctx, "configmap/"+namespace+"/"+name, func() (any, error) {
		return o.client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	})
	if err != nil {
		return nil, err
	}
	return obj.(*v1.ConfigMap), nil
}

// Secret returns a secret, as read at most ttl ago.
func (o *Objects) Secret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	obj, err := o.get(ctx, "secret/"+namespace+"/"+name, func() (any, error) {
		return o.client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	})
	if err != nil {
		return nil, err
	}
	return obj.(*v1.Secret), nil
}

// RuntimeClass returns a RuntimeClass, as read at most ttl ago: a class
// created after a pod that names it failed is seen within that time.
func (o *Objects) RuntimeClass(ctx context.Context, name string) (*nodev1.RuntimeClass, error) {
	obj, err := o.get(ctx, "runtimeclass/"+name, func() (any, error) {
		return o.client.NodeV1().RuntimeClasses().Get(ctx, name, metav1.GetOptions{})
	})
	if err != nil {
		return nil, err
	}
	return obj.(*nodev1.RuntimeClass), nil
}

// Token requests a token of the service account (TokenRequest).
func (o *Objects) Token(ctx context.Context, namespace, serviceAccount string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	return o.client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, serviceAccount, req, metav1.CreateOptions{})
}

// PersistentVolumeClaim reads a claim, never from the cache: a pod waits for
// its claim to be bound, and sees the binding at its next try. The volume
// manager keeps what a bound claim resolved to, so this is asked once per
// pod and volume.
func (o *Objects) PersistentVolumeClaim(ctx context.Context, namespace, name string) (*v1.PersistentVolumeClaim, error) {
	return o.client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
}

// PersistentVolume reads a claim's volume (as PersistentVolumeClaim).
func (o *Objects) PersistentVolume(ctx context.Context, name string) (*v1.PersistentVolume, error) {
	return o.client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
}

// Node reads the node's own Node, for the labels a local volume's node
// affinity names (an operator may have added them).
func (o *Objects) Node(ctx context.Context, name string) (*v1.Node, error) {
	return o.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
}

// ServiceAccount returns a service account (a pod certificate request
// names its UID), as read at most ttl ago.
func (o *Objects) ServiceAccount(ctx context.Context, namespace, name string) (*v1.ServiceAccount, error) {
	obj, err := o.get(ctx, "serviceaccount/"+namespace+"/"+name, func() (any, error) {
		return o.client.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
	})
	if err != nil {
		return nil, err
	}
	return obj.(*v1.ServiceAccount), nil
}

// CreatePodCertificateRequest asks a signer for a pod's certificate.
func (o *Objects) CreatePodCertificateRequest(ctx context.Context, pcr *certificatesv1.PodCertificateRequest) (*certificatesv1.PodCertificateRequest, error) {
	return o.client.CertificatesV1().PodCertificateRequests(pcr.Namespace).Create(ctx, pcr, metav1.CreateOptions{})
}

// PodCertificateRequest reads a pod's request, never from the cache: the
// pod waits for it to be issued.
func (o *Objects) PodCertificateRequest(ctx context.Context, namespace, name string) (*certificatesv1.PodCertificateRequest, error) {
	return o.client.CertificatesV1().PodCertificateRequests(namespace).Get(ctx, name, metav1.GetOptions{})
}
