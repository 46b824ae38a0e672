package server

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/server/auth"
)

// Auth is the full-access port's authentication and authorization, as the
// kubelet's: the authenticators in order (client certificate, bearer
// token), then anonymous if allowed; then the authorizer (nil: every
// authenticated request is allowed).
type Auth struct {
	Authenticators []auth.Authenticator
	Anonymous      bool
	Authorizer     auth.Authorizer
}

// verbs maps HTTP methods to the verbs the API server authorizes.
var verbs = map[string]string{
	http.MethodGet: "get", http.MethodHead: "get", http.MethodPost: "create", http.MethodPut: "update",
	http.MethodPatch: "patch", http.MethodDelete: "delete",
}

// subresources are the kubelet's mapping of paths to the node's
// subresources; each path is tried in order (a fine-grained subresource,
// then proxy, as KubeletFineGrainedAuthz does), anything else is proxy.
func subresources(path string) []string {
	under := func(prefix string) bool { return path == prefix || strings.HasPrefix(path, prefix+"/") }
	switch {
	case under("/stats"):
		return []string{"stats"}
	case under("/metrics"):
		return []string{"metrics"}
	case under("/logs"):
		return []string{"log"}
	case under("/checkpoint"):
		return []string{"checkpoint"}
	case under("/pods"), under("/runningpods"):
		return []string{"pods", "proxy"}
	case under("/healthz"):
		return []string{"healthz", "proxy"}
	case under("/configz"):
		return []string{"configz", "proxy"}
	}
	return []string{"proxy"}
}

// authenticate returns the request's user, or answers 401.
func (a *Auth) authenticate(w http.ResponseWriter, r *http.Request) (*auth.User, bool) {
	for _, au := range a.Authenticators {
		u, ok, err := au.Authenticate(r)
		if err != nil {
			writeError(w, http.StatusUnauthorized, "Unauthorized")
			return nil, false
		}
		if ok {
			return u, true
		}
	}
	if a.Anonymous {
		u := auth.Anonymous
		return &u, true
	}
	writeError(w, http.StatusUnauthorized, "Unauthorized")
	return nil, false
}

// filter wraps next with authentication and authorization.
func (a *Auth) filter(node string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok := a.authenticate(w, r)
		if !ok {
			return
		}
		if a.Authorizer != nil {
			verb := verbs[r.Method]
			if verb == "" {
				verb = strings.ToLower(r.Method)
			}
			var reason string
			allowed := false
			subs := subresources(r.URL.Path)
			for _, sub := range subs {
				ok, why, err := a.Authorizer.Authorize(r.Context(), u, auth.Attributes{Verb: verb, Node: node, Subresource: sub, Path: r.URL.Path})
				if err != nil {
					writeError(w, http.StatusInternalServerError, fmt.Sprintf("Authorization error (user=%s, verb=%s, resource=nodes, subresource=%s)", u.Name, verb, sub))
					return
				}
				if ok {
					allowed = true
					break
				}
				reason = why
			}
			if !allowed {
				msg := fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource(s)=%v)", u.Name, verb, subs)
				if reason != "" {
					msg += ": " + reason
				}
				writeError(w, http.StatusForbidden, msg)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
