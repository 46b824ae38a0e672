package api

import (
	"fmt"
	"maps"
	"math"
	"net"
	"path"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"unicode"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MinMemoryLimit is the smallest memory limit Docker accepts (6 MiB); a
// smaller limit is a validation error rather than a failed container create.
const MinMemoryLimit = 6 << 20

// hostPathTypes are the types of a hostPath volume: all of Kubernetes',
// each checked at setup (pkg/kubelet/volumes).
var hostPathTypes = []v1.HostPathType{v1.HostPathUnset, v1.HostPathBlockDev, v1.HostPathCharDev, v1.HostPathDirectory,
	v1.HostPathDirectoryOrCreate, v1.HostPathFile, v1.HostPathFileOrCreate, v1.HostPathSocket}

// uidPattern keeps `_` out of UIDs: it separates the parts of container names.
var uidPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

// Validate checks a defaulted pod against what the agent implements. It
// returns every error (with its field path) and the paths of written fields
// the agent ignores.
func Validate(pod *v1.Pod) (errs field.ErrorList, ignored []string) {
	meta := field.NewPath("metadata")
	errs = append(errs, checkFields(reflect.ValueOf(pod.ObjectMeta), meta, &ignored)...)
	if pod.Name == "" {
		errs = append(errs, field.Required(meta.Child("name"), ""))
	} else {
		for _, msg := range validation.IsDNS1123Subdomain(pod.Name) {
			errs = append(errs, field.Invalid(meta.Child("name"), pod.Name, msg))
		}
	}
	for _, msg := range validation.IsDNS1123Label(pod.Namespace) {
		errs = append(errs, field.Invalid(meta.Child("namespace"), pod.Namespace, msg))
	}
	if !uidPattern.MatchString(string(pod.UID)) {
		errs = append(errs, field.Invalid(meta.Child("uid"), pod.UID, "must match "+uidPattern.String()))
	}
	// As the API server's ValidateObjectMeta: label keys and values, and
	// annotation keys, are what the downwardAPI files and fieldRefs can
	// carry safely (no newline forges a line of the labels file), and
	// annotations are at most 256 KiB in all.
	errs = append(errs, metavalidation.ValidateLabels(pod.Labels, meta.Child("labels"))...)
	errs = append(errs, apivalidation.ValidateAnnotations(pod.Annotations, meta.Child("annotations"))...)
	errs = append(errs, validateSpec(&pod.Spec, field.NewPath("spec"), &ignored)...)
	if len(pod.Spec.EphemeralContainers) > 0 && pod.Annotations[ConfigSourceAnnotation] != SourceAPIServer {
		// As the API server refuses them on create: they are added to a
		// running pod through its ephemeralcontainers subresource.
		errs = append(errs, field.Forbidden(field.NewPath("spec", "ephemeralContainers"), "may be added only through the API server (kubectl debug)"))
	}
	// The seccomp annotations of Kubernetes before 1.19: the current
	// kubelet ignores them too (seccompProfile replaced them).
	for key := range pod.Annotations {
		if key == "seccomp.security.alpha.kubernetes.io/pod" || strings.HasPrefix(key, "container.seccomp.security.alpha.kubernetes.io/") {
			ignored = append(ignored, "metadata.annotations["+key+"] (use securityContext.seccompProfile)")
		}
	}
	return errs, ignored
}

func validateSpec(spec *v1.PodSpec, p *field.Path, ignored *[]string) field.ErrorList {
	errs := checkFields(reflect.ValueOf(*spec), p, ignored)
	switch spec.RestartPolicy {
	case v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever:
	default:
		errs = append(errs, field.NotSupported(p.Child("restartPolicy"), spec.RestartPolicy, []string{"Always", "OnFailure", "Never"}))
	}
	switch spec.DNSPolicy {
	case "", v1.DNSClusterFirst, v1.DNSClusterFirstWithHostNet, v1.DNSDefault, v1.DNSNone:
	default:
		errs = append(errs, field.NotSupported(p.Child("dnsPolicy"), spec.DNSPolicy, []string{"ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"}))
	}
	if spec.Resources != nil {
		errs = append(errs, validatePodResources(spec, p.Child("resources"), ignored)...)
	}
	errs = append(errs, validateDNSConfig(spec, p.Child("dnsConfig"))...)
	errs = append(errs, validateHostNames(spec, p)...)
	if d := spec.ActiveDeadlineSeconds; d != nil && *d <= 0 {
		errs = append(errs, field.Invalid(p.Child("activeDeadlineSeconds"), *d, "must be greater than 0"))
	}
	if spec.ShareProcessNamespace != nil && *spec.ShareProcessNamespace && spec.HostPID {
		errs = append(errs, field.Invalid(p.Child("shareProcessNamespace"), true, "cannot be true with hostPID"))
	}
	if sc := spec.SecurityContext; sc != nil {
		errs = append(errs, validatePodSecurityContext(sc, p.Child("securityContext"), ignored)...)
	}
	if g := spec.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(p.Child("terminationGracePeriodSeconds"), *g, "must be >= 0"))
	}
	volumes, volErrs := validateVolumes(spec, p.Child("volumes"), ignored)
	errs = append(errs, volErrs...)
	errs = append(errs, validateFileKeyRefVolumes(spec, p)...)
	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(p.Child("containers"), "at least one container"))
	}
	// Container names are unique across init, app and ephemeral containers.
	names := sets.New[string]()
	errs = append(errs, validateInitContainers(spec, p.Child("initContainers"), volumes, names, ignored)...)
	errs = append(errs, validateAppContainers(spec, p.Child("containers"), volumes, names, ignored)...)
	errs = append(errs, validateEphemeralContainers(spec, p.Child("ephemeralContainers"), volumes, names, ignored)...)
	return errs
}

// validateHostNames checks the names the pod gives itself and its
// /etc/hosts: its hostname, subdomain and hostnameOverride, and hostAliases.
func validateHostNames(spec *v1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if o := spec.HostnameOverride; o != nil {
		hp := p.Child("hostnameOverride")
		for _, msg := range validation.IsDNS1123Subdomain(*o) {
			errs = append(errs, field.Invalid(hp, *o, msg))
		}
		if len(*o) > 64 {
			errs = append(errs, field.TooLong(hp, *o, 64))
		}
		if spec.HostNetwork {
			errs = append(errs, field.Invalid(hp, *o, "cannot be set with hostNetwork"))
		}
		if spec.SetHostnameAsFQDN != nil && *spec.SetHostnameAsFQDN {
			errs = append(errs, field.Invalid(hp, *o, "cannot be set with setHostnameAsFQDN"))
		}
	}
	for name, v := range map[string]string{"hostname": spec.Hostname, "subdomain": spec.Subdomain} {
		if v == "" {
			continue
		}
		for _, msg := range validation.IsDNS1123Label(v) {
			errs = append(errs, field.Invalid(p.Child(name), v, msg))
		}
	}
	for i, ha := range spec.HostAliases {
		hp := p.Child("hostAliases").Index(i)
		errs = append(errs, validation.IsValidIP(hp.Child("ip"), ha.IP)...)
		if len(ha.Hostnames) == 0 {
			errs = append(errs, field.Required(hp.Child("hostnames"), ""))
		}
		for j, h := range ha.Hostnames {
			for _, msg := range validation.IsDNS1123Subdomain(h) {
				errs = append(errs, field.Invalid(hp.Child("hostnames").Index(j), h, msg))
			}
		}
	}
	return errs
}

func validatePodSecurityContext(sc *v1.PodSecurityContext, p *field.Path, ignored *[]string) field.ErrorList {
	errs := checkFields(reflect.ValueOf(*sc), p, ignored)
	errs = append(errs, validateIDs(p, sc.RunAsUser, sc.RunAsGroup)...)
	errs = append(errs, validateSeccomp(sc.SeccompProfile, p.Child("seccompProfile"))...)
	errs = append(errs, validateAppArmor(sc.AppArmorProfile, p.Child("appArmorProfile"))...)
	if pol := sc.SupplementalGroupsPolicy; pol != nil && *pol != v1.SupplementalGroupsPolicyMerge && *pol != v1.SupplementalGroupsPolicyStrict {
		errs = append(errs, field.NotSupported(p.Child("supplementalGroupsPolicy"), *pol, []string{"Merge", "Strict"}))
	}
	for i, g := range sc.SupplementalGroups {
		if g < 0 {
			errs = append(errs, field.Invalid(p.Child("supplementalGroups").Index(i), g, "must be >= 0"))
		}
	}
	return errs
}

