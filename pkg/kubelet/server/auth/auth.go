// Package auth is the vocabulary of the full-access API's access control:
// who a request comes from, what it asks, and the two roles that decide
// (authenticators, an authorizer). The HTTP server (pkg/kubelet/server)
// asks them; pkg/kubeapi implements them with the API server's TokenReview
// and SubjectAccessReview. It imports nothing of the agent's, so neither
// side depends on the other.
package auth

import (
	"context"
	"net/http"
)

// User is who a request comes from.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// Anonymous is the user of a request without credentials.
var Anonymous = User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}

// Authenticator says who sent a request: ok false means it carried no
// credentials this authenticator knows (the next is asked); an error means
// it carried bad ones.
type Authenticator interface {
	Authenticate(r *http.Request) (u *User, ok bool, err error)
}

// Attributes are what a request asks, as the kubelet maps it for the API
// server's SubjectAccessReview: a verb on a subresource of the node.
type Attributes struct {
	Verb, Node, Subresource, Path string
}

// Authorizer decides whether a user may do what a request asks.
type Authorizer interface {
	Authorize(ctx context.Context, u *User, a Attributes) (allowed bool, reason string, err error)
}
