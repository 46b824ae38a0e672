package api

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// validPod is the base every validation case mutates.
const validPod = `
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: ns}
spec:
  volumes:
  - {name: data, hostPath: {path: /srv}}
  - {name: tmp, emptyDir: {}}
  containers:
  - name: server
    image: srv:1
    ports: [{containerPort: 80, hostPort: 8080}]
    env: [{name: A, value: b}]
    volumeMounts: [{name: data, mountPath: /data}, {name: tmp, mountPath: /tmp}]
    resources: {requests: {cpu: 100m}, limits: {cpu: 200m, memory: 64Mi}}
`

func podFrom(t *testing.T, mutate func(p *v1.Pod)) *v1.Pod {
	t.Helper()
	p := &v1.Pod{}
	if err := yaml.UnmarshalStrict([]byte(validPod), p); err != nil {
		t.Fatal(err)
	}
	SetDefaults(p, "node", "file")
	if mutate != nil {
		mutate(p)
	}
	return p
}

func TestValidate(t *testing.T) {
	c0 := func(p *v1.Pod) *v1.Container { return &p.Spec.Containers[0] }
	str := func(s string) *string { return &s }
	cases := []struct {
		name   string
		mutate func(p *v1.Pod)
		want   string // substring of the errors; "" means valid
	}{
		{"valid", nil, ""},
		{"empty securityContext is not written", func(p *v1.Pod) { p.Spec.SecurityContext = &v1.PodSecurityContext{} }, ""},
		{"ignored scheduling field", func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"a": "b"} }, ""},
		{"missing name", func(p *v1.Pod) { p.Name = "" }, "metadata.name: Required"},
		{"bad name", func(p *v1.Pod) { p.Name = "Web_1" }, "metadata.name: Invalid"},
		{"bad namespace", func(p *v1.Pod) { p.Namespace = "a.b" }, "metadata.namespace: Invalid"},
		{"uid with underscore", func(p *v1.Pod) { p.UID = "a_b" }, "metadata.uid: Invalid"},
		{"generateName beside a name (an API server's pod)", func(p *v1.Pod) { p.GenerateName = "web-" }, ""},
		{"generateName alone", func(p *v1.Pod) { p.GenerateName, p.Name = "web-", "" }, "metadata.name: Required"},
		{"labels and annotations as the API server takes them", func(p *v1.Pod) {
			p.Labels = map[string]string{"app": "web", "example.com/tier": "front-end_1.2", "empty": ""}
			p.Annotations = map[string]string{"example.com/Note": "any\nvalue at all", "a": strings.Repeat("x", 200<<10)}
		}, ""},
		{"label key with a newline", func(p *v1.Pod) { p.Labels = map[string]string{"a\nb": "c"} }, `metadata.labels: Invalid value: "a\nb"`},
		{"label key with two slashes", func(p *v1.Pod) { p.Labels = map[string]string{"a/b/c": "d"} }, `metadata.labels: Invalid value: "a/b/c"`},
		{"label value with a newline", func(p *v1.Pod) { p.Labels = map[string]string{"a": "b\nc"} }, `metadata.labels: Invalid value: "b\nc"`},
		{"label value too long", func(p *v1.Pod) { p.Labels = map[string]string{"a": strings.Repeat("b", 64)} }, "must be no more than 63 bytes"},
		{"annotation key with a space", func(p *v1.Pod) { p.Annotations = map[string]string{"a b": "c"} }, `metadata.annotations: Invalid value: "a b"`},
		{"annotations over 256 KiB", func(p *v1.Pod) {
			p.Annotations = map[string]string{"a": strings.Repeat("x", 128<<10), "b": strings.Repeat("x", 128<<10)}
		}, "metadata.annotations: Too long: may not be more than 262144 bytes"},
		{"annotations of exactly 256 KiB", func(p *v1.Pod) {
			p.Annotations = map[string]string{"a": strings.Repeat("x", 128<<10-1), "b": strings.Repeat("x", 128<<10-1)}
		}, ""},
		{"no containers", func(p *v1.Pod) { p.Spec.Containers = nil }, "spec.containers: Required"},
		{"duplicate container", func(p *v1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, *c0(p))
			p.Spec.Containers[1].Ports = nil
		}, "spec.containers[1].name: Duplicate"},
		{"bad container name", func(p *v1.Pod) { c0(p).Name = "Server" }, "spec.containers[0].name: Invalid"},
		{"pod-level resources", func(p *v1.Pod) {
			p.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("128Mi")}}
			c0(p).Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}
		}, ""},
		{"pod-level limit below a container's", func(p *v1.Pod) {
			p.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}}
			c0(p).Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("128Mi")}
		}, "spec.resources.limits[memory]: Invalid value: \"64Mi\": must be at least container"},
		{"pod-level request below the containers'", func(p *v1.Pod) {
			p.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}}
			c0(p).Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("150m")}
		}, "spec.resources.requests[cpu]: Invalid value: \"100m\": must be at least the sum"},
		{"pod-level hugepages", func(p *v1.Pod) {
			p.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{"hugepages-2Mi": resource.MustParse("2Mi")}}
		}, "spec.resources.limits[hugepages-2Mi]: Unsupported"},
		{"no image", func(p *v1.Pod) { c0(p).Image = "" }, "spec.containers[0].image: Invalid"},
		{"port zero", func(p *v1.Pod) { c0(p).Ports[0].ContainerPort = 0 }, "ports[0].containerPort: Invalid"},
		{"port too big", func(p *v1.Pod) { c0(p).Ports[0].ContainerPort = 65536 }, "ports[0].containerPort: Invalid"},
		{"host port too big", func(p *v1.Pod) { c0(p).Ports[0].HostPort = 70000 }, "ports[0].hostPort: Invalid"},
		{"sctp", func(p *v1.Pod) { c0(p).Ports[0].Protocol = v1.ProtocolSCTP }, "ports[0].protocol: Unsupported"},
		{"bad host IP", func(p *v1.Pod) { c0(p).Ports[0].HostIP = "localhost" }, "ports[0].hostIP: Invalid"},
		{"hostNetwork port mismatch", func(p *v1.Pod) { p.Spec.HostNetwork = true }, "must equal containerPort"},
		{"same host port twice in pod", func(p *v1.Pod) {
			c0(p).Ports = append(c0(p).Ports, v1.ContainerPort{ContainerPort: 81, HostPort: 8080})
		}, "ports[1].hostPort: Duplicate"},
		{"undefined volume", func(p *v1.Pod) { c0(p).VolumeMounts[0].Name = "nope" }, "volumeMounts[0].name: Not found"},
		{"relative mount path", func(p *v1.Pod) { c0(p).VolumeMounts[0].MountPath = "data" }, "volumeMounts[0].mountPath: Invalid"},
		{"duplicate mount path", func(p *v1.Pod) { c0(p).VolumeMounts[1].MountPath = "/data/" }, "volumeMounts[1].mountPath: Duplicate"},
		{"subPath", func(p *v1.Pod) { c0(p).VolumeMounts[0].SubPath = "x/y" }, ""},
		{"subPath with ..", func(p *v1.Pod) { c0(p).VolumeMounts[0].SubPath = "x/../../etc" }, "volumeMounts[0].subPath: Invalid"},
		{"absolute subPath", func(p *v1.Pod) { c0(p).VolumeMounts[0].SubPath = "/etc" }, "volumeMounts[0].subPath: Invalid"},
		{"subPath and subPathExpr", func(p *v1.Pod) { c0(p).VolumeMounts[0].SubPath = "a"; c0(p).VolumeMounts[0].SubPathExpr = "$(X)" }, "subPathExpr: Invalid"},
		{"duplicate volume", func(p *v1.Pod) { p.Spec.Volumes[1].Name = "data" }, "spec.volumes[1].name: Duplicate"},
		{"volume without source", func(p *v1.Pod) { p.Spec.Volumes[1].EmptyDir = nil }, "spec.volumes[1]: Required"},
		{"secret volume", func(p *v1.Pod) {
			p.Spec.Volumes[1] = v1.Volume{Name: "tmp", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}}
		}, ""},
		{"config map item escaping", func(p *v1.Pod) {
			p.Spec.Volumes[1] = v1.Volume{Name: "tmp", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{
				LocalObjectReference: v1.LocalObjectReference{Name: "c"}, Items: []v1.KeyToPath{{Key: "k", Path: "../x"}}}}}
		}, "spec.volumes[1].configMap.items[0].path: Invalid value"},
		{"projected token too short", func(p *v1.Pod) {
			short := int64(60)
			p.Spec.Volumes[1] = v1.Volume{Name: "tmp", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &short}}}}}}
		}, "serviceAccountToken.expirationSeconds: Invalid value"},
		{"memory emptyDir", func(p *v1.Pod) { p.Spec.Volumes[1].EmptyDir.Medium = v1.StorageMediumMemory }, ""},
		{"huge pages emptyDir", func(p *v1.Pod) { p.Spec.Volumes[1].EmptyDir.Medium = v1.StorageMediumHugePages }, "emptyDir.medium: Unsupported"},
		{"downwardAPI volume", func(p *v1.Pod) {
			p.Spec.Volumes[1] = v1.Volume{Name: "tmp", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
				{Path: "labels", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
				{Path: "mem", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "server", Resource: "limits.memory"}}}}}}
		}, ""},
		{"downwardAPI path escape", func(p *v1.Pod) {
			p.Spec.Volumes[1] = v1.Volume{Name: "tmp", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: []v1.DownwardAPIVolumeFile{
				{Path: "../x", FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}}
		}, "downwardAPI.items[0].path: Invalid"},
		{"relative host path", func(p *v1.Pod) { p.Spec.Volumes[0].HostPath.Path = "srv" }, "hostPath.path: Invalid"},
		{"socket host path type", func(p *v1.Pod) { t := v1.HostPathSocket; p.Spec.Volumes[0].HostPath.Type = &t }, ""},
		{"char device host path type", func(p *v1.Pod) { t := v1.HostPathCharDev; p.Spec.Volumes[0].HostPath.Type = &t }, ""},
		{"block device host path type", func(p *v1.Pod) { t := v1.HostPathBlockDev; p.Spec.Volumes[0].HostPath.Type = &t }, ""},
		{"unknown host path type", func(p *v1.Pod) { t := v1.HostPathType("Fifo"); p.Spec.Volumes[0].HostPath.Type = &t },
			`hostPath.type: Unsupported value: "Fifo": supported values: "", "BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate", "File", "FileOrCreate", "Socket"`},
		{"env fieldRef", func(p *v1.Pod) {
			c0(p).Env[0].Value = ""
			c0(p).Env[0].ValueFrom = &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}
		}, ""},
		{"env fieldRef spec.serviceAccountName", func(p *v1.Pod) {
			c0(p).Env[0].Value = ""
			c0(p).Env[0].ValueFrom = &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.serviceAccountName"}}
		}, ""},
		{"env fieldRef unsupported", func(p *v1.Pod) {
			c0(p).Env[0].Value = ""
			c0(p).Env[0].ValueFrom = &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.schedulerName"}}
		}, "env[0].valueFrom.fieldRef.fieldPath: Unsupported"},
		{"env secret", func(p *v1.Pod) {
			c0(p).Env[0].Value = ""
			c0(p).Env[0].ValueFrom = &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{Key: "k"}}
		}, ""},
		{"env fileKeyRef", func(p *v1.Pod) {
			c0(p).Env[0].Value = ""
			c0(p).Env[0].ValueFrom = &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{VolumeName: "tmp", Path: "conf/app.env", Key: "DB_HOST"}}
		}, ""},
		{"env fileKeyRef of a hostPath volume", func(p *v1.Pod) {
			c0(p).Env[0].Value = ""
			c0(p).Env[0].ValueFrom = &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{VolumeName: "data", Path: "app.env", Key: "K"}}
		}, `env[0].valueFrom.fileKeyRef.volumeName: Invalid value: "data": referenced volume must be of type emptyDir`},
		{"env fileKeyRef of a missing volume", func(p *v1.Pod) {
			c0(p).Env[0].Value = ""
			c0(p).Env[0].ValueFrom = &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{VolumeName: "nope", Path: "app.env", Key: "K"}}
		}, `env[0].valueFrom.fileKeyRef.volumeName: Not found: "nope"`},
		{"env fileKeyRef path with ..", func(p *v1.Pod) {
			c0(p).Env[0].Value = ""
			c0(p).Env[0].ValueFrom = &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{VolumeName: "tmp", Path: "../x.env", Key: "K"}}
		}, "fileKeyRef.path: Invalid"},
		{"env fileKeyRef key with =", func(p *v1.Pod) {
			c0(p).Env[0].Value = ""
			c0(p).Env[0].ValueFrom = &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{VolumeName: "tmp", Path: "x.env", Key: "A=B"}}
		}, "fileKeyRef.key: Invalid"},
		{"env fileKeyRef without a key", func(p *v1.Pod) {
			c0(p).Env[0].Value = ""
			c0(p).Env[0].ValueFrom = &v1.EnvVarSource{FileKeyRef: &v1.FileKeySelector{VolumeName: "tmp", Path: "x.env"}}
		}, "fileKeyRef.key: Required"},
		{"env resource of another container", func(p *v1.Pod) {
			c0(p).Env[0].Value = ""
			c0(p).Env[0].ValueFrom = &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "other", Resource: "limits.cpu"}}
		}, "resourceFieldRef.containerName: Invalid"},
		{"env name with =", func(p *v1.Pod) { c0(p).Env[0].Name = "A=B" }, "env[0].name: Invalid"},
		{"exec probe", func(p *v1.Pod) {
			c0(p).LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
		}, ""},
		{"probe by port name", func(p *v1.Pod) {
			c0(p).Ports[0].Name = "http"
			c0(p).ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromString("http")}}, SuccessThreshold: 2}
		}, ""},
		{"probe with unknown port name", func(p *v1.Pod) {
			c0(p).ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromString("nope")}}}
		}, "readinessProbe.tcpSocket.port: Invalid"},
		{"probe without action", func(p *v1.Pod) { c0(p).LivenessProbe = &v1.Probe{PeriodSeconds: 1} }, "livenessProbe: Invalid"},
		{"liveness success threshold", func(p *v1.Pod) {
			c0(p).LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9090}}, SuccessThreshold: 2}
		}, "livenessProbe.successThreshold: Invalid"},
		{"probe grace period", func(p *v1.Pod) {
			g := int64(5)
			c0(p).LivenessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9090}}, TerminationGracePeriodSeconds: &g}
		}, ""},
		{"readiness probe grace period rejected", func(p *v1.Pod) {
			g := int64(5)
			c0(p).ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9090}}, TerminationGracePeriodSeconds: &g}
		}, "readinessProbe.terminationGracePeriodSeconds: Invalid value: 5: must not be set for readinessProbes"},
		{"preStop exec", func(p *v1.Pod) {
			c0(p).Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}
		}, ""},
		{"tcpSocket hook rejected", func(p *v1.Pod) {
			c0(p).Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(80)}}}
		}, "lifecycle.postStart.tcpSocket: Forbidden"},
		{"init container", func(p *v1.Pod) { p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "i:1"}} }, ""},
		{"init container name clash", func(p *v1.Pod) { p.Spec.InitContainers = []v1.Container{{Name: "server", Image: "i:1"}} }, "spec.containers[0].name: Duplicate"},
		{"init container probe", func(p *v1.Pod) {
			p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "i:1", LivenessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}}}}
		}, "spec.initContainers[0].livenessProbe: Forbidden"},
		{"sidecar with probes and a preStop hook", func(p *v1.Pod) {
			always := v1.ContainerRestartPolicyAlways
			exec := v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}
			p.Spec.InitContainers = []v1.Container{{Name: "log", Image: "i:1", RestartPolicy: &always,
				StartupProbe: &v1.Probe{ProbeHandler: exec}, ReadinessProbe: &v1.Probe{ProbeHandler: exec}, LivenessProbe: &v1.Probe{ProbeHandler: exec},
				Lifecycle: &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: exec.Exec}}}}
		}, ""},
		{"init container restartPolicy other than Always", func(p *v1.Pod) {
			never := v1.ContainerRestartPolicy("Never")
			p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "i:1", RestartPolicy: &never}}
		}, "spec.initContainers[0].restartPolicy: Unsupported value"},
		{"app container restartPolicy", func(p *v1.Pod) {
			always := v1.ContainerRestartPolicyAlways
			c0(p).RestartPolicy = &always
		}, ""},
		{"app container restartPolicy unknown", func(p *v1.Pod) {
			bad := v1.ContainerRestartPolicy("Sometimes")
			c0(p).RestartPolicy = &bad
		}, "spec.containers[0].restartPolicy: Unsupported value"},
		{"restart rule", func(p *v1.Pod) {
			c0(p).RestartPolicyRules = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart,
				ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
		}, ""},
		{"restart rule exit code out of range", func(p *v1.Pod) {
			c0(p).RestartPolicyRules = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart,
				ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpNotIn, Values: []int32{256}}}}
		}, "spec.containers[0].restartPolicyRules[0].exitCodes.values[0]: Invalid value"},
		{"security context", func(p *v1.Pod) { c0(p).SecurityContext = &v1.SecurityContext{RunAsUser: new(int64)} }, ""},
		{"seccomp RuntimeDefault (kubeadm's static pods)", func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}}
		}, ""},
		{"seccomp Localhost", func(p *v1.Pod) {
			lp := "profiles/audit.json"
			c0(p).SecurityContext = &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: &lp}}
		}, ""},
		{"seccomp Localhost without a profile", func(p *v1.Pod) {
			c0(p).SecurityContext = &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost}}
		}, "seccompProfile.localhostProfile: Required"},
		{"seccomp Localhost escaping", func(p *v1.Pod) {
			lp := "../../etc/x.json"
			c0(p).SecurityContext = &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: &lp}}
		}, "seccompProfile.localhostProfile: Invalid"},
		{"schedulingGates refused with the reason", func(p *v1.Pod) {
			p.Spec.SchedulingGates = []v1.PodSchedulingGate{{Name: "example.com/wait"}}
		}, "spec.schedulingGates: Forbidden: not supported by this agent: the pod is not to run yet"},
		{"shareProcessNamespace", func(p *v1.Pod) { share := true; p.Spec.ShareProcessNamespace = &share }, ""},
		{"shareProcessNamespace with hostPID", func(p *v1.Pod) {
			share := true
			p.Spec.ShareProcessNamespace, p.Spec.HostPID = &share, true
		}, "spec.shareProcessNamespace: Invalid"},
		{"seccomp unknown type", func(p *v1.Pod) {
			p.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: "Custom"}}
		}, "seccompProfile.type: Unsupported"},
		{"negative uid", func(p *v1.Pod) { u := int64(-1); c0(p).SecurityContext = &v1.SecurityContext{RunAsUser: &u} }, "securityContext.runAsUser: Invalid"},
		{"pod securityContext", func(p *v1.Pod) { p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: new(bool)} }, ""},
		{"fsGroup", func(p *v1.Pod) { p.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: new(int64)} }, ""},
		{"hostPID", func(p *v1.Pod) { p.Spec.HostPID = true }, ""},
		{"dns None without nameservers", func(p *v1.Pod) { p.Spec.DNSPolicy = v1.DNSNone }, "spec.dnsConfig.nameservers: Required"},
		{"dns None", func(p *v1.Pod) {
			p.Spec.DNSPolicy = v1.DNSNone
			p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}}
		}, ""},
		{"bad nameserver", func(p *v1.Pod) { p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"dns.local"}} }, "dnsConfig.nameservers[0]: Invalid"},
		{"dns config", func(p *v1.Pod) {
			p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "2001:db8::1"}, Searches: []string{"svc.example.test", "example.test.", ".", "_tcp.example.test"},
				Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: str("2")}, {Name: "edns0"}}}
		}, ""},
		{"newline in a search injects a nameserver", func(p *v1.Pod) {
			p.Spec.DNSConfig = &v1.PodDNSConfig{Searches: []string{"ok.test", "example.test\nnameserver 6.6.6.6"}}
		}, `spec.dnsConfig.searches[1]: Invalid value: "example.test\nnameserver 6.6.6.6"`},
		{"search with a space", func(p *v1.Pod) { p.Spec.DNSConfig = &v1.PodDNSConfig{Searches: []string{"a.test b.test"}} }, "spec.dnsConfig.searches[0]: Invalid"},
		{"empty search", func(p *v1.Pod) { p.Spec.DNSConfig = &v1.PodDNSConfig{Searches: []string{""}} }, "spec.dnsConfig.searches[0]: Invalid"},
		{"too many searches", func(p *v1.Pod) {
			p.Spec.DNSConfig = &v1.PodDNSConfig{Searches: strings.Split(strings.Repeat("a.test,", 33), ",")[:33]}
		}, "must not have more than 32 search paths"},
		{"search list too long", func(p *v1.Pod) {
			long := strings.Repeat("a", 60)
			p.Spec.DNSConfig = &v1.PodDNSConfig{Searches: []string{}}
			for range 9 {
				p.Spec.DNSConfig.Searches = append(p.Spec.DNSConfig.Searches, strings.Repeat(long+".", 4)+"test")
			}
		}, "must not have more than 2048 characters"},
		{"too many nameservers", func(p *v1.Pod) {
			p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "1.1.1.2", "1.1.1.3", "1.1.1.4"}}
		}, "spec.dnsConfig.nameservers: Invalid value"},
		{"newline in a nameserver", func(p *v1.Pod) { p.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"1.1.1.1\nsearch evil"}} }, "spec.dnsConfig.nameservers[0]: Invalid"},
		{"newline in an option name", func(p *v1.Pod) {
			p.Spec.DNSConfig = &v1.PodDNSConfig{Options: []v1.PodDNSConfigOption{{Name: "ndots:1\nnameserver 6.6.6.6"}}}
		}, "spec.dnsConfig.options[0].name: Invalid"},
		{"space in an option value", func(p *v1.Pod) {
			p.Spec.DNSConfig = &v1.PodDNSConfig{Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: str("1 rotate")}}}
		}, "spec.dnsConfig.options[0].value: Invalid"},
		{"option without a name", func(p *v1.Pod) {
			p.Spec.DNSConfig = &v1.PodDNSConfig{Options: []v1.PodDNSConfigOption{{Value: str("1")}}}
		}, "spec.dnsConfig.options[0].name: Required"},
		{"host alias hostname with a newline", func(p *v1.Pod) {
			p.Spec.HostAliases = []v1.HostAlias{{IP: "10.1.2.3", Hostnames: []string{"db.local\n6.6.6.6 evil"}}}
		}, "spec.hostAliases[0].hostnames[0]: Invalid"},
		{"host alias ip with a newline", func(p *v1.Pod) {
			p.Spec.HostAliases = []v1.HostAlias{{IP: "10.1.2.3\n6.6.6.6", Hostnames: []string{"db.local"}}}
		}, "spec.hostAliases[0].ip: Invalid"},
		{"hostname with a newline", func(p *v1.Pod) { p.Spec.Hostname = "web\nevil" }, "spec.hostname: Invalid"},
		{"subdomain with a dot", func(p *v1.Pod) { p.Spec.Subdomain = "a.b" }, "spec.subdomain: Invalid"},
		{"host alias", func(p *v1.Pod) {
			p.Spec.HostAliases = []v1.HostAlias{{IP: "10.1.2.3", Hostnames: []string{"db.local"}}}
		}, ""},
		{"bad host alias", func(p *v1.Pod) { p.Spec.HostAliases = []v1.HostAlias{{IP: "x", Hostnames: nil}} }, "hostAliases[0].ip: Invalid"},
		{"bad termination message path", func(p *v1.Pod) { c0(p).TerminationMessagePath = "rel" }, "terminationMessagePath: Invalid"},
		{"restart policy", func(p *v1.Pod) { p.Spec.RestartPolicy = "Sometimes" }, "spec.restartPolicy: Unsupported"},
		{"pull policy", func(p *v1.Pod) { c0(p).ImagePullPolicy = "Maybe" }, "imagePullPolicy: Unsupported"},
		{"negative grace", func(p *v1.Pod) { g := int64(-1); p.Spec.TerminationGracePeriodSeconds = &g }, "terminationGracePeriodSeconds: Invalid"},
		{"tiny memory limit", func(p *v1.Pod) { c0(p).Resources.Limits["memory"] = resourceMust("4Mi") }, "limits[memory]: Invalid"},
		{"cpu limit that would overflow", func(p *v1.Pod) {
			c0(p).Resources.Limits["cpu"] = resourceMust("8Ei")
			c0(p).Resources.Requests["cpu"] = resourceMust("100m")
		}, "limits[cpu]: Invalid value: \"9223372036854775807\": must be at most 175921860 (the largest CFS quota"},
		{"cpu request past the kernel's quota", func(p *v1.Pod) {
			c0(p).Resources.Requests["cpu"] = resourceMust("1e14")
			c0(p).Resources.Limits["cpu"] = resourceMust("1e14")
		}, "requests[cpu]: Invalid value: \"100e12\": must be at most 175921860"},
		{"memory that would overflow", func(p *v1.Pod) { c0(p).Resources.Limits["memory"] = resourceMust("1e30") }, "limits[memory]: Invalid value: \"1e30\": must be at most"},
		{"hostPath with a colon", func(p *v1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "h", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/tmp/a:b"}}})
		}, "hostPath.path: Invalid value: \"/tmp/a:b\": must be an absolute path without ':'"},
		{"request above limit", func(p *v1.Pod) { c0(p).Resources.Requests["cpu"] = resourceMust("1") }, "requests[cpu]: Invalid"},
		{"extended resource limit", func(p *v1.Pod) { c0(p).Resources.Limits["nvidia.com/gpu"] = resourceMust("1") }, ""},
		{"extended resource request equal to its limit", func(p *v1.Pod) {
			c0(p).Resources.Limits["example.com/dev"] = resourceMust("2")
			c0(p).Resources.Requests["example.com/dev"] = resourceMust("2")
		}, ""},
		{"extended resource request below its limit", func(p *v1.Pod) {
			c0(p).Resources.Limits["example.com/dev"] = resourceMust("2")
			c0(p).Resources.Requests["example.com/dev"] = resourceMust("1")
		}, "spec.containers[0].resources.requests[example.com/dev]: Invalid value: \"1\": must be equal to example.com/dev limit of 2"},
		{"extended resource request without a limit", func(p *v1.Pod) { c0(p).Resources.Requests["example.com/dev"] = resourceMust("1") },
			"spec.containers[0].resources.limits[example.com/dev]: Required value: Limit must be set for non overcommitable resources"},
		{"extended resource fraction", func(p *v1.Pod) { c0(p).Resources.Limits["example.com/dev"] = resourceMust("500m") },
			"limits[example.com/dev]: Invalid value: \"500m\": must be a non-negative integer"},
		{"kubernetes.io resource refused", func(p *v1.Pod) { c0(p).Resources.Limits["kubernetes.io/dev"] = resourceMust("1") }, "limits[kubernetes.io/dev]: Unsupported"},
		{"unknown native resource refused", func(p *v1.Pod) { c0(p).Resources.Limits["hugepages-2Mi"] = resourceMust("2Mi") }, "limits[hugepages-2Mi]: Unsupported"},
		{"extended resource at pod level refused", func(p *v1.Pod) {
			p.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{"example.com/dev": resourceMust("1")}}
		}, "spec.resources.limits[example.com/dev]: Unsupported"},
		{"imagePullSecrets accepted", func(p *v1.Pod) { p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "s"}} }, ""},
		{"hostname", func(p *v1.Pod) { p.Spec.Hostname = "h"; p.Spec.Subdomain = "sub" }, ""},
		{"bad hostname", func(p *v1.Pod) { p.Spec.Hostname = "H_1" }, "spec.hostname: Invalid"},
		{"port name", func(p *v1.Pod) { c0(p).Ports[0].Name = "Not_Valid" }, "ports[0].name: Invalid"},
		{"tty", func(p *v1.Pod) { c0(p).TTY = true }, ""},
		{"ephemeral container from the API server", func(p *v1.Pod) {
			p.Annotations[ConfigSourceAnnotation] = SourceAPIServer
			p.Spec.EphemeralContainers = []v1.EphemeralContainer{{TargetContainerName: "server",
				EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger", Image: "busybox:1", Stdin: true, TTY: true}}}
		}, ""},
		{"ephemeral container in a manifest", func(p *v1.Pod) {
			p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger", Image: "busybox:1"}}}
		}, "spec.ephemeralContainers: Forbidden: may be added only through the API server"},
		{"ephemeral container named as an app container", func(p *v1.Pod) {
			p.Annotations[ConfigSourceAnnotation] = SourceAPIServer
			p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "server", Image: "busybox:1"}}}
		}, "spec.ephemeralContainers[0].name: Duplicate"},
		{"ephemeral container with a port", func(p *v1.Pod) {
			p.Annotations[ConfigSourceAnnotation] = SourceAPIServer
			p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger", Image: "busybox:1",
				Ports: []v1.ContainerPort{{ContainerPort: 80}}}}}
		}, "spec.ephemeralContainers[0].ports: Forbidden"},
		{"ephemeral container targeting no container", func(p *v1.Pod) {
			p.Annotations[ConfigSourceAnnotation] = SourceAPIServer
			p.Spec.EphemeralContainers = []v1.EphemeralContainer{{TargetContainerName: "nope",
				EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger", Image: "busybox:1"}}}
		}, "spec.ephemeralContainers[0].targetContainerName: Not found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs, _ := Validate(podFrom(t, c.mutate))
			got := errs.ToAggregate()
			switch {
			case c.want == "" && got != nil:
				t.Errorf("unexpected errors: %v", got)
			case c.want != "" && got == nil:
				t.Errorf("valid, want error containing %q", c.want)
			case c.want != "" && !strings.Contains(got.Error(), c.want):
				t.Errorf("errors %q do not contain %q", got, c.want)
			}
		})
	}
}