// validateVolumes checks each volume and returns the set of their names,
// which volume mounts refer to.
func validateVolumes(spec *v1.PodSpec, p *field.Path, ignored *[]string) (sets.Set[string], field.ErrorList) {
	var errs field.ErrorList
	names := sets.New[string]()
	for i := range spec.Volumes {
		vp := p.Index(i)
		vol := &spec.Volumes[i]
		errs = append(errs, validateVolume(vol, vp, spec, ignored)...)
		if names.Has(vol.Name) {
			errs = append(errs, field.Duplicate(vp.Child("name"), vol.Name))
		}
		names.Insert(vol.Name)
	}
	return names, errs
}

// validateInitContainers checks the init containers (sidecars among them)
// and adds their names to names.
func validateInitContainers(spec *v1.PodSpec, p *field.Path, volumes, names sets.Set[string], ignored *[]string) field.ErrorList {
	var errs field.ErrorList
	for i := range spec.InitContainers {
		cp := p.Index(i)
		c := &spec.InitContainers[i]
		errs = append(errs, validateContainer(c, cp, volumes, spec.HostNetwork, ignored)...)
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
		}
		names.Insert(c.Name)
		// As Kubernetes: an init container runs to completion, so probes and
		// hooks have no meaning; a sidecar (restartPolicy Always) runs
		// beside the app containers and may have them. Ports are never
		// published.
		if c.RestartPolicy != nil && !IsSidecar(c) {
			errs = append(errs, field.NotSupported(cp.Child("restartPolicy"), *c.RestartPolicy, []string{string(v1.ContainerRestartPolicyAlways)}))
		}
		if len(c.RestartPolicyRules) > 0 {
			errs = append(errs, field.Forbidden(cp.Child("restartPolicyRules"), "supported on app containers only"))
		}
		for name, set := range map[string]bool{"livenessProbe": c.LivenessProbe != nil, "readinessProbe": c.ReadinessProbe != nil,
			"startupProbe": c.StartupProbe != nil, "lifecycle": c.Lifecycle != nil} {
			if set && !IsSidecar(c) {
				errs = append(errs, field.Forbidden(cp.Child(name), "may not be set for init containers without restartPolicy: Always"))
			}
		}
		for j, port := range c.Ports {
			if port.HostPort != 0 {
				errs = append(errs, field.Forbidden(cp.Child("ports").Index(j).Child("hostPort"), "init containers publish no ports"))
			}
		}
	}
	return errs
}

// validateAppContainers checks the app containers, adds their names to
// names, and refuses two of them publishing the same host port.
func validateAppContainers(spec *v1.PodSpec, p *field.Path, volumes, names sets.Set[string], ignored *[]string) field.ErrorList {
	var errs field.ErrorList
	hostPorts := map[HostPort]string{}
	for i := range spec.Containers {
		cp := p.Index(i)
		c := &spec.Containers[i]
		errs = append(errs, validateContainer(c, cp, volumes, spec.HostNetwork, ignored)...)
		errs = append(errs, validateRestartRules(c, cp)...)
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
		}
		names.Insert(c.Name)
		for j, port := range c.Ports {
			if port.HostPort == 0 {
				continue
			}
			hp := toHostPort(port)
			pp := cp.Child("ports").Index(j)
			for other, where := range hostPorts {
				if hp.Conflicts(other) {
					errs = append(errs, field.Duplicate(pp.Child("hostPort"), fmt.Sprintf("%s (also claimed by %s)", hp, where)))
				}
			}
			hostPorts[hp] = pp.String()
		}
	}
	return errs
}

// validateEphemeralContainers checks the ephemeral containers against the
// others, whose names names holds.
func validateEphemeralContainers(spec *v1.PodSpec, p *field.Path, volumes, names sets.Set[string], ignored *[]string) field.ErrorList {
	var errs field.ErrorList
	regular := names.Clone()
	for i := range spec.EphemeralContainers {
		ep := p.Index(i)
		ec := &spec.EphemeralContainers[i]
		c := (*v1.Container)(&ec.EphemeralContainerCommon)
		errs = append(errs, validateContainer(c, ep, volumes, spec.HostNetwork, ignored)...)
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(ep.Child("name"), c.Name))
		}
		names.Insert(c.Name)
		// As the API server: a debugging container runs once beside the
		// others, so what would shape the pod or restart it is forbidden.
		for name, set := range map[string]bool{"ports": len(c.Ports) > 0, "livenessProbe": c.LivenessProbe != nil,
			"readinessProbe": c.ReadinessProbe != nil, "startupProbe": c.StartupProbe != nil, "lifecycle": c.Lifecycle != nil,
			"resources": len(c.Resources.Requests)+len(c.Resources.Limits) > 0, "restartPolicy": c.RestartPolicy != nil,
			"restartPolicyRules": len(c.RestartPolicyRules) > 0} {
			if set {
				errs = append(errs, field.Forbidden(ep.Child(name), "cannot be set for an ephemeral container"))
			}
		}
		if t := ec.TargetContainerName; t != "" && !regular.Has(t) {
			errs = append(errs, field.NotFound(ep.Child("targetContainerName"), t))
		}
	}
	return errs
}

// Limits of the resolver configuration, the API server's (from glibc's).
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
)

// validateDNSConfig checks dnsConfig as the API server does (with relaxed
// search validation, its default: "." and underscores allowed). Docker
// writes these values into resolv.conf line by line, so nothing may carry
// a line break: searches must be domain names, and, stricter than the API
// server, options may hold no whitespace or control characters.
func validateDNSConfig(spec *v1.PodSpec, p *field.Path) field.ErrorList {
	dc := spec.DNSConfig
	if spec.DNSPolicy == v1.DNSNone && (dc == nil || len(dc.Nameservers) == 0) {
		return field.ErrorList{field.Required(p.Child("nameservers"), "dnsPolicy None needs at least one nameserver")}
	}
	if dc == nil {
		return nil
	}
	var errs field.ErrorList
	if len(dc.Nameservers) > maxDNSNameservers {
		errs = append(errs, field.Invalid(p.Child("nameservers"), dc.Nameservers, fmt.Sprintf("must not have more than %d nameservers", maxDNSNameservers)))
	}
	for i, ns := range dc.Nameservers {
		errs = append(errs, validation.IsValidIP(p.Child("nameservers").Index(i), ns)...)
	}
	if len(dc.Searches) > maxDNSSearchPaths {
		errs = append(errs, field.Invalid(p.Child("searches"), dc.Searches, fmt.Sprintf("must not have more than %d search paths", maxDNSSearchPaths)))
	}
	if len(strings.Join(dc.Searches, " ")) > maxDNSSearchListChars {
		errs = append(errs, field.Invalid(p.Child("searches"), dc.Searches, fmt.Sprintf("must not have more than %d characters (including spaces) in the search list", maxDNSSearchListChars)))
	}
	for i, s := range dc.Searches {
		if s == "." {
			continue
		}
		for _, msg := range validation.IsDNS1123SubdomainWithUnderscore(strings.TrimSuffix(s, ".")) {
			errs = append(errs, field.Invalid(p.Child("searches").Index(i), s, msg))
		}
	}
	for i, o := range dc.Options {
		op := p.Child("options").Index(i)
		if o.Name == "" {
			errs = append(errs, field.Required(op.Child("name"), ""))
		} else if !isResolvToken(o.Name) {
			errs = append(errs, field.Invalid(op.Child("name"), o.Name, "must not contain whitespace or control characters"))
		}
		if o.Value != nil && !isResolvToken(*o.Value) {
			errs = append(errs, field.Invalid(op.Child("value"), *o.Value, "must not contain whitespace or control characters"))
		}
	}
	return errs
}

// isResolvToken reports whether s can stand as one word of a resolv.conf
// line: no whitespace (it would split the word), no control character (a
// line break would start a line of its own).
func isResolvToken(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) })
}

