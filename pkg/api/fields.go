package api

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Support says what the agent does with a manifest field.
type Support int

const (
	// Implemented fields are honoured exactly.
	Implemented Support = iota
	// Ignored fields are accepted and logged once: they are informational on a
	// node without an API server (scheduling hints and the like).
	Ignored
	// Rejected fields make the pod invalid: silently not honouring them would
	// change what runs.
	Rejected
)

func (s Support) String() string {
	return [...]string{"implemented", "ignored", "rejected"}[s]
}

// FieldRule is one row of the field table.
type FieldRule struct {
	Support Support
	Note    string
}

func impl(note string) FieldRule   { return FieldRule{Implemented, note} }
func ignore(note string) FieldRule { return FieldRule{Ignored, note} }
func reject(note string) FieldRule { return FieldRule{Rejected, note} }

const (
	notYet      = "not implemented yet"
	scheduling  = "scheduling: the pod is already on this node"
	noAPIServer = "there is no API server to provide it"
)

// FieldTables lists, per Go type, what the agent does with each JSON field.
// A field missing from its table (one a newer k8s.io/api added) is rejected:
// the safe default for a field whose meaning the agent does not know.
var FieldTables = map[reflect.Type]map[string]FieldRule{
	reflect.TypeOf(metav1.ObjectMeta{}): {
		"name":                       impl("required; DNS-1123 subdomain"),
		"namespace":                  impl("defaults to `default`"),
		"uid":                        impl("if absent, derived from node, source, namespace and name"),
		"labels":                     impl("kept in /pods; keys and values validated as by the API server (qualified names, values of at most 63 bytes)"),
		"annotations":                impl("kept in /pods; keys are qualified names, keys and values at most 256 KiB in all, as by the API server"),
		"generateName":               ignore("the name is what counts: a pod without one is refused"),
		"selfLink":                   ignore("set by an API server"),
		"resourceVersion":            ignore("set by an API server"),
		"generation":                 ignore("set by an API server"),
		"creationTimestamp":          ignore("set by an API server"),
		"deletionTimestamp":          ignore("set by an API server"),
		"deletionGracePeriodSeconds": ignore("set by an API server"),
		"ownerReferences":            ignore(noAPIServer),
		"finalizers":                 ignore(noAPIServer),
		"managedFields":              ignore("set by an API server"),
	},
	reflect.TypeOf(v1.PodSpec{}): {
		"volumes":                       impl("see the Volume table"),
		"containers":                    impl("at least one"),
		"restartPolicy":                 impl("Always (default), OnFailure, Never"),
		"terminationGracePeriodSeconds": impl("default 30, at least 2 s when stopping"),
		"hostNetwork":                   impl("hostPort must equal containerPort"),
		"dnsPolicy":                     impl("Default uses --resolv-conf; ClusterFirst and ClusterFirstWithHostNet behave as Default (no cluster DNS); None uses only dnsConfig"),
		"nodeName":                      ignore("set to this node"),
		"nodeSelector":                  ignore(scheduling),
		"affinity":                      ignore(scheduling),
		"tolerations":                   ignore(scheduling + "; only a node.kubernetes.io/memory-pressure toleration counts: it admits a BestEffort pod under MemoryPressure, as the kubelet"),
		"schedulerName":                 ignore(scheduling),
		"priorityClassName":             impl("system-node-critical, system-cluster-critical: never evicted, never refused under pressure, preempt other pods at admission when the node has no room (and, for node-critical, the kubelet's OOM score); without spec.priority, their priorities rank the pod in the graceful node shutdown; other names are not resolved"),
		"priority":                      impl("ranks pods for eviction (lower first) and for the graceful node shutdown (lower rows first), as the kubelet; a higher priority preempts a lower one at admission when the node has no room; 2000000000 and more: never evicted, never refused under pressure, preempts any pod that is not critical. Not resolved from priorityClassName (no API server)"),
		"preemptionPolicy":              ignore(scheduling),
		"topologySpreadConstraints":     ignore(scheduling),
		"schedulingGates":               reject("the pod is not to run yet (a scheduler would hold it); remove the gates to run it here"),
		"schedulingGroup":               ignore(scheduling),
		"overhead":                      impl("added to the pod cgroup's requests and to each of its limits that is set, and to the pod's requests at admission, as the kubelet does (set by the API server's RuntimeClass admission)"),
		"os":                            impl("linux; any other name rejects the pod (PodOSNotSupported), as a nodeSelector kubernetes.io/os other than linux does (PodOSSelectorNodeLabelDoesNotMatch)"),
		"serviceAccountName":            impl("whose tokens serviceAccountToken projections request (default: default)"),
		"serviceAccount":                ignore("deprecated alias of serviceAccountName, which the API server sets"),
		"automountServiceAccountToken":  ignore("the API server's ServiceAccount admission acts on it (it adds no token volume when false)"),
		"enableServiceLinks":            impl("node mode: the Services of the pod's namespace become {NAME}_SERVICE_HOST/_PORT and Docker link variables (false: only the master service `kubernetes`'s), as the kubelet; standalone there are none"),
		"initContainers":                impl("run in order, each to success, before the app containers; not re-run after an agent restart. Their events point at spec.initContainers{name}; a Job's pod whose sidecars still run once its app containers have exited stays Running (app containers terminated) until they have stopped, then Succeeded or Failed"),
		"ephemeralContainers":           impl("node mode (added by the API server's ephemeralcontainers subresource, as kubectl debug does; a manifest's are refused): each starts once in the running sandbox, in the pod's network and IPC namespaces (and targetContainerName's PID namespace), is never restarted, and shows in ephemeralContainerStatuses; exec, attach and logs reach it by name. Ports, probes, lifecycle, resources and restart policies are refused, as by the API server"),
		"activeDeadlineSeconds":         impl("counted from the pod's start; then its containers are stopped and it is Failed, reason DeadlineExceeded, as the kubelet"),
		"hostPID":                       impl("containers share the host's PID namespace"),
		"hostIPC":                       impl("containers share the host's IPC namespace"),
		"shareProcessNamespace":         impl("every container joins the infra container's PID namespace; the pause program is PID 1 and reaps orphans"),
		"securityContext":               impl("runAsUser, runAsGroup, runAsNonRoot, supplementalGroups; a container's own settings win"),
		"imagePullSecrets":              impl("node mode: the secrets (`kubernetes.io/dockerconfigjson`, `kubernetes.io/dockercfg`) are read from the API server in the pod's namespace and their credentials for the image's registry tried first, then the node's (--docker-config); one that cannot be read is a FailedToRetrieveImagePullSecret warning (event and log, once per pod) and the pull goes on with the others. Standalone there is no API server: as the standalone kubelet, the same warning and images pulled with the node's credentials"),
		"hostname":                      impl("the pod's hostname, a DNS-1123 label (default: the pod name, cut to 63 characters)"),
		"subdomain":                     impl("domain <subdomain>.<namespace>.svc.<cluster-domain>"),
		"hostAliases":                   impl("IPs and DNS-1123 subdomain hostnames, appended to the pod's /etc/hosts (as the kubelet: a file per pod, bind-mounted into each container that does not mount /etc/hosts itself; under hostNetwork the node's /etc/hosts plus these)"),
		"dnsConfig":                     impl("nameservers (at most 3 IPs), searches (domain names or \".\", at most 32), options (no whitespace or control characters: stricter than the API server, as Docker writes them into resolv.conf), added to (or, with dnsPolicy None, instead of) the node's"),
		"readinessGates":                impl("Ready waits for each gate's condition to be True in the API server's status (node mode; a static pod's gates are never set, so it never becomes Ready)"),
		"runtimeClassName":              impl("node mode: the RuntimeClass (node.k8s.io/v1) is read from the API server and its handler must be one of Docker's runtimes (`docker info`), given to every container of the pod as its runtime; standalone: the name is the Docker runtime itself. An absent RuntimeClass or an unknown handler fails the sandbox (FailedCreatePodSandBox, the kubelet's message) and backs off"),
		"setHostnameAsFQDN":             impl("with a subdomain, the hostname is the FQDN (at most 64 characters, else CreateContainerConfigError), as the kubelet"),
		"hostUsers":                     reject("user namespaces are not supported"),
		"resourceClaims":                reject("dynamic resource allocation needs an API server"),
		"resources":                     impl("pod-level cpu and memory: the pod cgroup's bounds (needs --cgroups-per-qos)"),
		"hostnameOverride":              impl("the pod's hostname exactly (not with hostNetwork or setHostnameAsFQDN: refused); no domain"),
		"evictionResponders":            reject("not supported"),
	},
	reflect.TypeOf(v1.Container{}): {
		"name":                     impl("DNS-1123 label, unique in the pod"),
		"image":                    impl("required; a reference that does not parse waits with InvalidImageName (the kubelet's message) and is never pulled. The status's imageID is docker-pullable://<repo>@sha256:... for an image with a repo digest, else docker://sha256:..., as the kubelet with cri-dockerd"),
		"command":                  impl("Docker Entrypoint"),
		"args":                     impl("Docker Cmd"),
		"workingDir":               impl(""),
		"ports":                    impl("only ports with a hostPort are published, on the infra container"),
		"env":                      impl("value (with $(VAR) expansion) and valueFrom fieldRef/resourceFieldRef/fileKeyRef (and, node mode, configMapKeyRef/secretKeyRef)"),
		"resources":                impl("cpu and memory (their requests admitted against the node's allocatable: OutOfcpu, OutOfmemory); ephemeral-storage: requests rank pods under disk pressure, a container whose writable layer and logs pass its limit, or a pod whose containers and disk emptyDirs pass the sum of its containers' limits, is evicted (docs/operations.md, Eviction); others rejected. A change of cpu or memory resizes the running container in place (see resizePolicy)"),
		"volumeMounts":             impl("name, mountPath, readOnly, subPath, mountPropagation; listed in the container's status (volumeMounts, a read-only one recursiveReadOnly: Disabled), as the kubelet"),
		"imagePullPolicy":          impl("Always, IfNotPresent, Never"),
		"terminationMessagePath":   impl("default /dev/termination-log; read into the terminated state's message (4 KiB)"),
		"terminationMessagePolicy": impl("File (default) or FallbackToLogsOnError"),
		"resizePolicy":             impl("cpu and memory, NotRequired (default) or RestartContainer: a change of a running container's resources (an edited manifest; node mode: the resize subresource) resizes it in place (docker update, the pod cgroup with it), or, for a resource whose policy is RestartContainer, restarts it with them. A resize the node cannot hold stays pending (PodResizePending); one that would change the pod's QoS class, or a container's extended resources (its devices), is refused"),
		"envFrom":                  impl("node mode: configMapRef and secretRef with prefix (printable ASCII without '=', as env names) and optional; keys that are not variable names are left out; env wins a name"),
		"restartPolicy":            impl("init containers: Always makes a sidecar (started in order, kept running, stopped after the app containers); app containers: Always, OnFailure or Never instead of the pod's (ContainerRestartRules)"),
		"restartPolicyRules":       impl("app containers (ContainerRestartRules, on by default since 1.35): the first rule whose exit codes match (In/NotIn) restarts the container; without a match its restartPolicy decides"),
		"volumeDevices":            reject("block volumes are not supported"),
		"livenessProbe":            impl("httpGet, tcpSocket, exec, grpc; a failure kills the container"),
		"readinessProbe":           impl("httpGet, tcpSocket, exec, grpc; sets ready"),
		"startupProbe":             impl("httpGet, tcpSocket, exec, grpc; gates liveness and readiness"),
		"lifecycle":                impl("postStart and preStop with exec, httpGet or sleep"),
		"securityContext":          impl("runAsUser, runAsGroup, runAsNonRoot, privileged (unless --allow-privileged=false), capabilities, readOnlyRootFilesystem, allowPrivilegeEscalation"),
		"stdin":                    impl("Docker OpenStdin"),
		"stdinOnce":                impl("Docker StdinOnce"),
		"tty":                      impl("Docker Tty"),
	},
	reflect.TypeOf(v1.Volume{}): {
		"name":                  impl("DNS-1123 label, unique in the pod"),
		"hostPath":              impl("every type, checked at setup as the kubelet does (a mismatch is FailedMount, retried); a path with : is refused"),
		"emptyDir":              impl("a directory under <root-dir>/pods/<uid>/volumes, removed with the pod, its use counted as du counts it in /stats/summary; medium Memory is a tmpfs (see sizeLimit)"),
		"gcePersistentDisk":     reject("not supported"),
		"awsElasticBlockStore":  reject("not supported"),
		"gitRepo":               reject("not supported"),
		"secret":                impl("node mode: the secret's keys (items, defaultMode, optional), read through a one-minute cache and written atomically (..data swap), mounted read-only; standalone: FailedMount. Items' paths and modes, and defaultMode, are checked as downwardAPI's"),
		"nfs":                   reject("not supported"),
		"iscsi":                 reject("not supported"),
		"glusterfs":             reject("not supported"),
		"persistentVolumeClaim": impl("node mode: the claim (claimName, readOnly) is read from the API server and, once Bound, its PersistentVolume: hostPath (its type checked as a hostPath volume's), local (its node affinity checked against this Node's labels; the pod's fsGroup applied) and csi volumes (staged and published by the registered driver as the kubelet does, after its VolumeAttachment is attached when the driver needs attaching) are mounted; until then the pod waits (FailedMount, the kubelet's messages: PVC is not bound, ...), retried on back-off. Other volume types, volumeMode Block, and a ReadWriteOncePod claim another pod of this node uses are refused the same way; standalone: FailedMount (no API server)"),
		"rbd":                   reject("not supported"),
		"flexVolume":            reject("not supported"),
		"cinder":                reject("not supported"),
		"cephfs":                reject("not supported"),
		"flocker":               reject("not supported"),
		"downwardAPI":           impl("files of labels, annotations, name, namespace, uid and resources, mounted read-only"),
		"fc":                    reject("not supported"),
		"azureFile":             reject("not supported"),
		"configMap":             impl("node mode: as secret (binaryData too); an edit reaches a running pod within about a minute"),
		"vsphereVolume":         reject("not supported"),
		"quobyte":               reject("not supported"),
		"azureDisk":             reject("not supported"),
		"photonPersistentDisk":  reject("not supported"),
		"projected":             impl("configMap, secret, downwardAPI and serviceAccountToken sources (a TokenRequest bound to the pod, renewed at 80 % of its life or after 24 h), written atomically, mounted read-only; clusterTrustBundle sources (node mode: the named bundle's certificates, or those of the signer's bundles the labelSelector matches, deduplicated, in an order that changes only when the agent restarts, as the kubelet; optional: an empty file when none; the bundles listed through the one-minute object cache); podCertificate sources (node mode: a new key of keyType and its PodCertificateRequest to signerName, naming the pod, its service account and the node, with maxExpirationSeconds and userAnnotations; the pod waits (FailedMount) until the signer issues it, a denial or failure is final; the key and chain are written as credentialBundlePath, keyPath, certificateChainPath (0600 with an fsGroup); from the certificate's beginRefreshAt, plus up to 5 minutes, a new key is requested while the issued one serves, as the kubelet; user fields are refused). Paths and modes are checked as downwardAPI's (the token's path too), and two items writing one path are refused, as by the API server"),
		"portworxVolume":        reject("not supported"),
		"scaleIO":               reject("not supported"),
		"storageos":             reject("not supported"),
		"csi":                   impl("node mode: an inline (ephemeral) volume of a registered CSI node plugin whose CSIDriver allows the Ephemeral mode, published by the driver (NodePublishVolume) under <root-dir>/pods/<uid>/volumes/kubernetes.io~csi/<volume>/mount and unpublished with the pod; until the driver is registered the pod waits (FailedMount, the kubelet's message), retried on back-off; standalone: FailedMount (no API server)"),
		"ephemeral":             impl("node mode: the claim <pod>-<volume> that the control plane's ephemeral volume controller makes from volumeClaimTemplate, once it is the pod's (its controller) and Bound, as persistentVolumeClaim; standalone: FailedMount (no API server)"),
		"image":                 reject("not supported"),
	},
	reflect.TypeOf(v1.VolumeMount{}): {
		"name":              impl("must name a volume of the pod"),
		"mountPath":         impl("absolute, unique in the container"),
		"readOnly":          impl(""),
		"subPath":           impl("a path inside the volume, resolved beneath its root by the kernel (openat2 RESOLVE_BENEATH): links that stay inside are followed (a configMap or secret key's link into ..data), one that leads out is refused (CreateContainerConfigError: not within volume path), as by the kubelet; a missing path is made, refusing links; '..' and absolute paths are refused"),
		"subPathExpr":       impl("subPath with $(VAR) expanded from the container's env"),
		"mountPropagation":  impl("None (default; Docker's rprivate), HostToContainer (rslave: mounts made on the host under the path appear in the container) or Bidirectional (rshared: the container's mounts appear on the host too; privileged containers only, as by the API server). The path must be on a shared mount (or, HostToContainer, a slave one), else CreateContainerError names the path and its mount, as the runtime's check; the agent makes its root dir a shared mount at start, as the kubelet, so pod volumes qualify"),
		"recursiveReadOnly": impl("Disabled; IfPossible is a plain read-only mount and Enabled waits with CreateContainerConfigError (the kubelet's message): Docker 20.10's binds cannot be made recursively read-only, as the node's runtimeHandlers features say. Needs readOnly and no mountPropagation, as by the API server"),
		"bindMountOptions":  reject("not supported"),
	},
	reflect.TypeOf(v1.EnvVar{}): {
		"name":      impl("printable ASCII without '=', as the API server (a line break, a tab or a non-ASCII letter is refused)"),
		"value":     impl(""),
		"valueFrom": impl("fieldRef, resourceFieldRef and fileKeyRef; configMapKeyRef and secretKeyRef in node mode"),
	},
	reflect.TypeOf(v1.ContainerPort{}): {
		"name":          impl(""),
		"containerPort": impl("1-65535"),
		"hostPort":      impl("published on the infra container; unique on the node"),
		"protocol":      impl("TCP (default) or UDP"),
		"hostIP":        impl("default all addresses"),
	},
	reflect.TypeOf(v1.Probe{}): {
		"exec":                          impl("run in the container; exit 0 is success; killed at its timeout"),
		"httpGet":                       impl("to the pod IP unless host is set; 200-399 is success; HTTPS not verified"),
		"tcpSocket":                     impl("connect to the pod IP unless host is set"),
		"grpc":                          impl("grpc.health.v1 Check; SERVING is success; a failure's output (the Unhealthy event) is the kubelet's"),
		"initialDelaySeconds":           impl("default 0"),
		"timeoutSeconds":                impl("default 1"),
		"periodSeconds":                 impl("default 10"),
		"successThreshold":              impl("default 1; must be 1 for liveness and startup"),
		"failureThreshold":              impl("default 3"),
		"terminationGracePeriodSeconds": impl("liveness and startup: the grace period of the kill the probe's failure causes, over the pod's (at least 2 s)"),
	},
	reflect.TypeOf(v1.Lifecycle{}): {
		"postStart":  impl("exec, httpGet or sleep; a failure kills the container (FailedPostStartHook event without the hook's output, as the kubelet); it then waits with PostStartHookError and the kubelet's message, which holds the hook's output"),
		"preStop":    impl("exec, httpGet or sleep, within the grace period"),
		"stopSignal": reject("the image's stop signal is used"),
	},
	reflect.TypeOf(v1.LifecycleHandler{}): {
		"exec":      impl(""),
		"httpGet":   impl(""),
		"sleep":     impl(""),
		"tcpSocket": reject("deprecated and never run by Kubernetes"),
	},
	reflect.TypeOf(v1.PodSecurityContext{}): {
		"runAsUser":                impl(""),
		"runAsGroup":               impl(""),
		"runAsNonRoot":             impl("a container that would run as UID 0 is refused (CreateContainerConfigError)"),
		"supplementalGroups":       impl("Docker GroupAdd"),
		"supplementalGroupsPolicy": impl("Merge (the image's /etc/group groups are added, as Docker always does); Strict cannot be honoured by Docker and rejects the pod (SupplementalGroupsPolicyNotSupported)"),
		"fsGroup":                  impl("at volume setup, emptyDir and downwardAPI volumes are the group's (setgid directories, files g+rw; never through a link); every container is in the group; hostPath untouched"),
		"fsGroupChangePolicy":      impl("accepted; no effect on emptyDir and downwardAPI volumes, as upstream"),
		"sysctls":                  impl("the kubelet's safe sysctls and --allowed-unsafe-sysctls, set in the pod's network and IPC namespaces (the infra container's); any other, or a net.* one under hostNetwork (ipc under hostIPC), rejects the pod (SysctlForbidden)"),
		"seLinuxOptions":           impl("Docker's label options, for the infra container and every container without its own; Docker ignores them where SELinux is off"),
		"seLinuxChangePolicy":      impl("accepted; volumes are not relabelled"),
		"seccompProfile":           impl("of every container without its own: RuntimeDefault (Docker's default profile), Unconfined, Localhost (the JSON content of <root-dir>/seccomp/<localhostProfile>)"),
		"appArmorProfile":          impl("of every container without its own; where the host has no AppArmor, any but Unconfined rejects the pod (reason AppArmor)"),
		"windowsOptions":           ignore("Windows only: ignored on Linux, as the kubelet does"),
	},
	reflect.TypeOf(v1.AppArmorProfile{}): {
		"type":             impl("RuntimeDefault, Unconfined, Localhost"),
		"localhostProfile": impl("Localhost only: the name of a profile loaded on the host"),
	},
	reflect.TypeOf(v1.SeccompProfile{}): {
		"type":             impl("RuntimeDefault, Unconfined, Localhost"),
		"localhostProfile": impl("Localhost only: a path relative to <root-dir>/seccomp, without '..'"),
	},
	reflect.TypeOf(v1.SecurityContext{}): {
		"runAsUser":                impl("wins over the pod's"),
		"runAsGroup":               impl("wins over the pod's"),
		"runAsNonRoot":             impl("wins over the pod's"),
		"capabilities":             impl("add and drop"),
		"privileged":               impl("refused (CreateContainerConfigError) when the agent runs with --allow-privileged=false"),
		"readOnlyRootFilesystem":   impl(""),
		"allowPrivilegeEscalation": impl("false sets no-new-privileges"),
		"procMount":                impl("Default; Unmasked needs hostUsers: false (a user namespace, not supported), so it is refused as by the API server"),
		"seLinuxOptions":           impl("replaces the pod's whole; Docker's label options (user, role, type, level)"),
		"seccompProfile":           impl("wins over the pod's; without either, --seccomp-default (true: Docker's default profile; false: unconfined)"),
		"appArmorProfile":          impl("wins over the container's annotation and the pod's: RuntimeDefault (docker-default), Unconfined, Localhost (a loaded profile)"),
		"windowsOptions":           ignore("Windows only: ignored on Linux, as the kubelet does"),
	},
	reflect.TypeOf(v1.EnvVarSource{}): {
		"fieldRef":         impl("metadata.name, metadata.namespace, metadata.uid, metadata.labels['k'], metadata.annotations['k'], spec.nodeName, spec.serviceAccountName, status.podIP(s), status.hostIP(s)"),
		"resourceFieldRef": impl("requests/limits of cpu, memory and ephemeral-storage, with divisor; an unset limit is the node's allocatable"),
		"configMapKeyRef":  impl("node mode; optional honoured; a missing key is CreateContainerConfigError"),
		"secretKeyRef":     impl("node mode; as configMapKeyRef"),
		"fileKeyRef":       impl("the value of key in the env file at path in an emptyDir volume (written by an init container), as the kubelet (EnvFiles, on since 1.35): KEY='value' lines (single-quoted, multi-line allowed, # comments); optional honoured; a missing key, an empty value or an unreadable file is CreateContainerConfigError. The file is read without following any symlink"),
	},
	reflect.TypeOf(v1.DownwardAPIVolumeSource{}): {
		"items":       impl(""),
		"defaultMode": impl("default 0644; 0 to 0777 as by the API server (setuid, setgid and sticky bits are refused: 04755 was silently 0755)"),
		"defaultUser": reject("not supported"),
	},
	reflect.TypeOf(v1.DownwardAPIVolumeFile{}): {
		"path":             impl("relative, without '..', and its first element not starting with '..' (the atomic writer's ..data and ..<timestamp> names), as by the API server"),
		"fieldRef":         impl("metadata.name, metadata.namespace, metadata.uid, metadata.labels, metadata.annotations (and one key of them)"),
		"resourceFieldRef": impl("requests/limits of cpu and memory, with divisor"),
		"mode":             impl("0 to 0777, as defaultMode"),
		"user":             reject("not supported"),
	},
	reflect.TypeOf(v1.EmptyDirVolumeSource{}): {
		"medium":    impl("\"\" (disk, mode 0777) or Memory (tmpfs, mode 1777 as tmpfs makes it); a missing subPath is made with the root's mode"),
		"sizeLimit": impl("negative is refused and 0 is no limit, as by the API server; bounds the tmpfs of a Memory emptyDir: the smallest of it, the pod's memory limit and the node's memory, as the kubelet (a sizeLimit past the node's memory, 8Ei or 1e30 say, is the node's memory); on disk, a pod whose emptyDir passes it is evicted and the volume removed (compared as quantities: one past what the disk or an int64 holds is never reached)"),
		"mode":      reject("not supported"),
	},
	reflect.TypeOf(v1.PersistentVolumeClaimVolumeSource{}): {
		"claimName": impl("required; a claim of the pod's namespace"),
		"readOnly":  impl("every mount of the volume is read-only"),
	},
	reflect.TypeOf(v1.CSIVolumeSource{}): {
		"driver":               impl("required; a driver registered through <root-dir>/plugins_registry"),
		"readOnly":             impl("published read-only, every mount read-only"),
		"fsType":               impl("passed to the driver"),
		"volumeAttributes":     impl("passed to the driver (with the pod's name, namespace, uid and service account when its CSIDriver has podInfoOnMount)"),
		"nodePublishSecretRef": impl("a secret of the pod's namespace, passed to the driver"),
	},
	reflect.TypeOf(v1.HostPathVolumeSource{}): {
		"path": impl("absolute"),
		"type": impl("\"\" (no check), Directory, DirectoryOrCreate, File, FileOrCreate (the *OrCreate types make a missing directory 0755 or empty file 0644), Socket, CharDevice, BlockDevice; links followed"),
	},
	reflect.TypeOf(v1.ResourceRequirements{}): {
		"requests": impl("cpu → CPU shares; a pod whose cpu or memory requests (a limit standing for a request not written) pass the node's allocatable is rejected, OutOfcpu or OutOfmemory, as by the kubelet's admission"),
		"limits":   impl("cpu → CFS quota, memory → memory limit"),
		"claims":   reject("dynamic resource allocation needs an API server"),
	},
}