func TestValidateReportsIgnoredFields(t *testing.T) {
	p := podFrom(t, func(p *v1.Pod) {
		p.Spec.NodeSelector = map[string]string{"disk": "ssd"}
		p.Spec.Containers[0].ResizePolicy = []v1.ContainerResizePolicy{{ResourceName: "cpu", RestartPolicy: "NotRequired"}}
		p.Spec.Containers[0].Resources.Limits["ephemeral-storage"] = resourceMust("1Gi")
	})
	errs, ignored := Validate(p)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	got := strings.Join(ignored, ",")
	for _, want := range []string{"spec.nodeSelector", "spec.containers[0].resources.limits[ephemeral-storage]"} {
		if !strings.Contains(got, want) {
			t.Errorf("ignored %v lacks %s", ignored, want)
		}
	}
	if strings.Contains(got, "resizePolicy") {
		t.Errorf("ignored %v names resizePolicy, which is implemented", ignored)
	}
}

// resizePolicy is checked as the API server checks it.
func TestValidateResizePolicy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy []v1.ContainerResizePolicy
		want   string // an error's substring; "": valid
	}{
		{"both", []v1.ContainerResizePolicy{{ResourceName: "cpu", RestartPolicy: "NotRequired"}, {ResourceName: "memory", RestartPolicy: "RestartContainer"}}, ""},
		{"duplicate", []v1.ContainerResizePolicy{{ResourceName: "cpu", RestartPolicy: "NotRequired"}, {ResourceName: "cpu", RestartPolicy: "NotRequired"}}, "resizePolicy[1].resourceName: Duplicate value"},
		{"unknown resource", []v1.ContainerResizePolicy{{ResourceName: "ephemeral-storage", RestartPolicy: "NotRequired"}}, "resizePolicy[0].resourceName: Unsupported value"},
		{"unknown policy", []v1.ContainerResizePolicy{{ResourceName: "memory", RestartPolicy: "Sometimes"}}, "resizePolicy[0].restartPolicy: Unsupported value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := podFrom(t, func(p *v1.Pod) { p.Spec.Containers[0].ResizePolicy = tc.policy })
			errs, _ := Validate(p)
			got := errs.ToAggregate()
			switch {
			case tc.want == "" && got != nil:
				t.Fatalf("unexpected errors: %v", got)
			case tc.want != "" && (got == nil || !strings.Contains(got.Error(), tc.want)):
				t.Fatalf("errors %v, want one with %q", got, tc.want)
			}
		})
	}
}