func validateVolume(vol *v1.Volume, p *field.Path, spec *v1.PodSpec, ignored *[]string) field.ErrorList {
	errs := checkFields(reflect.ValueOf(*vol), p, ignored)
	for _, msg := range validation.IsDNS1123Label(vol.Name) {
		errs = append(errs, field.Invalid(p.Child("name"), vol.Name, msg))
	}
	switch {
	case countSources(vol) > 1:
		errs = append(errs, field.Forbidden(p, "may specify only one volume source"))
	case vol.DownwardAPI != nil:
		errs = append(errs, validateDownwardAPIVolume(vol.DownwardAPI, p.Child("downwardAPI"), spec, ignored)...)
	case vol.ConfigMap != nil:
		errs = append(errs, validateKeyPaths(vol.ConfigMap.Items, vol.ConfigMap.DefaultMode, p.Child("configMap"), nil)...)
	case vol.Secret != nil:
		errs = append(errs, validateKeyPaths(vol.Secret.Items, vol.Secret.DefaultMode, p.Child("secret"), nil)...)
	case vol.Projected != nil:
		errs = append(errs, validateProjectedVolume(vol.Projected, p.Child("projected"), spec)...)
	case vol.HostPath != nil:
		errs = append(errs, validateHostPathVolume(vol.HostPath, p.Child("hostPath"), ignored)...)
	case vol.EmptyDir != nil:
		errs = append(errs, validateEmptyDirVolume(vol.EmptyDir, p.Child("emptyDir"), ignored)...)
	case vol.PersistentVolumeClaim != nil:
		errs = append(errs, checkFields(reflect.ValueOf(*vol.PersistentVolumeClaim), p.Child("persistentVolumeClaim"), ignored)...)
		if vol.PersistentVolumeClaim.ClaimName == "" {
			errs = append(errs, field.Required(p.Child("persistentVolumeClaim", "claimName"), ""))
		}
	case vol.CSI != nil:
		errs = append(errs, checkFields(reflect.ValueOf(*vol.CSI), p.Child("csi"), ignored)...)
		if vol.CSI.Driver == "" {
			errs = append(errs, field.Required(p.Child("csi", "driver"), ""))
		}
		if vol.CSI.Driver != "" {
			for _, msg := range validation.IsDNS1123Subdomain(strings.ToLower(vol.CSI.Driver)) {
				errs = append(errs, field.Invalid(p.Child("csi", "driver"), vol.CSI.Driver, msg))
			}
		}
	case vol.Ephemeral != nil:
		if vol.Ephemeral.VolumeClaimTemplate == nil {
			errs = append(errs, field.Required(p.Child("ephemeral", "volumeClaimTemplate"), ""))
		}
	default:
		// Another source was written: checkFields has rejected it already;
		// otherwise the volume has no source at all.
		if len(errs) == 0 {
			errs = append(errs, field.Required(p, "a volume source (hostPath, emptyDir, downwardAPI, ...)"))
		}
	}
	return errs
}

func validateDownwardAPIVolume(src *v1.DownwardAPIVolumeSource, p *field.Path, spec *v1.PodSpec, ignored *[]string) field.ErrorList {
	errs := checkFields(reflect.ValueOf(*src), p, ignored)
	errs = append(errs, validateMode(src.DefaultMode, p.Child("defaultMode"))...)
	paths := sets.New[string]()
	for i := range src.Items {
		item := &src.Items[i]
		ip := p.Child("items").Index(i)
		errs = append(errs, checkFields(reflect.ValueOf(*item), ip, ignored)...)
		errs = append(errs, validateDownwardAPIFile(item, ip, spec)...)
		if paths.Has(path.Clean(item.Path)) {
			errs = append(errs, field.Duplicate(ip.Child("path"), item.Path))
		}
		paths.Insert(path.Clean(item.Path))
	}
	return errs
}

// validateDownwardAPIFile checks one file of a downwardAPI volume or
// projection as the API server does: its path, its mode, and exactly one
// of the fields the agent can write.
func validateDownwardAPIFile(item *v1.DownwardAPIVolumeFile, p *field.Path, spec *v1.PodSpec) field.ErrorList {
	var errs field.ErrorList
	if err := checkPayloadPath(item.Path); err != "" {
		errs = append(errs, field.Invalid(p.Child("path"), item.Path, err))
	}
	errs = append(errs, validateMode(item.Mode, p.Child("mode"))...)
	switch {
	case (item.FieldRef == nil) == (item.ResourceFieldRef == nil):
		errs = append(errs, field.Invalid(p, item.Path, "must specify exactly one of fieldRef, resourceFieldRef"))
	case item.FieldRef != nil:
		if !volumeFieldPath(item.FieldRef.FieldPath) {
			errs = append(errs, field.NotSupported(p.Child("fieldRef", "fieldPath"), item.FieldRef.FieldPath,
				[]string{"metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels", "metadata.annotations", "metadata.labels['<key>']", "metadata.annotations['<key>']"}))
		}
	default:
		errs = append(errs, validateResourceRef(item.ResourceFieldRef, p.Child("resourceFieldRef"), spec, "")...)
	}
	return errs
}

func validateProjectedVolume(src *v1.ProjectedVolumeSource, p *field.Path, spec *v1.PodSpec) field.ErrorList {
	errs := validateMode(src.DefaultMode, p.Child("defaultMode"))
	paths := sets.New[string]() // the files the items write, none twice
	for i, s := range src.Sources {
		sp := p.Child("sources").Index(i)
		switch {
		case s.ConfigMap != nil:
			errs = append(errs, validateKeyPaths(s.ConfigMap.Items, nil, sp.Child("configMap"), paths)...)
		case s.Secret != nil:
			errs = append(errs, validateKeyPaths(s.Secret.Items, nil, sp.Child("secret"), paths)...)
		case s.DownwardAPI != nil:
			for j := range s.DownwardAPI.Items {
				it := &s.DownwardAPI.Items[j]
				ip := sp.Child("downwardAPI", "items").Index(j)
				errs = append(errs, validateDownwardAPIFile(it, ip, spec)...)
				errs = append(errs, claimPath(paths, it.Path, ip.Child("path"))...)
			}
		case s.ClusterTrustBundle != nil:
			errs = append(errs, validateTrustBundleProjection(s.ClusterTrustBundle, sp.Child("clusterTrustBundle"))...)
			errs = append(errs, claimPath(paths, s.ClusterTrustBundle.Path, sp.Child("clusterTrustBundle", "path"))...)
		case s.PodCertificate != nil:
			errs = append(errs, validatePodCertificateProjection(s.PodCertificate, sp.Child("podCertificate"), paths)...)
		case s.ServiceAccountToken != nil:
			if err := checkPayloadPath(s.ServiceAccountToken.Path); err != "" {
				errs = append(errs, field.Invalid(sp.Child("serviceAccountToken", "path"), s.ServiceAccountToken.Path, err))
			}
			if e := s.ServiceAccountToken.ExpirationSeconds; e != nil && *e < 600 {
				errs = append(errs, field.Invalid(sp.Child("serviceAccountToken", "expirationSeconds"), *e, "may not be less than 10 minutes"))
			}
		}
	}
	return errs
}

// validateTrustBundleProjection checks a clusterTrustBundle projection as
// the API server does: a bundle by name, or by signer (and labels).
func validateTrustBundleProjection(c *v1.ClusterTrustBundleProjection, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case c.Name != nil:
		if c.SignerName != nil {
			errs = append(errs, field.Invalid(p.Child("signerName"), *c.SignerName, "only one of name and signerName may be used"))
		}
		if c.LabelSelector != nil {
			errs = append(errs, field.Invalid(p.Child("labelSelector"), c.LabelSelector, "labelSelector may only be used with signerName"))
		}
		if *c.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		}
	case c.SignerName != nil:
		if *c.SignerName == "" {
			errs = append(errs, field.Required(p.Child("signerName"), ""))
		}
	default:
		errs = append(errs, field.Required(p, "either name or signerName must be specified"))
	}
	if err := checkPayloadPath(c.Path); err != "" {
		errs = append(errs, field.Invalid(p.Child("path"), c.Path, err))
	}
	if c.User != nil {
		errs = append(errs, field.Forbidden(p.Child("user"), "not supported by this agent (AtomicWriteVolumeUserFields)"))
	}
	return errs
}

// podCertificateKeyTypes are the key types a podCertificate may ask for.
var podCertificateKeyTypes = []string{"RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"}