// jsonFields returns the JSON names of t's fields in declaration order,
// flattening inlined structs (v1.Volume inlines VolumeSource).
func jsonFields(t reflect.Type) []reflect.StructField {
	var out []reflect.StructField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("json"), ",")[0]
		if name == "" && f.Anonymous {
			for _, g := range jsonFields(f.Type) {
				g.Index = append([]int{i}, g.Index...)
				out = append(out, g)
			}
			continue
		}
		if name == "" || name == "-" {
			continue
		}
		f.Name = name
		out = append(out, f)
	}
	return out
}

// isSet reports whether a field was written: a pointer to an empty struct
// (`securityContext: {}`) counts as not written; a pointer to a zero scalar
// (`runAsUser: 0`) does.
func isSet(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return false
		}
		return v.Elem().Kind() != reflect.Struct || !v.Elem().IsZero()
	case reflect.Slice, reflect.Map:
		return v.Len() > 0
	default:
		return !v.IsZero()
	}
}

// checkFields applies t's field table to the written fields of v (a value of
// type t): rejected fields become errors at path, ignored ones are appended to
// ignored. It does not descend; callers check nested structs they accept.
func checkFields(v reflect.Value, path *field.Path, ignored *[]string) field.ErrorList {
	table := FieldTables[v.Type()]
	var errs field.ErrorList
	for _, f := range jsonFields(v.Type()) {
		if !isSet(v.FieldByIndex(f.Index)) {
			continue
		}
		rule, ok := table[f.Name]
		if !ok {
			rule = reject("unknown to this agent")
		}
		switch rule.Support {
		case Ignored:
			*ignored = append(*ignored, path.Child(f.Name).String())
		case Rejected:
			msg := "not supported by this agent"
			if rule.Note != "" && rule.Note != "not supported" {
				msg += ": " + rule.Note // the note says why, never "not supported" twice
			}
			errs = append(errs, field.Forbidden(path.Child(f.Name), msg))
		}
	}
	return errs
}

