package volumes

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// Mount propagation and recursive read-only mounts, as the kubelet asks a
// runtime for them and the runtime checks them: None is Docker's default
// (rprivate), HostToContainer is rslave and Bidirectional rshared, whose
// source must sit on a shared mount (or, for rslave, a slave one), else
// the mount could not propagate and the runtime refuses it at create.

// propagationOption returns the Docker bind option of a mount's
// mountPropagation ("" for None), after checking the mount that holds src
// can propagate that way; the error is the runtime's, naming both paths.
func propagationOption(src string, mode *v1.MountPropagationMode) (string, error) {
	if mode == nil || *mode == v1.MountPropagationNone {
		return "", nil
	}
	mp, optional, err := mountOf(src)
	if err != nil {
		return "", err
	}
	shared, slave := strings.Contains(optional, "shared:"), strings.Contains(optional, "master:")
	switch *mode {
	case v1.MountPropagationBidirectional:
		if !shared {
			return "", fmt.Errorf("path %q is mounted on %q but it is not a shared mount", src, mp)
		}
		return "rshared", nil
	case v1.MountPropagationHostToContainer:
		if !shared && !slave {
			return "", fmt.Errorf("path %q is mounted on %q but it is not a shared or slave mount", src, mp)
		}
		return "rslave", nil
	}
	return "", fmt.Errorf("invalid MountPropagation mode: %q", *mode)
}

// recursiveReadOnly resolves a mount's recursiveReadOnly as the kubelet
// does for a runtime that cannot make a bind recursively read-only (Docker
// before API 1.44, whose binds have no such option; the node's status says
// so in runtimeHandlers' features): IfPossible is a plain read-only mount,
// Enabled cannot be honoured.
func recursiveReadOnly(vm v1.VolumeMount) error {
	if vm.RecursiveReadOnly == nil || *vm.RecursiveReadOnly == v1.RecursiveReadOnlyDisabled {
		return nil
	}
	if !vm.ReadOnly {
		return fmt.Errorf("volume %q requested recursive read-only mode, but it is not read-only", vm.Name)
	}
	if vm.MountPropagation != nil && *vm.MountPropagation != v1.MountPropagationNone {
		return fmt.Errorf("volume %q requested recursive read-only mode, but it is not compatible with propagation %q", vm.Name, *vm.MountPropagation)
	}
	switch rro := *vm.RecursiveReadOnly; rro {
	case v1.RecursiveReadOnlyIfPossible:
		return nil
	case v1.RecursiveReadOnlyEnabled:
		return fmt.Errorf("volume %q requested recursive read-only mode, but it is not supported by the runtime", vm.Name)
	default:
		return fmt.Errorf("unknown recursive read-only mode %q", rro)
	}
}

// mountOf returns the mount point holding path (links resolved) and its
// optional fields ("shared:N", "master:N").
func mountOf(path string) (string, string, error) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", "", err
	}
	mounts, err := mountinfo.GetMounts(mountinfo.ParentsFilter(real))
	if err != nil {
		return "", "", err
	}
	if len(mounts) == 0 {
		return "", "", fmt.Errorf("no mount holds %q", real)
	}
	// The deepest parent holds it; among mounts stacked on one point, the
	// last mounted (the highest ID) is the one seen.
	sort.Slice(mounts, func(i, j int) bool {
		if len(mounts[i].Mountpoint) != len(mounts[j].Mountpoint) {
			return len(mounts[i].Mountpoint) > len(mounts[j].Mountpoint)
		}
		return mounts[i].ID > mounts[j].ID
	})
	return mounts[0].Mountpoint, mounts[0].Optional, nil
}

// MakeRShared makes dir a recursively shared mount, binding it on itself
// first if it is not a mount point, as the kubelet makes its root
// directory: a Bidirectional mount of a pod's volume, or of a hostPath
// under the root directory (a CSI node plugin's), needs a shared mount.
func MakeRShared(dir string) error {
	mounts, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(dir))
	if err != nil {
		return err
	}
	for _, m := range mounts {
		if strings.Contains(m.Optional, "shared:") {
			return nil
		}
	}
	if len(mounts) == 0 {
		if err := unix.Mount(dir, dir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s on itself: %w", dir, err)
		}
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("make %s shared: %w", dir, err)
	}
	return nil
}

// isMountPoint reports whether path is a mount point.
func isMountPoint(path string) (bool, error) {
	return mountinfo.Mounted(path)
}

// mountsUnder lists mount points below dir, deepest first.
func mountsUnder(dir string) ([]string, error) {
	dir = filepath.Clean(dir)
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dir))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range mounts {
		if m.Mountpoint != dir {
			out = append(out, m.Mountpoint)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, nil
}