// validatePodCertificateProjection checks a podCertificate projection as
// the API server does: a signer, a known key type, a lifetime between an
// hour and 91 days (a day for kubernetes.io signers), at least one file.
func validatePodCertificateProjection(c *v1.PodCertificateProjection, p *field.Path, paths sets.Set[string]) field.ErrorList {
	var errs field.ErrorList
	if domain, name, ok := strings.Cut(c.SignerName, "/"); !ok || domain == "" || name == "" {
		errs = append(errs, field.Invalid(p.Child("signerName"), c.SignerName, "must be a fully qualified domain and path of the form 'example.com/signer-name'"))
	}
	if !slices.Contains(podCertificateKeyTypes, c.KeyType) {
		errs = append(errs, field.NotSupported(p.Child("keyType"), c.KeyType, podCertificateKeyTypes))
	}
	if e := c.MaxExpirationSeconds; e != nil {
		limit := int32(91 * 24 * 3600)
		if strings.HasPrefix(c.SignerName, "kubernetes.io/") {
			limit = 24 * 3600
		}
		if *e < 3600 {
			errs = append(errs, field.Invalid(p.Child("maxExpirationSeconds"), *e, "if provided, maxExpirationSeconds must be >= 3600"))
		} else if *e > limit {
			errs = append(errs, field.Invalid(p.Child("maxExpirationSeconds"), *e, fmt.Sprintf("if provided, maxExpirationSeconds must be <= %d", limit)))
		}
	}
	files := 0
	for _, f := range []struct{ name, path string }{{"credentialBundlePath", c.CredentialBundlePath}, {"keyPath", c.KeyPath}, {"certificateChainPath", c.CertificateChainPath}} {
		if f.path == "" {
			continue
		}
		files++
		if err := checkPayloadPath(f.path); err != "" {
			errs = append(errs, field.Invalid(p.Child(f.name), f.path, err))
		}
		errs = append(errs, claimPath(paths, f.path, p.Child(f.name))...)
	}
	if files == 0 {
		errs = append(errs, field.Required(p, "specify at least one of credentialBundlePath, keyPath, and certificateChainPath"))
	}
	if c.User != nil {
		errs = append(errs, field.Forbidden(p.Child("user"), "not supported by this agent (AtomicWriteVolumeUserFields)"))
	}
	return errs
}

// claimPath records that an item of a projected volume writes file p,
// refusing it if another item writes it already, as the API server does
// (the second would silently replace the first).
func claimPath(paths sets.Set[string], p string, fp *field.Path) field.ErrorList {
	if paths == nil || p == "" {
		return nil
	}
	if paths.Has(path.Clean(p)) {
		return field.ErrorList{field.Invalid(fp, p, "conflicting duplicate paths")}
	}
	paths.Insert(path.Clean(p))
	return nil
}

func validateHostPathVolume(src *v1.HostPathVolumeSource, p *field.Path, ignored *[]string) field.ErrorList {
	errs := checkFields(reflect.ValueOf(*src), p, ignored)
	if !path.IsAbs(src.Path) || strings.Contains(src.Path, ":") {
		// Docker's binds are "source:target[:options]": a ':' in the
		// source would be read as the target.
		errs = append(errs, field.Invalid(p.Child("path"), src.Path, "must be an absolute path without ':'"))
	}
	if t := src.Type; t != nil && !slices.Contains(hostPathTypes, *t) {
		errs = append(errs, field.NotSupported(p.Child("type"), *t, hostPathTypes))
	}
	return errs
}

func validateEmptyDirVolume(src *v1.EmptyDirVolumeSource, p *field.Path, ignored *[]string) field.ErrorList {
	errs := checkFields(reflect.ValueOf(*src), p, ignored)
	if m := src.Medium; m != v1.StorageMediumDefault && m != v1.StorageMediumMemory {
		errs = append(errs, field.NotSupported(p.Child("medium"), m, []string{"", "Memory"}))
	}
	// As the API server: only a negative size is refused; zero is no
	// limit, and one past what the node has is bounded at setup
	// (pkg/kubelet/volumes) or simply never reached.
	if sl := src.SizeLimit; sl != nil && sl.Sign() < 0 {
		errs = append(errs, field.Invalid(p.Child("sizeLimit"), sl.String(), "must not be negative"))
	}
	return errs
}

func validateContainer(c *v1.Container, p *field.Path, volumes sets.Set[string], hostNetwork bool, ignored *[]string) field.ErrorList {
	errs := checkFields(reflect.ValueOf(*c), p, ignored)
	for _, msg := range validation.IsDNS1123Label(c.Name) {
		errs = append(errs, field.Invalid(p.Child("name"), c.Name, msg))
	}
	if strings.TrimSpace(c.Image) == "" || strings.ContainsAny(c.Image, " \t\n") {
		errs = append(errs, field.Invalid(p.Child("image"), c.Image, "must be a non-empty image reference without spaces"))
	}
	switch c.ImagePullPolicy {
	case "", v1.PullAlways, v1.PullIfNotPresent, v1.PullNever:
	default:
		errs = append(errs, field.NotSupported(p.Child("imagePullPolicy"), c.ImagePullPolicy, []string{"Always", "IfNotPresent", "Never"}))
	}
	for i := range c.Ports {
		errs = append(errs, validatePort(&c.Ports[i], p.Child("ports").Index(i), hostNetwork, ignored)...)
	}
	errs = append(errs, validateEnv(c, p, ignored)...)
	if sc := c.SecurityContext; sc != nil {
		errs = append(errs, validateSecurityContext(sc, p.Child("securityContext"), ignored)...)
	}
	if tmp := c.TerminationMessagePath; tmp != "" && (!path.IsAbs(tmp) || strings.Contains(tmp, ":")) {
		errs = append(errs, field.Invalid(p.Child("terminationMessagePath"), tmp, "must be an absolute path without ':'"))
	}
	switch c.TerminationMessagePolicy {
	case "", v1.TerminationMessageReadFile, v1.TerminationMessageFallbackToLogsOnError:
	default:
		errs = append(errs, field.NotSupported(p.Child("terminationMessagePolicy"), c.TerminationMessagePolicy, []string{"File", "FallbackToLogsOnError"}))
	}
	errs = append(errs, validateResources(&c.Resources, p.Child("resources"), ignored, true)...)
	errs = append(errs, validateResizePolicy(c.ResizePolicy, p.Child("resizePolicy"))...)
	errs = append(errs, validateProbesAndHooks(c, p, ignored)...)
	errs = append(errs, validateVolumeMounts(c, p.Child("volumeMounts"), volumes, ignored)...)
	return errs
}

// validateResizePolicy checks a container's resizePolicy as the API
// server does: cpu and memory, each at most once, NotRequired or
// RestartContainer.
func validateResizePolicy(policies []v1.ContainerResizePolicy, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := map[v1.ResourceName]bool{}
	for i, rp := range policies {
		ip := p.Index(i)
		switch rp.ResourceName {
		case v1.ResourceCPU, v1.ResourceMemory:
			if seen[rp.ResourceName] {
				errs = append(errs, field.Duplicate(ip.Child("resourceName"), rp.ResourceName))
			}
			seen[rp.ResourceName] = true
		default:
			errs = append(errs, field.NotSupported(ip.Child("resourceName"), rp.ResourceName, []string{"cpu", "memory"}))
		}
		switch rp.RestartPolicy {
		case v1.NotRequired, v1.RestartContainer:
		default:
			errs = append(errs, field.NotSupported(ip.Child("restartPolicy"), rp.RestartPolicy, []string{"NotRequired", "RestartContainer"}))
		}
	}
	return errs
}

// ValidateResize checks an update of a running pod (old, as admitted) to
// pod, as the API server's resize validation: a change of its resources
// may not change its QoS class, which places its cgroup; nor may a
// container's extended resources change, whose devices were assigned once,
// at the pod's admission (the API server lets only cpu and memory change).
func ValidateResize(old, pod *v1.Pod, qos func(*v1.Pod) v1.PodQOSClass) field.ErrorList {
	if old == nil || old.UID != pod.UID {
		return nil
	}
	var errs field.ErrorList
	if qos(old) != qos(pod) {
		errs = append(errs, field.Forbidden(field.NewPath("spec"), "Pod QOS Class may not change as a result of resizing"))
	}
	before := map[string]*v1.Container{}
	for _, cs := range [][]v1.Container{old.Spec.InitContainers, old.Spec.Containers} {
		for i := range cs {
			before[cs[i].Name] = &cs[i]
		}
	}
	check := func(cs []v1.Container, p *field.Path) {
		for i := range cs {
			if was := before[cs[i].Name]; was != nil && !sameExtended(was.Resources, cs[i].Resources) {
				errs = append(errs, field.Forbidden(p.Index(i).Child("resources"), "extended resources may not change on a running pod: its devices were assigned at its admission"))
			}
		}
	}
	check(pod.Spec.InitContainers, field.NewPath("spec", "initContainers"))
	check(pod.Spec.Containers, field.NewPath("spec", "containers"))
	return errs
}