// A resize may not change the pod's QoS class, nor a container's extended
// resources (its devices are assigned once, at admission).
func TestValidateResize(t *testing.T) {
	qos := func(p *v1.Pod) v1.PodQOSClass { return v1.PodQOSClass(p.Labels["qos"]) }
	pod := func(uid, class string) *v1.Pod {
		p := &v1.Pod{}
		p.UID, p.Labels = types.UID(uid), map[string]string{"qos": class}
		return p
	}
	withDevices := func(uid, cpu string, devs int64) *v1.Pod {
		p := pod(uid, "Burstable")
		lim := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}
		if devs > 0 {
			lim["example.com/dev"] = *resource.NewQuantity(devs, resource.DecimalSI)
		}
		p.Spec.Containers = []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{Limits: lim}}}
		return p
	}
	for _, tc := range []struct {
		name     string
		old, new *v1.Pod
		want     string // the refusal's substring; "": taken
	}{
		{"new pod", nil, pod("u", "Burstable"), ""},
		{"same class", pod("u", "Burstable"), pod("u", "Burstable"), ""},
		{"class changes", pod("u", "Guaranteed"), pod("u", "Burstable"), "Pod QOS Class may not change as a result of resizing"},
		{"another pod", pod("u", "Guaranteed"), pod("v", "Burstable"), ""},
		{"cpu changes beside devices", withDevices("u", "1", 1), withDevices("u", "2", 1), ""},
		{"devices change", withDevices("u", "1", 1), withDevices("u", "1", 2), "spec.containers[0].resources: Forbidden: extended resources may not change"},
		{"devices added", withDevices("u", "1", 0), withDevices("u", "1", 1), "extended resources may not change"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := ValidateResize(tc.old, tc.new, qos)
			if (len(errs) > 0) != (tc.want != "") {
				t.Fatalf("errors %v, want %q", errs, tc.want)
			}
			if tc.want != "" && !strings.Contains(errs.ToAggregate().Error(), tc.want) {
				t.Fatalf("message %v, want %q", errs, tc.want)
			}
		})
	}
}

