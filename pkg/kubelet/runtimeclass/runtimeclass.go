// Package runtimeclass maps a pod's RuntimeClass to the runtime handler
// that runs its containers, as the kubelet's runtimeclass manager does, on
// Docker: a handler is one of the daemon's runtimes (`docker info`'s
// Runtimes), given to each container as HostConfig.Runtime.
package runtimeclass

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Classes reads RuntimeClasses by name (node mode: the API server's, as
// the Node authorizer lets a node get them).
type Classes interface {
	RuntimeClass(ctx context.Context, name string) (*nodev1.RuntimeClass, error)
}

// Runtimes lists the runtime's handlers (Docker's runtimes).
type Runtimes func() ([]string, error)

// Resolver resolves a pod's runtime handler. Without Classes (a standalone
// node, no API server to hold RuntimeClasses) a runtimeClassName names the
// handler itself: the simplest mapping a user can see in `docker info`.
type Resolver struct {
	classes  Classes
	runtimes Runtimes
}

// NewResolver resolves through classes (nil: standalone) and checks the
// handlers against runtimes.
func NewResolver(classes Classes, runtimes Runtimes) *Resolver {
	return &Resolver{classes: classes, runtimes: runtimes}
}

// Handler is the runtime handler of the pod's containers: "" (the
// runtime's default) for a pod without runtimeClassName. Its errors are
// the kubelet's words, shown as the pod's FailedCreatePodSandBox: an absent
// RuntimeClass as the kubelet's lister says it, a handler the runtime does
// not have as cri-dockerd says it.
func (r *Resolver) Handler(ctx context.Context, pod *v1.Pod) (string, error) {
	name := pod.Spec.RuntimeClassName
	if name == nil || *name == "" {
		return "", nil
	}
	handler := *name
	if r.classes != nil {
		rc, err := r.classes.RuntimeClass(ctx, *name)
		if apierrors.IsNotFound(err) {
			return "", apierrors.NewNotFound(nodev1.Resource("runtimeclass"), *name)
		}
		if err != nil {
			return "", fmt.Errorf("failed to lookup RuntimeClass %s: %w", *name, err)
		}
		handler = rc.Handler
	}
	known, err := r.runtimes()
	if err != nil {
		return "", fmt.Errorf("runtime handlers: %w", err)
	}
	if !slices.Contains(known, handler) {
		return "", fmt.Errorf("RuntimeHandler %q not supported", handler)
	}
	return handler, nil
}