// sameExtended reports whether a and b ask the same extended resources.
func sameExtended(a, b v1.ResourceRequirements) bool {
	extended := func(r v1.ResourceRequirements) map[string]int64 {
		out := map[string]int64{}
		add := func(kind string, list v1.ResourceList) {
			for name, q := range list {
				if IsExtendedResourceName(name) {
					out[kind+string(name)] = q.MilliValue()
				}
			}
		}
		add("requests/", r.Requests)
		add("limits/", r.Limits)
		return out
	}
	return maps.Equal(extended(a), extended(b))
}

// validateEnv checks the container's env and envFrom. Names (and
// envFrom's prefixes) are the API server's: printable ASCII without '='
// (RelaxedEnvironmentVariableValidation, on since Kubernetes 1.34), so
// none carries a line break into the container's environment.
func validateEnv(c *v1.Container, p *field.Path, ignored *[]string) field.ErrorList {
	var errs field.ErrorList
	for i, ef := range c.EnvFrom {
		if ef.Prefix == "" {
			continue
		}
		for _, msg := range validation.IsRelaxedEnvVarName(ef.Prefix) {
			errs = append(errs, field.Invalid(p.Child("envFrom").Index(i).Child("prefix"), ef.Prefix, msg))
		}
	}
	for i, env := range c.Env {
		ep := p.Child("env").Index(i)
		errs = append(errs, checkFields(reflect.ValueOf(env), ep, ignored)...)
		if env.Name == "" {
			errs = append(errs, field.Required(ep.Child("name"), ""))
		} else {
			for _, msg := range validation.IsRelaxedEnvVarName(env.Name) {
				errs = append(errs, field.Invalid(ep.Child("name"), env.Name, msg))
			}
		}
		vf := env.ValueFrom
		if vf == nil {
			continue
		}
		vp := ep.Child("valueFrom")
		errs = append(errs, checkFields(reflect.ValueOf(*vf), vp, ignored)...)
		if env.Value != "" {
			errs = append(errs, field.Invalid(ep.Child("value"), env.Value, "may not be set with valueFrom"))
		}
		switch {
		case vf.FieldRef != nil && vf.ResourceFieldRef != nil:
			errs = append(errs, field.Invalid(vp, "", "must specify exactly one of fieldRef, resourceFieldRef"))
		case vf.FieldRef != nil:
			if !envFieldPath(vf.FieldRef.FieldPath) {
				errs = append(errs, field.NotSupported(vp.Child("fieldRef", "fieldPath"), vf.FieldRef.FieldPath,
					[]string{"metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels['<key>']", "metadata.annotations['<key>']",
						"spec.nodeName", "spec.serviceAccountName", "status.podIP", "status.podIPs", "status.hostIP", "status.hostIPs"}))
			}
		case vf.ResourceFieldRef != nil:
			errs = append(errs, validateResourceRef(vf.ResourceFieldRef, vp.Child("resourceFieldRef"), nil, c.Name)...)
		case vf.FileKeyRef != nil:
			errs = append(errs, validateFileKeySelector(vf.FileKeyRef, vp.Child("fileKeyRef"))...)
		}
	}
	return errs
}

// validateFileKeySelector checks a fileKeyRef as the API server does: a
// key that is a (relaxed) variable name, a volume name that is a DNS-1123
// label, a relative path without "..".
func validateFileKeySelector(s *v1.FileKeySelector, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Key == "" {
		errs = append(errs, field.Required(p.Child("key"), ""))
	} else {
		for _, msg := range validation.IsRelaxedEnvVarName(s.Key) {
			errs = append(errs, field.Invalid(p.Child("key"), s.Key, msg))
		}
	}
	if s.VolumeName == "" {
		errs = append(errs, field.Required(p.Child("volumeName"), ""))
	} else {
		for _, msg := range validation.IsDNS1123Label(s.VolumeName) {
			errs = append(errs, field.Invalid(p.Child("volumeName"), s.VolumeName, msg))
		}
	}
	if err := checkRelativePath(s.Path); err != "" {
		errs = append(errs, field.Invalid(p.Child("path"), s.Path, err))
	}
	return errs
}

// validateFileKeyRefVolumes checks that each container's fileKeyRef names
// an emptyDir volume of the pod, as the API server does: the agent reads
// the env file beneath that volume's directory on the host.
func validateFileKeyRefVolumes(spec *v1.PodSpec, p *field.Path) field.ErrorList {
	emptyDir := map[string]bool{}
	for _, vol := range spec.Volumes {
		emptyDir[vol.Name] = vol.EmptyDir != nil
	}
	var errs field.ErrorList
	check := func(cs []v1.Container, cp *field.Path) {
		for i := range cs {
			for j, env := range cs[i].Env {
				if env.ValueFrom == nil || env.ValueFrom.FileKeyRef == nil {
					continue
				}
				name := env.ValueFrom.FileKeyRef.VolumeName
				np := cp.Index(i).Child("env").Index(j).Child("valueFrom", "fileKeyRef", "volumeName")
				isEmptyDir, found := emptyDir[name]
				switch {
				case !found:
					errs = append(errs, field.NotFound(np, name))
				case !isEmptyDir:
					errs = append(errs, field.Invalid(np, name, "referenced volume must be of type emptyDir"))
				}
			}
		}
	}
	check(spec.InitContainers, p.Child("initContainers"))
	check(spec.Containers, p.Child("containers"))
	return errs
}

func validateSecurityContext(sc *v1.SecurityContext, p *field.Path, ignored *[]string) field.ErrorList {
	errs := checkFields(reflect.ValueOf(*sc), p, ignored)
	errs = append(errs, validateIDs(p, sc.RunAsUser, sc.RunAsGroup)...)
	errs = append(errs, validateSeccomp(sc.SeccompProfile, p.Child("seccompProfile"))...)
	errs = append(errs, validateAppArmor(sc.AppArmorProfile, p.Child("appArmorProfile"))...)
	if pm := sc.ProcMount; pm != nil {
		switch *pm {
		case v1.DefaultProcMount:
		case v1.UnmaskedProcMount:
			// Only in a user namespace (hostUsers: false), which the agent
			// refuses: the API server's rule, and its message.
			errs = append(errs, field.Invalid(p.Child("procMount"), *pm, "`hostUsers` must be false to use `Unmasked`"))
		default:
			errs = append(errs, field.NotSupported(p.Child("procMount"), *pm, []string{string(v1.DefaultProcMount), string(v1.UnmaskedProcMount)}))
		}
	}
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation && (sc.Privileged != nil && *sc.Privileged) {
		errs = append(errs, field.Invalid(p.Child("allowPrivilegeEscalation"), false, "cannot be false for a privileged container"))
	}
	return errs
}

// validateProbesAndHooks checks the container's probes and lifecycle hooks.
func validateProbesAndHooks(c *v1.Container, p *field.Path, ignored *[]string) field.ErrorList {
	var errs field.ErrorList
	for _, pr := range []struct {
		name       string
		probe      *v1.Probe
		oneSuccess bool
	}{{"livenessProbe", c.LivenessProbe, true}, {"readinessProbe", c.ReadinessProbe, false}, {"startupProbe", c.StartupProbe, true}} {
		if pr.probe != nil {
			errs = append(errs, validateProbe(pr.probe, p.Child(pr.name), c, pr.oneSuccess, ignored)...)
		}
	}
	if lc := c.Lifecycle; lc != nil {
		lp := p.Child("lifecycle")
		errs = append(errs, checkFields(reflect.ValueOf(*lc), lp, ignored)...)
		if lc.PostStart != nil {
			errs = append(errs, validateHandler(lc.PostStart, lp.Child("postStart"), c, ignored)...)
		}
		if lc.PreStop != nil {
			errs = append(errs, validateHandler(lc.PreStop, lp.Child("preStop"), c, ignored)...)
		}
	}
	return errs
}

