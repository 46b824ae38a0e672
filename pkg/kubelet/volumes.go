package kubelet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
)

// emptyDirPlugin is the directory name Kubernetes uses for emptyDir volumes
// under a pod's volumes directory; keeping it helps operators find them.
const emptyDirPlugin = "kubernetes.io~empty-dir"

// setupVolumes prepares the pod's volumes on the host and returns the host
// path of each, by volume name. It is idempotent.
func (k *Kubelet) setupVolumes(pod *v1.Pod) (map[string]string, error) {
	paths := make(map[string]string, len(pod.Spec.Volumes))
	for _, vol := range pod.Spec.Volumes {
		switch {
		case vol.EmptyDir != nil:
			dir := filepath.Join(k.podDir(pod.UID), "volumes", emptyDirPlugin, vol.Name)
			// World-writable as in Kubernetes: containers may run as any user.
			if err := os.MkdirAll(dir, 0o777); err != nil {
				return nil, fmt.Errorf("volume %s: %w", vol.Name, err)
			}
			if err := os.Chmod(dir, 0o777); err != nil {
				return nil, fmt.Errorf("volume %s: %w", vol.Name, err)
			}
			paths[vol.Name] = dir
		case vol.HostPath != nil:
			if err := checkHostPath(vol.HostPath); err != nil {
				return nil, fmt.Errorf("volume %s: %w", vol.Name, err)
			}
			paths[vol.Name] = vol.HostPath.Path
		}
	}
	return paths, nil
}

// checkHostPath enforces a hostPath volume's type, creating what the
// *OrCreate types ask for.
func checkHostPath(hp *v1.HostPathVolumeSource) error {
	t := v1.HostPathUnset
	if hp.Type != nil {
		t = *hp.Type
	}
	fi, err := os.Stat(hp.Path)
	exists := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	switch t {
	case v1.HostPathDirectoryOrCreate:
		if !exists {
			return os.MkdirAll(hp.Path, 0o755)
		}
		fallthrough
	case v1.HostPathDirectory:
		if !exists || !fi.IsDir() {
			return fmt.Errorf("hostPath %s: not a directory", hp.Path)
		}
	case v1.HostPathFileOrCreate:
		if !exists {
			f, err := os.OpenFile(hp.Path, os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return err
			}
			return f.Close()
		}
		fallthrough
	case v1.HostPathFile:
		if !exists || !fi.Mode().IsRegular() {
			return fmt.Errorf("hostPath %s: not a regular file", hp.Path)
		}
	}
	return nil
}
