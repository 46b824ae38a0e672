package kuberuntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/safefile"
)

const (
	reasonConfigError = kubecontainer.ReasonCreateContainerConfigError
	reasonCreateError = kubecontainer.ReasonCreateContainerError
)

// securityOptions applies a container's security context over the pod's
// (the container's settings win) to its create spec o. It refuses what must
// not run: a container that would run as root under runAsNonRoot, or a
// privileged one when the agent does not allow it.
func (m *Manager) securityOptions(ctx context.Context, pod *v1.Pod, c *v1.Container, o *kubecontainer.CreateSpec) error {
	id := podRunAs(pod.Spec.SecurityContext, o)
	if err := m.containerSecurity(c.SecurityContext, &id, o); err != nil {
		return err
	}
	var err error
	if o.Seccomp, err = m.seccompProfile(pod, c); err != nil {
		return err
	}
	o.AppArmorProfile = dockerAppArmor(appArmorProfile(pod, c))
	o.SELinuxLabels = seLinuxLabels(pod, c)
	imageUser := ""
	if id.user == nil && (id.group != nil || id.nonRoot) {
		if imageUser, err = m.runtime.ImageUser(ctx, c.Image); err != nil {
			return err
		}
	}
	if u := id.dockerUser(imageUser); u != "" {
		o.User = u
	}
	return id.checkNonRoot(imageUser, c.Image)
}

// runAs is who a container runs as: the pod's settings, overridden by the
// container's.
type runAs struct {
	user, group *int64
	nonRoot     bool // runAsNonRoot
}

// podRunAs is who the pod's containers run as by default; it adds the pod's
// supplemental groups to o.
func podRunAs(psc *v1.PodSecurityContext, o *kubecontainer.CreateSpec) runAs {
	if psc == nil {
		return runAs{}
	}
	for _, g := range psc.SupplementalGroups {
		o.GroupAdd = append(o.GroupAdd, strconv.FormatInt(g, 10))
	}
	if psc.FSGroup != nil {
		// Every container is in the group that owns the pod's volumes.
		o.GroupAdd = append(o.GroupAdd, strconv.FormatInt(*psc.FSGroup, 10))
	}
	return runAs{user: psc.RunAsUser, group: psc.RunAsGroup, nonRoot: psc.RunAsNonRoot != nil && *psc.RunAsNonRoot}
}

// containerSecurity applies the container's own security context (nil:
// none) to o and over the pod's id.
func (m *Manager) containerSecurity(sc *v1.SecurityContext, id *runAs, o *kubecontainer.CreateSpec) error {
	if sc == nil {
		return nil
	}
	if sc.RunAsUser != nil {
		id.user = sc.RunAsUser
	}
	if sc.RunAsGroup != nil {
		id.group = sc.RunAsGroup
	}
	if sc.RunAsNonRoot != nil {
		id.nonRoot = *sc.RunAsNonRoot
	}
	if sc.Privileged != nil && *sc.Privileged {
		if !m.cfg.AllowPrivileged {
			return &kubecontainer.StartError{Reason: reasonConfigError, Message: "privileged containers are not allowed: the agent runs with --allow-privileged=false"}
		}
		o.Privileged = true
	}
	if caps := sc.Capabilities; caps != nil {
		for _, cp := range caps.Add {
			o.CapAdd = append(o.CapAdd, string(cp))
		}
		for _, cp := range caps.Drop {
			o.CapDrop = append(o.CapDrop, string(cp))
		}
	}
	o.ReadOnlyRootfs = sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem
	o.NoNewPrivileges = sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
	return nil
}

// dockerUser is Docker's user of the container ("": the image's): a group
// without a user keeps the image's user (imageUser), root if it has none.
func (id runAs) dockerUser(imageUser string) string {
	switch {
	case id.user != nil && id.group != nil:
		return fmt.Sprintf("%d:%d", *id.user, *id.group)
	case id.user != nil:
		return strconv.FormatInt(*id.user, 10)
	case id.group != nil:
		u, _, _ := strings.Cut(imageUser, ":")
		if u == "" {
			u = "0"
		}
		return fmt.Sprintf("%s:%d", u, *id.group)
	}
	return ""
}

