package kubeapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/server/auth"
)

// Token reviews are cached for their TTL, keyed by the token's hash.
func TestTokenReviewsCached(t *testing.T) {
	c := fake.NewClientset()
	calls := 0
	c.PrependReactor("create", "tokenreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		calls++
		tr := a.(clienttesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		tr.Status.Authenticated = tr.Spec.Token == "good"
		tr.Status.User = authenticationv1.UserInfo{Username: "sa", Groups: []string{"g"}}
		return true, tr, nil
	})
	clk := clocktesting.NewFakeClock(time.Now())
	tr := newTokenReviews(c, 2*time.Minute, clk)
	req := func(tok string) *http.Request {
		r := httptest.NewRequest("GET", "/pods", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		return r
	}
	for i := 0; i < 3; i++ {
		if u, ok, err := tr.Authenticate(req("good")); err != nil || !ok || u.Name != "sa" {
			t.Fatalf("good token: %v %v %v", u, ok, err)
		}
	}
	if _, ok, err := tr.Authenticate(req("bad")); ok || err == nil {
		t.Errorf("bad token accepted")
	}
	if calls != 2 {
		t.Errorf("%d reviews for 3 uses of one token and one bad token, want 2", calls)
	}
	clk.Step(3 * time.Minute)
	_, _, _ = tr.Authenticate(req("good"))
	if calls != 3 {
		t.Errorf("the cached review outlived its TTL")
	}
	if _, ok, err := tr.Authenticate(httptest.NewRequest("GET", "/", nil)); ok || err != nil {
		t.Errorf("no token: %v %v, want not mine", ok, err)
	}
}

// Decisions are cached: allowed ones longer than denied ones.
func TestAccessReviewsCached(t *testing.T) {
	c := fake.NewClientset()
	calls, allow := 0, false
	var got authorizationv1.ResourceAttributes
	c.PrependReactor("create", "subjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		calls++
		sar := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		got = *sar.Spec.ResourceAttributes
		sar.Status.Allowed = allow
		return true, sar, nil
	})
	clk := clocktesting.NewFakeClock(time.Now())
	ar := newAccessReviews(c, 5*time.Minute, 30*time.Second, clk)
	u := &auth.User{Name: "alice"}
	at := auth.Attributes{Verb: "create", Node: "n1", Subresource: "proxy"}
	ctx := context.Background()
	if ok, _, _ := ar.Authorize(ctx, u, at); ok {
		t.Fatal("allowed")
	}
	if got.Resource != "nodes" || got.Name != "n1" || got.Subresource != "proxy" || got.Verb != "create" {
		t.Errorf("review asked %+v", got)
	}
	allow = true
	if ok, _, _ := ar.Authorize(ctx, u, at); ok || calls != 1 {
		t.Errorf("a denial was not cached (%d calls)", calls)
	}
	clk.Step(31 * time.Second)
	if ok, _, _ := ar.Authorize(ctx, u, at); !ok || calls != 2 {
		t.Errorf("a denial outlived 30 s (%d calls)", calls)
	}
	clk.Step(4 * time.Minute)
	if ok, _, _ := ar.Authorize(ctx, u, at); !ok || calls != 2 {
		t.Errorf("an allowed decision was not kept 5 minutes (%d calls)", calls)
	}
}
