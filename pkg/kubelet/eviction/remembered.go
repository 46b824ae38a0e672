package eviction

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/safefile"
)

// RememberedEviction is what is kept of one evicted pod across restarts.
type RememberedEviction struct {
	// Pod names it (namespace/name), for whoever reads the file.
	Pod string `json:"pod"`
	// Source is the config source that gave it: an entry is dropped once
	// that source has spoken without the pod.
	Source string `json:"source"`
	// Manifest is ManifestHash of the pod as evicted: given again with
	// another manifest, it is a new pod and runs.
	Manifest string    `json:"manifest"`
	Message  string    `json:"message"`
	At       time.Time `json:"at"`
}

// Remembered are the pods evicted and still desired, by UID, checkpointed
// in one file, so that an evicted pod stays evicted when the agent
// restarts, as the kubelet keeps an evicted pod Failed (its API object
// says so; a static pod of ours has no object, so the agent remembers).
// A pod is forgotten when its worker forgets it (removed from the
// config), when its source speaks without it, and when it comes back
// with another manifest. The file is rewritten atomically at each change;
// one that cannot be read is logged and ignored: the pods it named run
// again, which is what the agent did before it remembered evictions. Safe
// for concurrent use.
type Remembered struct {
	path  string
	write func(path string, data []byte) error

	mu   sync.Mutex // guards pods and the file
	pods map[types.UID]RememberedEviction
}

// LoadRemembered reads the evictions checkpointed at path (none if it is
// absent or unreadable).
func LoadRemembered(path string) *Remembered {
	r := &Remembered{path: path, write: safefile.WriteAtomic, pods: map[types.UID]RememberedEviction{}}
	data, err := os.ReadFile(path)
	switch {
	case os.IsNotExist(err):
	case err != nil:
		klog.Errorf("Eviction: remembered evictions: %v; evicted pods may run again", err)
	default:
		if err := json.Unmarshal(data, &r.pods); err != nil {
			klog.Errorf("Eviction: remembered evictions %s: %v; evicted pods may run again", path, err)
			r.pods = map[types.UID]RememberedEviction{}
		}
	}
	return r
}

// ManifestHash identifies a pod's manifest as the config gave it: its
// labels, annotations and spec. The same manifest read again (a restart)
// has the same hash.
func ManifestHash(pod *v1.Pod) string {
	data, _ := json.Marshal(struct {
		Labels      map[string]string `json:"labels,omitempty"`
		Annotations map[string]string `json:"annotations,omitempty"`
		Spec        v1.PodSpec        `json:"spec"`
	}{pod.Labels, pod.Annotations, pod.Spec})
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// Remember records the pod's eviction with its message, durably before it
// returns.
func (r *Remembered) Remember(pod *v1.Pod, message string, at time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pods[pod.UID] = RememberedEviction{Pod: api.Key(pod), Source: pod.Annotations[api.ConfigSourceAnnotation],
		Manifest: ManifestHash(pod), Message: message, At: at}
	return r.save()
}

// Lookup returns the message of the pod's eviction if it was evicted with
// this manifest. Given with another one, its eviction is forgotten.
func (r *Remembered) Lookup(pod *v1.Pod) (message string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.pods[pod.UID]
	if !ok {
		return "", false
	}
	if e.Manifest != ManifestHash(pod) {
		klog.Infof("Eviction: pod %s was evicted with another manifest: it runs again", api.Key(pod))
		r.forget(pod.UID)
		return "", false
	}
	return e.Message, true
}

// Forget drops the pod's eviction.
func (r *Remembered) Forget(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forget(uid)
}

// Prune drops the evictions of pods keep rejects (given the pod's UID and
// source).
func (r *Remembered) Prune(keep func(uid types.UID, source string) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid, e := range r.pods {
		if !keep(uid, e.Source) {
			r.forget(uid)
		}
	}
}

// Len is the number of pods remembered.
func (r *Remembered) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pods)
}

// forget drops uid and saves if it was there; r.mu is held.
func (r *Remembered) forget(uid types.UID) {
	if _, ok := r.pods[uid]; !ok {
		return
	}
	delete(r.pods, uid)
	if err := r.save(); err != nil {
		klog.Errorf("Eviction: %v", err)
	}
}

// save writes the file; r.mu is held.
func (r *Remembered) save() error {
	data, err := json.Marshal(r.pods)
	if err == nil {
		err = r.write(r.path, data)
	}
	if err != nil {
		return fmt.Errorf("checkpoint remembered evictions %s: %w", r.path, err)
	}
	return nil
}