func validateVolumeMounts(c *v1.Container, p *field.Path, volumes sets.Set[string], ignored *[]string) field.ErrorList {
	var errs field.ErrorList
	mountPaths := sets.New[string]()
	for i, m := range c.VolumeMounts {
		mp := p.Index(i)
		errs = append(errs, checkFields(reflect.ValueOf(m), mp, ignored)...)
		if !volumes.Has(m.Name) {
			errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
		}
		if !path.IsAbs(m.MountPath) || strings.Contains(m.MountPath, ":") {
			errs = append(errs, field.Invalid(mp.Child("mountPath"), m.MountPath, "must be an absolute path without ':'"))
		}
		if m.SubPath != "" && m.SubPathExpr != "" {
			errs = append(errs, field.Invalid(mp.Child("subPathExpr"), m.SubPathExpr, "subPath and subPathExpr are mutually exclusive"))
		}
		if m.SubPath != "" {
			if err := checkRelativePath(m.SubPath); err != "" {
				errs = append(errs, field.Invalid(mp.Child("subPath"), m.SubPath, err))
			}
		}
		if m.SubPathExpr != "" && path.IsAbs(m.SubPathExpr) {
			errs = append(errs, field.Invalid(mp.Child("subPathExpr"), m.SubPathExpr, "must be a relative path"))
		}
		errs = append(errs, validateMountPropagation(m.MountPropagation, c, mp.Child("mountPropagation"))...)
		errs = append(errs, validateRecursiveReadOnly(m, mp.Child("recursiveReadOnly"))...)
		if mountPaths.Has(path.Clean(m.MountPath)) {
			errs = append(errs, field.Duplicate(mp.Child("mountPath"), m.MountPath))
		}
		mountPaths.Insert(path.Clean(m.MountPath))
	}
	return errs
}

// validateMountPropagation checks a mount's mountPropagation as the API
// server does: Bidirectional mounts what the container mounts back onto
// the host, which only a privileged container may do.
func validateMountPropagation(mode *v1.MountPropagationMode, c *v1.Container, p *field.Path) field.ErrorList {
	if mode == nil {
		return nil
	}
	switch *mode {
	case v1.MountPropagationNone, v1.MountPropagationHostToContainer:
		return nil
	case v1.MountPropagationBidirectional:
		if sc := c.SecurityContext; sc == nil || sc.Privileged == nil || !*sc.Privileged {
			return field.ErrorList{field.Forbidden(p, "Bidirectional mount propagation is available only to privileged containers")}
		}
		return nil
	}
	return field.ErrorList{field.NotSupported(p, *mode, []string{string(v1.MountPropagationBidirectional), string(v1.MountPropagationHostToContainer), string(v1.MountPropagationNone)})}
}

// validateRecursiveReadOnly checks a mount's recursiveReadOnly as the API
// server does.
func validateRecursiveReadOnly(m v1.VolumeMount, p *field.Path) field.ErrorList {
	if m.RecursiveReadOnly == nil {
		return nil
	}
	switch *m.RecursiveReadOnly {
	case v1.RecursiveReadOnlyDisabled:
		return nil
	case v1.RecursiveReadOnlyEnabled, v1.RecursiveReadOnlyIfPossible:
		var errs field.ErrorList
		if !m.ReadOnly {
			errs = append(errs, field.Forbidden(p, "may only be specified when readOnly is true"))
		}
		if m.MountPropagation != nil && *m.MountPropagation != v1.MountPropagationNone {
			errs = append(errs, field.Forbidden(p, "may only be specified when mountPropagation is None or not specified"))
		}
		return errs
	}
	return field.ErrorList{field.NotSupported(p, *m.RecursiveReadOnly, []string{string(v1.RecursiveReadOnlyDisabled), string(v1.RecursiveReadOnlyEnabled), string(v1.RecursiveReadOnlyIfPossible)})}
}

func validateProbe(pr *v1.Probe, p *field.Path, c *v1.Container, oneSuccess bool, ignored *[]string) field.ErrorList {
	errs := checkFields(reflect.ValueOf(*pr), p, ignored)
	h := pr.ProbeHandler
	n, actionErrs := validateExecHTTP(h.Exec, h.HTTPGet, p, c)
	errs = append(errs, actionErrs...)
	if h.TCPSocket != nil {
		n++
		errs = append(errs, validateActionPort(h.TCPSocket.Port, p.Child("tcpSocket", "port"), c)...)
	}
	if h.GRPC != nil {
		n++
		if h.GRPC.Port < 1 || h.GRPC.Port > 65535 {
			errs = append(errs, field.Invalid(p.Child("grpc", "port"), h.GRPC.Port, "must be between 1 and 65535"))
		}
	}
	if n != 1 {
		errs = append(errs, field.Invalid(p, n, "must specify exactly one of exec, httpGet, tcpSocket, grpc"))
	}
	for name, v := range map[string]int32{"initialDelaySeconds": pr.InitialDelaySeconds, "timeoutSeconds": pr.TimeoutSeconds,
		"periodSeconds": pr.PeriodSeconds, "successThreshold": pr.SuccessThreshold, "failureThreshold": pr.FailureThreshold} {
		if v < 0 {
			errs = append(errs, field.Invalid(p.Child(name), v, "must be >= 0"))
		}
	}
	if oneSuccess && pr.SuccessThreshold > 1 {
		errs = append(errs, field.Invalid(p.Child("successThreshold"), pr.SuccessThreshold, "must be 1 for liveness and startup probes"))
	}
	if g := pr.TerminationGracePeriodSeconds; g != nil {
		switch {
		case !oneSuccess: // a readiness probe kills nothing
			errs = append(errs, field.Invalid(p.Child("terminationGracePeriodSeconds"), *g, "must not be set for readinessProbes"))
		case *g <= 0:
			errs = append(errs, field.Invalid(p.Child("terminationGracePeriodSeconds"), *g, "must be greater than 0"))
		}
	}
	return errs
}

func validateHandler(h *v1.LifecycleHandler, p *field.Path, c *v1.Container, ignored *[]string) field.ErrorList {
	errs := checkFields(reflect.ValueOf(*h), p, ignored)
	n, actionErrs := validateExecHTTP(h.Exec, h.HTTPGet, p, c)
	errs = append(errs, actionErrs...)
	if h.Sleep != nil {
		n++
		if h.Sleep.Seconds < 0 {
			errs = append(errs, field.Invalid(p.Child("sleep", "seconds"), h.Sleep.Seconds, "must be >= 0"))
		}
	}
	if h.TCPSocket != nil {
		n++ // rejected by the field table; counted so the error below stays true
	}
	if n != 1 {
		errs = append(errs, field.Invalid(p, n, "must specify exactly one of exec, httpGet, sleep"))
	}
	return errs
}

// validateExecHTTP checks the exec and httpGet actions probes and hooks
// share, and counts those that are set.
func validateExecHTTP(e *v1.ExecAction, g *v1.HTTPGetAction, p *field.Path, c *v1.Container) (int, field.ErrorList) {
	n := 0
	var errs field.ErrorList
	if e != nil {
		n++
		if len(e.Command) == 0 {
			errs = append(errs, field.Required(p.Child("exec", "command"), ""))
		}
	}
	if g != nil {
		n++
		errs = append(errs, validateHTTPGet(g, p.Child("httpGet"), c)...)
	}
	return n, errs
}

func validateHTTPGet(g *v1.HTTPGetAction, p *field.Path, c *v1.Container) field.ErrorList {
	errs := validateActionPort(g.Port, p.Child("port"), c)
	switch g.Scheme {
	case "", v1.URISchemeHTTP, v1.URISchemeHTTPS:
	default:
		errs = append(errs, field.NotSupported(p.Child("scheme"), g.Scheme, []string{"HTTP", "HTTPS"}))
	}
	return errs
}

// validateActionPort checks a probe or hook port: a number, or the name of
// one of the container's ports.
func validateActionPort(port intstr.IntOrString, p *field.Path, c *v1.Container) field.ErrorList {
	if port.Type == intstr.Int {
		if port.IntVal < 1 || port.IntVal > 65535 {
			return field.ErrorList{field.Invalid(p, port.IntVal, "must be between 1 and 65535")}
		}
		return nil
	}
	for _, cp := range c.Ports {
		if cp.Name == port.StrVal {
			return nil
		}
	}
	return field.ErrorList{field.Invalid(p, port.StrVal, "must be a port number or the name of a port of the container")}
}

// checkRelativePath returns why p is not a safe relative path ("" if it is).
func checkRelativePath(p string) string {
	if p == "" || path.IsAbs(p) {
		return "must be a non-empty relative path"
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return "must not contain '..'"
		}
	}
	return ""
}

