package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/credentialprovider"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
)

// reasonPullSecrets is the kubelet's event reason for image pull secrets it
// cannot read.
const reasonPullSecrets = "FailedToRetrieveImagePullSecret"

// pullSecretTimeout bounds the reads of a pod's image pull secrets, as
// objectData bounds those of its variables: an API server that does not
// answer delays a pull by this much at most (they are read only when a
// pull is due).
const pullSecretTimeout = 10 * time.Second

// secretReader reads a secret from the API server: in node mode,
// kubeapi.Objects, which keeps each read a minute (as the Node authorizer
// wants, one secret at a time, and only one a pod bound to this node
// names).
type secretReader interface {
	Secret(ctx context.Context, namespace, name string) (*v1.Secret, error)
}

// pullSecretNames is the pod's imagePullSecrets, without empty names.
func pullSecretNames(pod *v1.Pod) []string {
	var names []string
	for _, s := range pod.Spec.ImagePullSecrets {
		if s.Name != "" {
			names = append(names, s.Name)
		}
	}
	return names
}

// warnPullSecrets says, once per pod (again if its list changes), that its
// imagePullSecrets cannot be read when there is no API server to hold
// them. As the kubelet run standalone, the pod runs regardless, its images
// pulled with the node's credentials. With an API server (Objects),
// pullCredentials reads them instead.
func (m *Manager) warnPullSecrets(pod *v1.Pod, rec *PodRecord) {
	if m.cfg.Objects != nil {
		return
	}
	list := strings.Join(pullSecretNames(pod), ", ")
	if m.warnUnreadableSecrets(pod, rec, list) {
		klog.Warningf("Pod %s: unable to retrieve image pull secrets (%s): there is no API server; images are pulled with the node's credentials", api.Key(pod), list)
	}
}

// warnUnreadableSecrets raises the kubelet's warning event for the pod's
// image pull secrets in list (comma-separated) that cannot be read, once
// per pod and list; it reports whether it did (the caller logs why).
func (m *Manager) warnUnreadableSecrets(pod *v1.Pod, rec *PodRecord, list string) bool {
	if rec.secrets == list {
		return false
	}
	rec.secrets = list
	if list == "" {
		return false
	}
	m.cfg.Events.Event(events.PodRef(pod, ""), true, reasonPullSecrets,
		"Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", list)
	return true
}

// pullCredentials returns the registry credentials of the pod's
// imagePullSecrets, read from the API server (nil: none, or no API
// server). Those that cannot be read (absent, forbidden, malformed) are
// said once, as the kubelet's FailedToRetrieveImagePullSecret warning, and
// the pull goes on with the others and the node's credentials.
func (m *Manager) pullCredentials(ctx context.Context, pod *v1.Pod, rec *PodRecord) *credentialprovider.Keyring {
	names := pullSecretNames(pod)
	if len(names) == 0 || m.cfg.Objects == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, pullSecretTimeout)
	defer cancel()
	creds, failed := readPullSecrets(ctx, m.cfg.Objects, pod.Namespace, names)
	var failedNames []string
	for _, f := range failed {
		failedNames = append(failedNames, f.name)
	}
	if m.warnUnreadableSecrets(pod, rec, strings.Join(failedNames, ", ")) {
		for _, f := range failed {
			klog.Warningf("Pod %s: image pull secret %s: %v", api.Key(pod), f.name, f.err)
		}
	}
	return creds
}

// failedSecret is an image pull secret that could not be used, and why.
type failedSecret struct {
	name string
	err  error
}

// readPullSecrets reads the named secrets of namespace and gathers their
// registry credentials, in the pod's order. A secret of a type that holds
// none is skipped, as the kubelet skips it; one that cannot be read or
// parsed is failed.
func readPullSecrets(ctx context.Context, r secretReader, namespace string, names []string) (*credentialprovider.Keyring, []failedSecret) {
	creds := &credentialprovider.Keyring{}
	var failed []failedSecret
	for _, name := range names {
		s, err := r.Secret(ctx, namespace, name)
		if err == nil {
			err = creds.AddSecret(s)
		} else {
			err = fmt.Errorf("read secret %s/%s: %w", namespace, name, err)
		}
		switch {
		case errors.Is(err, credentialprovider.ErrNotRegistrySecret):
			klog.V(2).Infof("Image pull secret %s/%s holds no registry credentials: %v", namespace, name, err)
		case err != nil:
			failed = append(failed, failedSecret{name, err})
		}
	}
	return creds, failed
}