// FieldTableMarkdown renders the field tables as the markdown the docs embed;
// a test keeps docs/pod-fields.md equal to it.
func FieldTableMarkdown() string {
	var b strings.Builder
	order := []reflect.Type{
		reflect.TypeOf(metav1.ObjectMeta{}), reflect.TypeOf(v1.PodSpec{}), reflect.TypeOf(v1.Container{}),
		reflect.TypeOf(v1.ContainerPort{}), reflect.TypeOf(v1.EnvVar{}), reflect.TypeOf(v1.ResourceRequirements{}),
		reflect.TypeOf(v1.VolumeMount{}), reflect.TypeOf(v1.Volume{}), reflect.TypeOf(v1.HostPathVolumeSource{}),
		reflect.TypeOf(v1.EmptyDirVolumeSource{}), reflect.TypeOf(v1.PersistentVolumeClaimVolumeSource{}), reflect.TypeOf(v1.CSIVolumeSource{}), reflect.TypeOf(v1.Probe{}), reflect.TypeOf(v1.Lifecycle{}),
		reflect.TypeOf(v1.LifecycleHandler{}), reflect.TypeOf(v1.PodSecurityContext{}), reflect.TypeOf(v1.SecurityContext{}),
		reflect.TypeOf(v1.EnvVarSource{}), reflect.TypeOf(v1.DownwardAPIVolumeSource{}), reflect.TypeOf(v1.DownwardAPIVolumeFile{}),
	}
	for _, t := range order {
		fmt.Fprintf(&b, "\n### %s\n\n| field | support | note |\n|---|---|---|\n", t.Name())
		names := make([]string, 0)
		for _, f := range jsonFields(t) {
			names = append(names, f.Name)
		}
		sort.Strings(names)
		for _, n := range names {
			rule, ok := FieldTables[t][n]
			if !ok {
				rule = reject("unknown to this agent")
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", n, rule.Support, rule.Note)
		}
	}
	return b.String()
}
