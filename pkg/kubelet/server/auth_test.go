package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/server/auth"
)

func TestSubresources(t *testing.T) {
	for path, want := range map[string][]string{
		"/stats/summary": {"stats"}, "/stats": {"stats"}, "/metrics/resource": {"metrics"}, "/logs/syslog": {"log"},
		"/pods": {"pods", "proxy"}, "/runningpods": {"pods", "proxy"}, "/healthz": {"healthz", "proxy"},
		"/configz": {"configz", "proxy"}, "/exec/ns/p/c": {"proxy"}, "/containerLogs/ns/p/c": {"proxy"},
		"/statsfoo": {"proxy"}, "/portForward/ns/p": {"proxy"},
	} {
		if got := subresources(path); !reflect.DeepEqual(got, want) {
			t.Errorf("subresources(%q) = %v, want %v", path, got, want)
		}
	}
}

type fakeAuthn struct {
	u   *auth.User
	err error
}

func (f fakeAuthn) Authenticate(*http.Request) (*auth.User, bool, error) {
	return f.u, f.u != nil, f.err
}

type fakeAuthz struct{ allow map[string]bool }

func (f fakeAuthz) Authorize(_ context.Context, u *auth.User, a auth.Attributes) (bool, string, error) {
	return f.allow[u.Name+" "+a.Verb+" "+a.Subresource], "no rule", nil
}

func TestAuthFilter(t *testing.T) {
	alice := &auth.User{Name: "alice"}
	authz := fakeAuthz{allow: map[string]bool{"alice get proxy": true, "system:anonymous get healthz": true}}
	for _, tc := range []struct {
		name   string
		auth   Auth
		method string
		path   string
		want   int
	}{
		{"authenticated and allowed (fine-grained falls back to proxy)", Auth{Authenticators: []auth.Authenticator{fakeAuthn{u: alice}}, Authorizer: authz}, "GET", "/pods", 200},
		{"verb from the method", Auth{Authenticators: []auth.Authenticator{fakeAuthn{u: alice}}, Authorizer: authz}, "POST", "/exec/ns/p/c", 403},
		{"no credentials", Auth{Authorizer: authz}, "GET", "/pods", 401},
		{"bad credentials", Auth{Authenticators: []auth.Authenticator{fakeAuthn{err: errors.New("bad")}}, Anonymous: true, Authorizer: authz}, "GET", "/pods", 401},
		{"anonymous, authorized as such", Auth{Anonymous: true, Authorizer: authz}, "GET", "/healthz", 200},
		{"anonymous, refused", Auth{Anonymous: true, Authorizer: authz}, "GET", "/pods", 403},
		{"no authorizer: authenticated is enough", Auth{Authenticators: []auth.Authenticator{fakeAuthn{u: alice}}}, "DELETE", "/pods/ns/p", 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.auth.filter("n1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
			if rec.Code != tc.want {
				t.Errorf("%s %s = %d, want %d (%s)", tc.method, tc.path, rec.Code, tc.want, rec.Body)
			}
		})
	}
}