// checkPayloadPath returns why p cannot name a file the agent writes into
// a downwardAPI, configMap, secret or projected volume ("" if it can): a
// safe relative path (checkRelativePath) whose first element does not
// start with "..", as the API server's rule: those names are the atomic
// writer's own (..data, the ..<timestamp> directories).
func checkPayloadPath(p string) string {
	if err := checkRelativePath(p); err != "" {
		return err
	}
	if strings.HasPrefix(p, "..") {
		return "must not start with '..'"
	}
	return ""
}

func validateIDs(p *field.Path, user, group *int64) field.ErrorList {
	var errs field.ErrorList
	if user != nil && *user < 0 {
		errs = append(errs, field.Invalid(p.Child("runAsUser"), *user, "must be >= 0"))
	}
	if group != nil && *group < 0 {
		errs = append(errs, field.Invalid(p.Child("runAsGroup"), *group, "must be >= 0"))
	}
	return errs
}

// fieldPathKey matches metadata.labels['k'] and metadata.annotations['k'].
var fieldPathKey = regexp.MustCompile(`^metadata\.(labels|annotations)\['[^']+'\]$`)

func envFieldPath(fp string) bool {
	switch fp {
	case "metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName",
		"status.podIP", "status.podIPs", "status.hostIP", "status.hostIPs":
		return true
	}
	return fieldPathKey.MatchString(fp)
}

func volumeFieldPath(fp string) bool {
	switch fp {
	case "metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels", "metadata.annotations":
		return true
	}
	return fieldPathKey.MatchString(fp)
}

// validateResourceRef checks a resourceFieldRef; in a volume (spec set) it
// must name a container of the pod, in env (self set) the container itself.
func validateResourceRef(r *v1.ResourceFieldSelector, p *field.Path, spec *v1.PodSpec, self string) field.ErrorList {
	var errs field.ErrorList
	switch r.Resource {
	case "requests.cpu", "limits.cpu", "requests.memory", "limits.memory", "requests.ephemeral-storage", "limits.ephemeral-storage":
	default:
		errs = append(errs, field.NotSupported(p.Child("resource"), r.Resource, []string{"requests.cpu", "limits.cpu", "requests.memory", "limits.memory",
			"requests.ephemeral-storage", "limits.ephemeral-storage"}))
	}
	if d := r.Divisor; !d.IsZero() && d.Sign() < 0 {
		errs = append(errs, field.Invalid(p.Child("divisor"), d.String(), "must be positive"))
	}
	switch {
	case spec != nil:
		found := false
		for _, c := range spec.Containers {
			found = found || c.Name == r.ContainerName
		}
		if !found {
			errs = append(errs, field.Invalid(p.Child("containerName"), r.ContainerName, "must name a container of the pod"))
		}
	case r.ContainerName != "" && r.ContainerName != self:
		errs = append(errs, field.Invalid(p.Child("containerName"), r.ContainerName, "must be empty or this container's name"))
	}
	return errs
}

func countSources(vol *v1.Volume) int {
	n := 0
	for _, set := range []bool{vol.HostPath != nil, vol.EmptyDir != nil, vol.DownwardAPI != nil} {
		if set {
			n++
		}
	}
	return n
}

func validatePort(port *v1.ContainerPort, p *field.Path, hostNetwork bool, ignored *[]string) field.ErrorList {
	errs := checkFields(reflect.ValueOf(*port), p, ignored)
	if port.ContainerPort < 1 || port.ContainerPort > 65535 {
		errs = append(errs, field.Invalid(p.Child("containerPort"), port.ContainerPort, "must be between 1 and 65535"))
	}
	if port.HostPort < 0 || port.HostPort > 65535 {
		errs = append(errs, field.Invalid(p.Child("hostPort"), port.HostPort, "must be between 1 and 65535, or 0 for none"))
	}
	if hostNetwork && port.HostPort != 0 && port.HostPort != port.ContainerPort {
		errs = append(errs, field.Invalid(p.Child("hostPort"), port.HostPort, "must equal containerPort when hostNetwork is true"))
	}
	switch port.Protocol {
	case "", v1.ProtocolTCP, v1.ProtocolUDP:
	default:
		errs = append(errs, field.NotSupported(p.Child("protocol"), port.Protocol, []string{"TCP", "UDP"}))
	}
	if port.HostIP != "" && net.ParseIP(port.HostIP) == nil {
		errs = append(errs, field.Invalid(p.Child("hostIP"), port.HostIP, "must be an IP address"))
	}
	if port.Name != "" {
		for _, msg := range validation.IsValidPortName(port.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), port.Name, msg))
		}
	}
	return errs
}

// validateResources checks resource requirements: cpu, memory and
// ephemeral-storage, and, for a container (extended), extended resources
// (a device plugin's).
func validateResources(r *v1.ResourceRequirements, p *field.Path, ignored *[]string, extended bool) field.ErrorList {
	errs := checkFields(reflect.ValueOf(*r), p, ignored)
	check := func(list v1.ResourceList, lp *field.Path) {
		for name, q := range list {
			rp := lp.Key(string(name))
			switch name {
			case v1.ResourceCPU, v1.ResourceMemory:
				if q.Sign() < 0 {
					errs = append(errs, field.Invalid(rp, q.String(), "must not be negative"))
				}
				// Compared as decimals: converting first would overflow
				// (cpu 8Ei became 1% of a core).
				if max := maxQuantity[name]; q.Cmp(max) > 0 {
					errs = append(errs, field.Invalid(rp, q.String(), "must be at most "+max.String()+maxQuantityWhy[name]))
				}
			case v1.ResourceEphemeralStorage:
				if q.Sign() < 0 {
					errs = append(errs, field.Invalid(rp, q.String(), "must not be negative"))
				}
				*ignored = append(*ignored, rp.String())
			default:
				if !extended || !IsExtendedResourceName(name) {
					errs = append(errs, field.NotSupported(rp, name, []string{"cpu", "memory", "ephemeral-storage", "<domain>/<name> (an extended resource)"}))
				} else if q.MilliValue()%1000 != 0 || q.Sign() < 0 {
					errs = append(errs, field.Invalid(rp, q.String(), "must be a non-negative integer (an extended resource)"))
				}
			}
		}
	}
	check(r.Requests, p.Child("requests"))
	check(r.Limits, p.Child("limits"))
	// Extended resources are not overcommitted: the API server wants the
	// request (defaulted from the limit) equal to the limit.
	for name, req := range r.Requests {
		if !extended || !IsExtendedResourceName(name) {
			continue
		}
		lim, ok := r.Limits[name]
		switch {
		case !ok:
			errs = append(errs, field.Required(p.Child("limits").Key(string(name)), "Limit must be set for non overcommitable resources"))
		case req.Cmp(lim) != 0:
			errs = append(errs, field.Invalid(p.Child("requests").Key(string(name)), req.String(), fmt.Sprintf("must be equal to %s limit of %s", name, lim.String())))
		}
	}
	if m, ok := r.Limits[v1.ResourceMemory]; ok && m.Cmp(*resource.NewQuantity(MinMemoryLimit, resource.BinarySI)) < 0 {
		errs = append(errs, field.Invalid(p.Child("limits").Key("memory"), m.String(), "must be at least 6Mi (Docker's minimum)"))
	}
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		req, hasReq := r.Requests[name]
		lim, hasLim := r.Limits[name]
		if hasReq && hasLim && req.Cmp(lim) > 0 {
			errs = append(errs, field.Invalid(p.Child("requests").Key(string(name)), req.String(), "must be less than or equal to the limit "+lim.String()))
		}
	}
	return errs
}

// validatePodResources checks pod-level resources as the API server does:
// cpu and memory only; no container's limit above the pod's; the pod's
// request (its limit when unset) at least what its containers request.
func validatePodResources(spec *v1.PodSpec, p *field.Path, ignored *[]string) field.ErrorList {
	errs := validateResources(spec.Resources, p, ignored, false)
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		podLim, hasLim := spec.Resources.Limits[name]
		podReq, hasReq := spec.Resources.Requests[name]
		if !hasReq && hasLim {
			podReq, hasReq = podLim, true
		}
		var sum resource.Quantity
		for _, cs := range [][]v1.Container{spec.InitContainers, spec.Containers} {
			for _, c := range cs {
				if l, ok := c.Resources.Limits[name]; ok && hasLim && l.Cmp(podLim) > 0 {
					errs = append(errs, field.Invalid(p.Child("limits").Key(string(name)), podLim.String(),
						fmt.Sprintf("must be at least container %s's limit %s", c.Name, l.String())))
				}
			}
		}
		for _, c := range spec.Containers {
			if r, ok := c.Resources.Requests[name]; ok {
				sum.Add(r)
			}
		}
		if hasReq && sum.Cmp(podReq) > 0 {
			errs = append(errs, field.Invalid(p.Child("requests").Key(string(name)), podReq.String(),
				"must be at least the sum of the containers' requests, "+sum.String()))
		}
	}
	return errs
}