func TestHostPortConflicts(t *testing.T) {
	cases := []struct {
		a, b HostPort
		want bool
	}{
		{HostPort{"", 80, "TCP"}, HostPort{"", 80, "TCP"}, true},
		{HostPort{"", 80, "TCP"}, HostPort{"10.0.0.1", 80, "TCP"}, true},
		{HostPort{"10.0.0.2", 80, "TCP"}, HostPort{"10.0.0.1", 80, "TCP"}, false},
		{HostPort{"", 80, "TCP"}, HostPort{"", 80, "UDP"}, false},
		{HostPort{"", 80, "TCP"}, HostPort{"", 81, "TCP"}, false},
	}
	for _, c := range cases {
		if got := c.a.Conflicts(c.b); got != c.want {
			t.Errorf("%v conflicts %v = %v, want %v", c.a, c.b, got, c.want)
		}
		if got := c.b.Conflicts(c.a); got != c.want {
			t.Errorf("%v conflicts %v = %v, want %v (not symmetric)", c.b, c.a, got, c.want)
		}
	}
}

// A rejected field's message says "not supported" once.
func TestRejectionWordedOnce(t *testing.T) {
	p := podFrom(t, func(p *v1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "share", VolumeSource: v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "nfs", Path: "/"}}})
	})
	errs, _ := Validate(p)
	msg := errs.ToAggregate().Error()
	if !strings.Contains(msg, "nfs: Forbidden: not supported by this agent") || strings.Contains(msg, "agent: not supported") {
		t.Errorf("message %q", msg)
	}
}