// checkNonRoot refuses a container under runAsNonRoot that would run as
// root: by its runAsUser, else by its image's user (imageUser), which must
// be numeric to be verified.
func (id runAs) checkNonRoot(imageUser, image string) error {
	if !id.nonRoot {
		return nil
	}
	if id.user != nil {
		if *id.user == 0 {
			return &kubecontainer.StartError{Reason: reasonConfigError, Message: "container's runAsUser breaks non-root policy (runAsNonRoot and runAsUser 0)"}
		}
		return nil
	}
	u, _, _ := strings.Cut(imageUser, ":")
	switch uid, err := strconv.Atoi(u); {
	case u == "" || u == "root" || (err == nil && uid == 0):
		return &kubecontainer.StartError{Reason: reasonConfigError, Message: fmt.Sprintf("container has runAsNonRoot and image %s will run as root", image)}
	case err != nil:
		return &kubecontainer.StartError{Reason: reasonConfigError, Message: fmt.Sprintf("container has runAsNonRoot and image %s has non-numeric user (%s): cannot verify user is non-root", image, u)}
	}
	return nil
}

// seccompProfile resolves a container's seccomp profile: its own, else the
// pod's, else --seccomp-default. A Localhost profile is read from
// <root-dir>/seccomp (Docker takes the profile's content, not a path),
// beneath that directory and without following links; a missing or invalid
// file is a CreateContainerError naming it.
func (m *Manager) seccompProfile(pod *v1.Pod, c *v1.Container) (kubecontainer.SeccompProfile, error) {
	var sp *v1.SeccompProfile
	if psc := pod.Spec.SecurityContext; psc != nil {
		sp = psc.SeccompProfile
	}
	if sc := c.SecurityContext; sc != nil && sc.SeccompProfile != nil {
		sp = sc.SeccompProfile
	}
	switch {
	case sp == nil && m.cfg.SeccompDefault, sp != nil && sp.Type == v1.SeccompProfileTypeRuntimeDefault:
		return kubecontainer.SeccompProfile{Kind: kubecontainer.SeccompRuntimeDefault}, nil
	case sp == nil, sp.Type == v1.SeccompProfileTypeUnconfined:
		return kubecontainer.SeccompProfile{Kind: kubecontainer.SeccompUnconfined}, nil
	}
	dir := filepath.Join(m.cfg.RootDir, "seccomp")
	fail := func(err error) (kubecontainer.SeccompProfile, error) {
		return kubecontainer.SeccompProfile{}, &kubecontainer.StartError{Reason: reasonCreateError,
			Message: fmt.Sprintf("seccomp profile %s: %v", filepath.Join(dir, *sp.LocalhostProfile), err)}
	}
	f, err := safefile.OpenBeneath(dir, *sp.LocalhostProfile, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSeccompProfile+1))
	switch {
	case err != nil:
		return fail(err)
	case len(data) > maxSeccompProfile:
		return fail(fmt.Errorf("larger than %d bytes", maxSeccompProfile))
	case !json.Valid(data):
		return fail(errors.New("not valid JSON"))
	}
	return kubecontainer.SeccompProfile{Kind: kubecontainer.SeccompLocalhost, Content: data}, nil
}

// maxSeccompProfile bounds a Localhost profile: Docker's default profile is
// about 20 KiB.
const maxSeccompProfile = 1 << 20

// seLinuxLabels are the SELinux options of a container (nil: the pod's
// sandbox), whose own options replace the pod's whole, as the kubelet's
// effective security context; in Docker's label syntax, each field set.
func seLinuxLabels(pod *v1.Pod, c *v1.Container) []string {
	var o *v1.SELinuxOptions
	if psc := pod.Spec.SecurityContext; psc != nil {
		o = psc.SELinuxOptions
	}
	if c != nil && c.SecurityContext != nil && c.SecurityContext.SELinuxOptions != nil {
		o = c.SecurityContext.SELinuxOptions
	}
	if o == nil {
		return nil
	}
	var out []string
	for _, f := range []struct{ key, v string }{{"user", o.User}, {"role", o.Role}, {"type", o.Type}, {"level", o.Level}} {
		if f.v != "" {
			out = append(out, f.key+":"+f.v)
		}
	}
	return out
}