// MaxCPU is the largest whole number of CPUs whose CFS quota the kernel
// accepts (at most 2^44-1 µs per 100 ms period); larger requests or limits
// are refused rather than wrapped around.
const MaxCPU = ((1 << 44) - 1) / 100 / 1000

// maxQuantity bounds cpu and memory so that converting them to Docker's
// integers cannot overflow.
var (
	maxQuantity = map[v1.ResourceName]resource.Quantity{
		v1.ResourceCPU:    *resource.NewQuantity(MaxCPU, resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(math.MaxInt64, resource.BinarySI),
	}
	maxQuantityWhy = map[v1.ResourceName]string{
		v1.ResourceCPU:    " (the largest CFS quota the kernel accepts)",
		v1.ResourceMemory: " bytes (the largest limit Docker accepts)",
	}
)

// validateSeccomp checks a seccomp profile as the API server does: a known
// type, and a relative localhostProfile (without "..") for Localhost only.
func validateSeccomp(sp *v1.SeccompProfile, p *field.Path) field.ErrorList {
	if sp == nil {
		return nil
	}
	var errs field.ErrorList
	switch sp.Type {
	case v1.SeccompProfileTypeRuntimeDefault, v1.SeccompProfileTypeUnconfined:
		if sp.LocalhostProfile != nil {
			errs = append(errs, field.Invalid(p.Child("localhostProfile"), *sp.LocalhostProfile, "can only be set for type Localhost"))
		}
	case v1.SeccompProfileTypeLocalhost:
		lp := sp.LocalhostProfile
		switch {
		case lp == nil || *lp == "":
			errs = append(errs, field.Required(p.Child("localhostProfile"), "type Localhost needs a profile"))
		case path.IsAbs(*lp) || slices.Contains(strings.Split(*lp, "/"), ".."):
			errs = append(errs, field.Invalid(p.Child("localhostProfile"), *lp, "must be a path relative to the seccomp directory, without '..'"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), sp.Type, []string{"RuntimeDefault", "Unconfined", "Localhost"}))
	}
	return errs
}

// validateAppArmor checks an AppArmor profile as the API server does.
func validateAppArmor(ap *v1.AppArmorProfile, p *field.Path) field.ErrorList {
	if ap == nil {
		return nil
	}
	switch ap.Type {
	case v1.AppArmorProfileTypeRuntimeDefault, v1.AppArmorProfileTypeUnconfined:
		if ap.LocalhostProfile != nil {
			return field.ErrorList{field.Invalid(p.Child("localhostProfile"), *ap.LocalhostProfile, "can only be set for type Localhost")}
		}
	case v1.AppArmorProfileTypeLocalhost:
		if ap.LocalhostProfile == nil || strings.TrimSpace(*ap.LocalhostProfile) == "" {
			return field.ErrorList{field.Required(p.Child("localhostProfile"), "type Localhost needs a profile name")}
		}
	default:
		return field.ErrorList{field.NotSupported(p.Child("type"), ap.Type, []string{"RuntimeDefault", "Unconfined", "Localhost"})}
	}
	return nil
}

// HostPort is one published port on the node.
type HostPort struct {
	IP       string // "" means every address
	Port     int32
	Protocol v1.Protocol
}

func toHostPort(p v1.ContainerPort) HostPort {
	proto := p.Protocol
	if proto == "" {
		proto = v1.ProtocolTCP
	}
	ip := p.HostIP
	if ip == "0.0.0.0" || ip == "::" {
		ip = ""
	}
	return HostPort{IP: ip, Port: p.HostPort, Protocol: proto}
}

func (h HostPort) String() string {
	ip := h.IP
	if ip == "" {
		ip = "0.0.0.0"
	}
	return fmt.Sprintf("%s/%s", net.JoinHostPort(ip, fmt.Sprint(h.Port)), h.Protocol)
}

// Conflicts reports whether two host ports cannot both be bound: the same port
// and protocol on the same address, or on any address when either binds all.
func (h HostPort) Conflicts(o HostPort) bool {
	return h.Port == o.Port && h.Protocol == o.Protocol && (h.IP == o.IP || h.IP == "" || o.IP == "")
}

// validateKeyPaths checks a config map's or secret's items as the API
// server does: a key, a path the atomic writer can own (checkPayloadPath),
// modes within 0777; in a projected volume (paths not nil) no path twice.
func validateKeyPaths(items []v1.KeyToPath, defaultMode *int32, p *field.Path, paths sets.Set[string]) field.ErrorList {
	errs := validateMode(defaultMode, p.Child("defaultMode"))
	for i, it := range items {
		ip := p.Child("items").Index(i)
		if it.Key == "" {
			errs = append(errs, field.Required(ip.Child("key"), ""))
		}
		if err := checkPayloadPath(it.Path); err != "" {
			errs = append(errs, field.Invalid(ip.Child("path"), it.Path, err))
		}
		errs = append(errs, validateMode(it.Mode, ip.Child("mode"))...)
		errs = append(errs, claimPath(paths, it.Path, ip.Child("path"))...)
	}
	return errs
}

// validateMode checks a file mode as the API server does: permission bits
// only. Go's chmod would drop setuid, setgid and sticky (04755 became
// 0755) rather than refuse them.
func validateMode(m *int32, p *field.Path) field.ErrorList {
	if m != nil && (*m < 0 || *m > 0o777) {
		return field.ErrorList{field.Invalid(p, *m, "must be a number between 0 and 0777 (octal), both inclusive")}
	}
	return nil
}

// validateRestartRules checks an app container's own restart policy and
// rules (ContainerRestartRules, on by default since Kubernetes 1.35) as the
// API server does.
func validateRestartRules(c *v1.Container, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if rp := c.RestartPolicy; rp != nil {
		switch *rp {
		case v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyOnFailure, v1.ContainerRestartPolicyNever:
		default:
			errs = append(errs, field.NotSupported(p.Child("restartPolicy"), *rp, []string{"Always", "OnFailure", "Never"}))
		}
	}
	for i, r := range c.RestartPolicyRules {
		rp := p.Child("restartPolicyRules").Index(i)
		if r.Action != v1.ContainerRestartRuleActionRestart {
			errs = append(errs, field.NotSupported(rp.Child("action"), r.Action, []string{string(v1.ContainerRestartRuleActionRestart)}))
		}
		if r.ExitCodes == nil {
			errs = append(errs, field.Required(rp.Child("exitCodes"), ""))
			continue
		}
		ep := rp.Child("exitCodes")
		switch r.ExitCodes.Operator {
		case v1.ContainerRestartRuleOnExitCodesOpIn, v1.ContainerRestartRuleOnExitCodesOpNotIn:
		default:
			errs = append(errs, field.NotSupported(ep.Child("operator"), r.ExitCodes.Operator, []string{"In", "NotIn"}))
		}
		if len(r.ExitCodes.Values) > 255 {
			errs = append(errs, field.TooMany(ep.Child("values"), len(r.ExitCodes.Values), 255))
		}
		seen := map[int32]bool{}
		for j, v := range r.ExitCodes.Values {
			if v < 0 || v > 255 {
				errs = append(errs, field.Invalid(ep.Child("values").Index(j), v, "must be between 0 and 255"))
			}
			if seen[v] {
				errs = append(errs, field.Duplicate(ep.Child("values").Index(j), v))
			}
			seen[v] = true
		}
	}
	return errs
}

// HostPorts lists the ports the pod publishes on the node.
func HostPorts(pod *v1.Pod) []HostPort {
	var out []HostPort
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort != 0 {
				out = append(out, toHostPort(p))
			}
		}
	}
	return out
}

// IsSidecar reports whether an init container is a sidecar: restartPolicy
// Always keeps it running beside the app containers, as Kubernetes' native
// sidecars.
func IsSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}