// The fields an attacker found the agent taking and the API server
// refusing (issue 49), compared rule by rule with
// k8s.io/kubernetes/pkg/apis/core/validation (v1.37): each case names the
// upstream function whose rule it follows. want is a substring of the
// errors, "" valid.
func TestValidateAsTheAPIServer(t *testing.T) {
	mode := func(m int32) *int32 { return &m }
	// Volume 1 ("tmp", mounted by the container) becomes src.
	volume := func(src v1.VolumeSource) func(p *v1.Pod) {
		return func(p *v1.Pod) { p.Spec.Volumes[1] = v1.Volume{Name: "tmp", VolumeSource: src} }
	}
	name := func(path string) v1.DownwardAPIVolumeFile {
		return v1.DownwardAPIVolumeFile{Path: path, FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}
	}
	downward := func(defaultMode *int32, items ...v1.DownwardAPIVolumeFile) func(p *v1.Pod) {
		return volume(v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{DefaultMode: defaultMode, Items: items}})
	}
	configMap := func(defaultMode *int32, items ...v1.KeyToPath) func(p *v1.Pod) {
		return volume(v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "c"},
			DefaultMode: defaultMode, Items: items}})
	}
	projected := func(defaultMode *int32, sources ...v1.VolumeProjection) func(p *v1.Pod) {
		return volume(v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{DefaultMode: defaultMode, Sources: sources}})
	}
	env := func(name string) func(p *v1.Pod) { return func(p *v1.Pod) { p.Spec.Containers[0].Env[0].Name = name } }
	memory := func(field, q string) func(p *v1.Pod) {
		return func(p *v1.Pod) {
			r := &p.Spec.Containers[0].Resources
			list := map[string]v1.ResourceList{"limits": r.Limits, "requests": r.Requests}[field]
			list[v1.ResourceMemory] = resource.MustParse(q)
			if field == "requests" {
				delete(r.Limits, v1.ResourceMemory)
			}
		}
	}
	sizeLimit := func(medium v1.StorageMedium, q string) func(p *v1.Pod) {
		s := resource.MustParse(q)
		return volume(v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: medium, SizeLimit: &s}})
	}
	// mount changes the container and its first volume mount.
	mount := func(fs ...func(c *v1.Container, m *v1.VolumeMount)) func(p *v1.Pod) {
		return func(p *v1.Pod) {
			for _, f := range fs {
				f(&p.Spec.Containers[0], &p.Spec.Containers[0].VolumeMounts[0])
			}
		}
	}
	propagation := func(mode v1.MountPropagationMode) func(*v1.Container, *v1.VolumeMount) {
		return func(_ *v1.Container, m *v1.VolumeMount) { m.MountPropagation = &mode }
	}
	rro := func(mode v1.RecursiveReadOnlyMode) func(*v1.Container, *v1.VolumeMount) {
		return func(_ *v1.Container, m *v1.VolumeMount) { m.RecursiveReadOnly = &mode }
	}
	readOnly := func(_ *v1.Container, m *v1.VolumeMount) { m.ReadOnly = true }
	privileged := func(on bool) func(*v1.Container, *v1.VolumeMount) {
		return func(c *v1.Container, _ *v1.VolumeMount) { c.SecurityContext = &v1.SecurityContext{Privileged: &on} }
	}
	procMount := func(pm v1.ProcMountType) func(*v1.Container, *v1.VolumeMount) {
		return func(c *v1.Container, _ *v1.VolumeMount) { c.SecurityContext = &v1.SecurityContext{ProcMount: &pm} }
	}
	const badMode = "must be a number between 0 and 0777 (octal), both inclusive"
	const badName = "a valid environment variable name must consist only of printable ASCII characters other than '='"
	cases := []struct {
		name, upstream string
		mutate         func(p *v1.Pod)
		want           string
	}{
		// Modes: permission bits only.
		{"downwardAPI defaultMode setuid", "validateDownwardAPIVolumeSource: defaultMode in [0, 0777]",
			downward(mode(0o4755), name("n")), `spec.volumes[1].downwardAPI.defaultMode: Invalid value: 2541: ` + badMode},
		{"downwardAPI defaultMode 0777", "validateDownwardAPIVolumeSource", downward(mode(0o777), name("n")), ""},
		{"downwardAPI defaultMode negative", "validateDownwardAPIVolumeSource", downward(mode(-1), name("n")), "downwardAPI.defaultMode: Invalid value: -1"},
		{"downwardAPI item mode setgid", "validateDownwardAPIVolumeFile: mode in [0, 0777]",
			downward(nil, v1.DownwardAPIVolumeFile{Path: "n", Mode: mode(0o2777), FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}),
			"spec.volumes[1].downwardAPI.items[0].mode: Invalid value: 1535: " + badMode},
		{"configMap defaultMode sticky", "validateConfigMapVolumeSource: defaultMode in [0, 0777]",
			configMap(mode(0o1777)), "spec.volumes[1].configMap.defaultMode: Invalid value: 1023"},
		{"configMap item mode setuid", "validateKeyToPath: mode in [0, 0777]",
			configMap(nil, v1.KeyToPath{Key: "k", Path: "k", Mode: mode(0o4755)}), "spec.volumes[1].configMap.items[0].mode: Invalid value: 2541"},
		{"secret defaultMode setuid", "validateSecretVolumeSource: defaultMode in [0, 0777]",
			volume(v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s", DefaultMode: mode(0o4755)}}), "spec.volumes[1].secret.defaultMode: Invalid value: 2541"},
		{"projected defaultMode setuid", "validateProjectedVolumeSource: defaultMode in [0, 0777]",
			projected(mode(0o4000)), "spec.volumes[1].projected.defaultMode: Invalid value: 2048"},
		{"projected downwardAPI item mode setuid", "validateProjectionSources → validateDownwardAPIVolumeFile",
			projected(nil, v1.VolumeProjection{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{
				{Path: "n", Mode: mode(0o4755), FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}}),
			"spec.volumes[1].projected.sources[0].downwardAPI.items[0].mode: Invalid value: 2541"},
		// Paths: relative, no "..", and not the atomic writer's names.
		{"downwardAPI path into ..data", "ValidateLocalNonReservedPath: must not start with '..'",
			downward(nil, name("..data/x")), `spec.volumes[1].downwardAPI.items[0].path: Invalid value: "..data/x": must not start with '..'`},
		{"downwardAPI path ..data", "ValidateLocalNonReservedPath", downward(nil, name("..data")), "must not start with '..'"},
		{"downwardAPI path ...", "ValidateLocalNonReservedPath", downward(nil, name("...")), "must not start with '..'"},
		{"downwardAPI path ..2026_01_01 (a writer's timestamp dir)", "ValidateLocalNonReservedPath",
			downward(nil, name("..2026_01_01_00_00_00.1/x")), "must not start with '..'"},
		{"downwardAPI path with ..data below the top", "ValidateLocalNonReservedPath: the first element only", downward(nil, name("a/..data")), ""},
		{"downwardAPI path .hidden", "ValidateLocalNonReservedPath", downward(nil, name(".hidden")), ""},
		{"downwardAPI path escaping", "validatePathNoBacksteps: must not contain '..'", downward(nil, name("../x")), "must not contain '..'"},
		{"downwardAPI absolute path", "validateLocalDescendingPath: must be a relative path", downward(nil, name("/x")), "downwardAPI.items[0].path: Invalid"},
		{"configMap item path ..data", "validateKeyToPath → ValidateLocalNonReservedPath",
			configMap(nil, v1.KeyToPath{Key: "k", Path: "..data"}), `spec.volumes[1].configMap.items[0].path: Invalid value: "..data": must not start with '..'`},
		{"projected secret item path ..data/k", "validateProjectionSources → validateKeyToPath",
			projected(nil, v1.VolumeProjection{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "s"},
				Items: []v1.KeyToPath{{Key: "k", Path: "..data/k"}}}}),
			"spec.volumes[1].projected.sources[0].secret.items[0].path: Invalid value"},
		{"projected downwardAPI path ..data", "validateProjectionSources → validateDownwardAPIVolumeFile",
			projected(nil, v1.VolumeProjection{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{name("..data")}}}),
			"spec.volumes[1].projected.sources[0].downwardAPI.items[0].path: Invalid value"},
		{"projected serviceAccountToken path ..token", "validateProjectionSources → ValidateLocalNonReservedPath",
			projected(nil, v1.VolumeProjection{ServiceAccountToken: &v1.ServiceAccountTokenProjection{Path: "..token"}}),
			`spec.volumes[1].projected.sources[0].serviceAccountToken.path: Invalid value: "..token": must not start with '..'`},
		{"projected sources writing one path", "validateProjectionSources: conflicting duplicate paths",
			projected(nil, v1.VolumeProjection{ConfigMap: &v1.ConfigMapProjection{LocalObjectReference: v1.LocalObjectReference{Name: "c"},
				Items: []v1.KeyToPath{{Key: "k", Path: "conf"}}}},
				v1.VolumeProjection{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{name("conf")}}}),
			`spec.volumes[1].projected.sources[1].downwardAPI.items[0].path: Invalid value: "conf": conflicting duplicate paths`},
		{"projected downwardAPI field unsupported", "validateProjectionSources → validateDownwardAPIVolumeFile: fieldPath",
			projected(nil, v1.VolumeProjection{DownwardAPI: &v1.DownwardAPIProjection{Items: []v1.DownwardAPIVolumeFile{
				{Path: "n", FieldRef: &v1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}}}),
			"spec.volumes[1].projected.sources[0].downwardAPI.items[0].fieldRef.fieldPath: Unsupported value"},
		// Environment variable names: printable ASCII but '='.
		{"env name with a newline", "ValidateEnv → IsRelaxedEnvVarName", env("A\nB"), `spec.containers[0].env[0].name: Invalid value: "A\nB": ` + badName},
		{"env name with a tab", "ValidateEnv → IsRelaxedEnvVarName", env("A\tB"), badName},
		{"env name not ASCII", "ValidateEnv → IsRelaxedEnvVarName", env("NAÏVE"), badName},
		{"env name with =", "ValidateEnv → IsRelaxedEnvVarName", env("A=B"), "spec.containers[0].env[0].name: Invalid"},
		{"env name empty", "ValidateEnv: Required", env(""), "spec.containers[0].env[0].name: Required value"},
		{"env name relaxed: space, dot, leading digit", "ValidateEnv → IsRelaxedEnvVarName", env("1 my.var-x"), ""},
		{"envFrom prefix with a newline", "ValidateEnvFrom → IsRelaxedEnvVarName", func(p *v1.Pod) {
			p.Spec.Containers[0].EnvFrom = []v1.EnvFromSource{{Prefix: "P\n", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "c"}}}}
		}, `spec.containers[0].envFrom[0].prefix: Invalid value: "P\n"`},
		// Quantities. The API server has no upper bound: "8Ei" parses as
		// 2^63-1 bytes (binary quantities are capped there) and passes;
		// the kubelet's admission refuses it, OutOfmemory, when the
		// pod's request (the limit, defaulted) passes the node's
		// allocatable (pkg/config, TestMergerRefusesPodsLargerThanTheNode).
		{"memory limit 8Ei", "validateResourceRequirements: any non-negative quantity", memory("limits", "8Ei"), ""},
		{"memory request 8Ei", "validateResourceRequirements", memory("requests", "8Ei"), ""},
		{"memory limit negative", "ValidateNonnegativeQuantity", memory("limits", "-1"), "resources.limits[memory]: Invalid value: \"-1\": must not be negative"},
		{"memory past int64 (a decimal quantity is not capped)", "none upstream: the agent refuses what Docker's int64 cannot hold",
			memory("limits", "1e19"), "resources.limits[memory]: Invalid value: \"10e18\": must be at most"},
		{"ephemeral-storage limit negative", "ValidateNonnegativeQuantity", func(p *v1.Pod) {
			p.Spec.Containers[0].Resources.Limits[v1.ResourceEphemeralStorage] = resource.MustParse("-1Gi")
		}, "resources.limits[ephemeral-storage]: Invalid value: \"-1Gi\": must not be negative"},
		// emptyDir sizeLimit: only a negative one is refused.
		{"emptyDir sizeLimit negative", "validateVolumeSource: sizeLimit not negative", sizeLimit("", "-1Gi"), "spec.volumes[1].emptyDir.sizeLimit: Invalid"},
		{"emptyDir sizeLimit zero (no limit)", "validateVolumeSource", sizeLimit("", "0"), ""},
		{"emptyDir sizeLimit past the disk", "validateVolumeSource (never reached)", sizeLimit("", "8Ei"), ""},
		{"emptyDir sizeLimit past int64", "validateVolumeSource (never reached)", sizeLimit("", "1e30"), ""},
		{"Memory emptyDir sizeLimit past the node's memory", "validateVolumeSource (the tmpfs is bounded by the node's memory)",
			sizeLimit(v1.StorageMediumMemory, "8Ei"), ""},
		// clusterTrustBundle projections: by name or by signer.
		{"clusterTrustBundle by name", "ValidateClusterTrustBundleProjection",
			projected(nil, v1.VolumeProjection{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Name: ptr.To("b"), Path: "ca.pem"}}), ""},
		{"clusterTrustBundle by signer", "ValidateClusterTrustBundleProjection",
			projected(nil, v1.VolumeProjection{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/s"), Path: "ca.pem"}}), ""},
		{"clusterTrustBundle by name and signer", "ValidateClusterTrustBundleProjection",
			projected(nil, v1.VolumeProjection{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Name: ptr.To("b"), SignerName: ptr.To("example.com/s"), Path: "ca.pem"}}),
			"spec.volumes[1].projected.sources[0].clusterTrustBundle.signerName: Invalid value: \"example.com/s\": only one of name and signerName may be used"},
		{"clusterTrustBundle by neither", "ValidateClusterTrustBundleProjection",
			projected(nil, v1.VolumeProjection{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Path: "ca.pem"}}),
			"spec.volumes[1].projected.sources[0].clusterTrustBundle: Required value: either name or signerName must be specified"},
		{"clusterTrustBundle path with ..", "ValidateClusterTrustBundleProjection: validateLocalNonReservedPath",
			projected(nil, v1.VolumeProjection{ClusterTrustBundle: &v1.ClusterTrustBundleProjection{Name: ptr.To("b"), Path: "../ca.pem"}}),
			"spec.volumes[1].projected.sources[0].clusterTrustBundle.path: Invalid"},
		{"podCertificate", "validateProjectionSources", projected(nil, v1.VolumeProjection{PodCertificate: &v1.PodCertificateProjection{
			SignerName: "e2e.example.com/s", KeyType: "ECDSAP256", CredentialBundlePath: "b.pem", MaxExpirationSeconds: ptr.To(int32(3600))}}), ""},
		{"podCertificate lifetime under an hour", "validateProjectionSources", projected(nil, v1.VolumeProjection{PodCertificate: &v1.PodCertificateProjection{
			SignerName: "e2e.example.com/s", KeyType: "ECDSAP256", CredentialBundlePath: "b.pem", MaxExpirationSeconds: ptr.To(int32(3599))}}),
			"spec.volumes[1].projected.sources[0].podCertificate.maxExpirationSeconds: Invalid value: 3599: if provided, maxExpirationSeconds must be >= 3600"},
		{"podCertificate lifetime over 91 days", "validateProjectionSources", projected(nil, v1.VolumeProjection{PodCertificate: &v1.PodCertificateProjection{
			SignerName: "e2e.example.com/s", KeyType: "ECDSAP256", CredentialBundlePath: "b.pem", MaxExpirationSeconds: ptr.To(int32(7862401))}}),
			"if provided, maxExpirationSeconds must be <= 7862400"},
		{"podCertificate without a file", "validateProjectionSources", projected(nil, v1.VolumeProjection{PodCertificate: &v1.PodCertificateProjection{
			SignerName: "e2e.example.com/s", KeyType: "ED25519"}}),
			"spec.volumes[1].projected.sources[0].podCertificate: Required value: specify at least one of credentialBundlePath, keyPath, and certificateChainPath"},
		{"podCertificate key type", "validateProjectionSources", projected(nil, v1.VolumeProjection{PodCertificate: &v1.PodCertificateProjection{
			SignerName: "e2e.example.com/s", KeyType: "DSA", KeyPath: "k.pem"}}),
			`spec.volumes[1].projected.sources[0].podCertificate.keyType: Unsupported value: "DSA"`},
		// Claims: named, and an ephemeral volume has its template.
		{"persistentVolumeClaim", "validateVolumeSource", volume(v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}), ""},
		{"persistentVolumeClaim without claimName", "validatePersistentClaimVolumeSource",
			volume(v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{}}), "spec.volumes[1].persistentVolumeClaim.claimName: Required value"},
		{"ephemeral without volumeClaimTemplate", "validateEphemeralVolumeSource",
			volume(v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}), "spec.volumes[1].ephemeral.volumeClaimTemplate: Required value"},
		{"inline csi", "validateCSIVolumeSource", volume(v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "csi.example.com"}}), ""},
		{"inline csi without driver", "validateCSIVolumeSource",
			volume(v1.VolumeSource{CSI: &v1.CSIVolumeSource{}}), "spec.volumes[1].csi.driver: Required value"},
		{"inline csi, driver not a DNS name", "ValidateCSIDriverName",
			volume(v1.VolumeSource{CSI: &v1.CSIVolumeSource{Driver: "csi_example"}}), "spec.volumes[1].csi.driver: Invalid value"},
		// Mount propagation, recursive read-only mounts, procMount.
		{"Bidirectional, not privileged", "validateMountPropagation", mount(propagation(v1.MountPropagationBidirectional), privileged(false)),
			"spec.containers[0].volumeMounts[0].mountPropagation: Forbidden: Bidirectional mount propagation is available only to privileged containers"},
		{"Bidirectional, privileged", "validateMountPropagation", mount(propagation(v1.MountPropagationBidirectional), privileged(true)), ""},
		{"HostToContainer", "validateMountPropagation", mount(propagation(v1.MountPropagationHostToContainer)), ""},
		{"None", "validateMountPropagation", mount(propagation(v1.MountPropagationNone)), ""},
		{"unknown propagation", "validateMountPropagation", mount(propagation("Sideways")),
			`volumeMounts[0].mountPropagation: Unsupported value: "Sideways": supported values: "Bidirectional", "HostToContainer", "None"`},
		{"recursiveReadOnly Enabled, read-only", "validateMountRecursiveReadOnly", mount(rro(v1.RecursiveReadOnlyEnabled), readOnly), ""},
		{"recursiveReadOnly IfPossible, not read-only", "validateMountRecursiveReadOnly", mount(rro(v1.RecursiveReadOnlyIfPossible)),
			"volumeMounts[0].recursiveReadOnly: Forbidden: may only be specified when readOnly is true"},
		{"recursiveReadOnly with HostToContainer", "validateMountRecursiveReadOnly",
			mount(rro(v1.RecursiveReadOnlyEnabled), readOnly, propagation(v1.MountPropagationHostToContainer)),
			"volumeMounts[0].recursiveReadOnly: Forbidden: may only be specified when mountPropagation is None or not specified"},
		{"recursiveReadOnly Disabled, writable", "validateMountRecursiveReadOnly", mount(rro(v1.RecursiveReadOnlyDisabled)), ""},
		{"recursiveReadOnly unknown", "validateMountRecursiveReadOnly", mount(rro("Sometimes"), readOnly), `recursiveReadOnly: Unsupported value: "Sometimes"`},
		{"procMount Default", "validateProcMountType", mount(procMount(v1.DefaultProcMount)), ""},
		{"procMount Unmasked", "ValidateSecurityContext: hostUsers must be false", mount(procMount(v1.UnmaskedProcMount)),
			"spec.containers[0].securityContext.procMount: Invalid value: \"Unmasked\": `hostUsers` must be false to use `Unmasked`"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			errs, _ := Validate(podFrom(t, c.mutate))
			got := errs.ToAggregate()
			switch {
			case c.want == "" && got != nil:
				t.Errorf("upstream (%s) takes it; errors: %v", c.upstream, got)
			case c.want != "" && got == nil:
				t.Errorf("upstream (%s) refuses it; valid here, want an error containing %q", c.upstream, c.want)
			case c.want != "" && !strings.Contains(got.Error(), c.want):
				t.Errorf("errors %q do not contain %q (upstream: %s)", got, c.want, c.upstream)
			}
		})
	}
}
