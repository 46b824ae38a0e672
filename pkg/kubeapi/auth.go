package kubeapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/server/auth"
)

// ClientCerts authenticates a request by its client certificate, already
// verified by the TLS handshake against --client-ca-file: the user is its
// CN, the groups its O, as the API server's x509 authenticator.
type ClientCerts struct{}

// Authenticate implements auth.Authenticator.
func (ClientCerts) Authenticate(r *http.Request) (*auth.User, bool, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 || len(r.TLS.VerifiedChains) == 0 {
		return nil, false, nil
	}
	c := r.TLS.PeerCertificates[0]
	if c.Subject.CommonName == "" {
		return nil, false, fmt.Errorf("client certificate without a common name")
	}
	return &auth.User{Name: c.Subject.CommonName, Groups: append([]string(nil), c.Subject.Organization...)}, true, nil
}

// cacheSize bounds each decision cache, as the kubelet's webhooks do.
const cacheSize = 1024

// TokenReviews authenticates bearer tokens by the API server's TokenReview
// (--authentication-token-webhook), each answer kept ttl (keyed by a hash
// of the token: the token itself is never kept).
type TokenReviews struct {
	client kubernetes.Interface
	ttl    time.Duration
	cache  *cache.LRUExpireCache
}

// NewTokenReviews reviews tokens through client.
func NewTokenReviews(client kubernetes.Interface, ttl time.Duration) *TokenReviews {
	return newTokenReviews(client, ttl, clock.RealClock{})
}

func newTokenReviews(client kubernetes.Interface, ttl time.Duration, clk clock.Clock) *TokenReviews {
	return &TokenReviews{client: client, ttl: ttl, cache: cache.NewLRUExpireCacheWithClock(cacheSize, clk)}
}

type review struct {
	user *auth.User
	ok   bool
}

// Authenticate implements auth.Authenticator.
func (t *TokenReviews) Authenticate(r *http.Request) (*auth.User, bool, error) {
	h := r.Header.Get("Authorization")
	token, found := strings.CutPrefix(h, "Bearer ")
	if !found || strings.TrimSpace(token) == "" {
		return nil, false, nil
	}
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:])
	if v, ok := t.cache.Get(key); ok {
		rv := v.(review)
		if !rv.ok {
			return nil, false, fmt.Errorf("invalid bearer token")
		}
		return rv.user, true, nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	res, err := t.client.AuthenticationV1().TokenReviews().Create(ctx,
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, false, fmt.Errorf("token review: %w", err) // not cached: the API server may be back soon
	}
	rv := review{ok: res.Status.Authenticated}
	if rv.ok {
		u := res.Status.User
		rv.user = &auth.User{Name: u.Username, UID: u.UID, Groups: u.Groups, Extra: map[string][]string{}}
		for k, v := range u.Extra {
			rv.user.Extra[k] = v
		}
	}
	t.cache.Add(key, rv, t.ttl)
	if !rv.ok {
		return nil, false, fmt.Errorf("invalid bearer token")
	}
	return rv.user, true, nil
}

// AccessReviews authorizes requests by the API server's
// SubjectAccessReview (--authorization-mode=Webhook), decisions kept
// allowedTTL and deniedTTL.
type AccessReviews struct {
	client                kubernetes.Interface
	allowedTTL, deniedTTL time.Duration
	cache                 *cache.LRUExpireCache
}

// NewAccessReviews authorizes through client.
func NewAccessReviews(client kubernetes.Interface, allowedTTL, deniedTTL time.Duration) *AccessReviews {
	return newAccessReviews(client, allowedTTL, deniedTTL, clock.RealClock{})
}

func newAccessReviews(client kubernetes.Interface, allowedTTL, deniedTTL time.Duration, clk clock.Clock) *AccessReviews {
	return &AccessReviews{client: client, allowedTTL: allowedTTL, deniedTTL: deniedTTL, cache: cache.NewLRUExpireCacheWithClock(cacheSize, clk)}
}

type decision struct {
	allowed bool
	reason  string
}

// Authorize implements auth.Authorizer.
func (a *AccessReviews) Authorize(ctx context.Context, u *auth.User, at auth.Attributes) (bool, string, error) {
	groups := append([]string(nil), u.Groups...)
	sort.Strings(groups)
	key := strings.Join([]string{u.Name, u.UID, strings.Join(groups, ","), at.Verb, at.Node, at.Subresource}, "\x00")
	if v, ok := a.cache.Get(key); ok {
		d := v.(decision)
		return d.allowed, d.reason, nil
	}
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = v
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := a.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: u.Name, UID: u.UID, Groups: u.Groups, Extra: extra,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: at.Verb, Group: "", Version: "v1", Resource: "nodes",
				Subresource: at.Subresource, Name: at.Node}}}, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("subject access review: %w", err)
	}
	d := decision{allowed: res.Status.Allowed, reason: res.Status.Reason}
	ttl := a.deniedTTL
	if d.allowed {
		ttl = a.allowedTTL
	}
	a.cache.Add(key, d, ttl)
	return d.allowed, d.reason, nil
}
