package api

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	sigsjson "sigs.k8s.io/json"
)

// The 2014 ContainerManifest, as the classic agent read it from files, URLs
// and etcd. Only what that agent honoured is accepted; see docs for the mapping.
type classicManifest struct {
	Version       string             `json:"version"`
	ID            string             `json:"id"`
	UUID          string             `json:"uuid,omitempty"`
	Containers    []classicContainer `json:"containers"`
	Volumes       []classicVolume    `json:"volumes,omitempty"`
	RestartPolicy *struct {
		Always    *struct{} `json:"always,omitempty"`
		OnFailure *struct{} `json:"onFailure,omitempty"`
		Never     *struct{} `json:"never,omitempty"`
	} `json:"restartPolicy,omitempty"`
}

type classicContainer struct {
	Name          string               `json:"name"`
	Image         string               `json:"image"`
	Command       []string             `json:"command,omitempty"`
	WorkingDir    string               `json:"workingDir,omitempty"`
	Ports         []v1.ContainerPort   `json:"ports,omitempty"`
	Env           []v1.EnvVar          `json:"env,omitempty"`
	Memory        int64                `json:"memory,omitempty"`
	CPU           int64                `json:"cpu,omitempty"`
	VolumeMounts  []classicVolumeMount `json:"volumeMounts,omitempty"`
	LivenessProbe *classicProbe        `json:"livenessProbe,omitempty"`
}

type classicVolumeMount struct {
	Name      string `json:"name"`
	MountPath string `json:"mountPath"`
	ReadOnly  bool   `json:"readOnly,omitempty"`
}

type classicProbe struct {
	Type    string `json:"type,omitempty"`    // accepted and ignored: the action says it
	Enabled *bool  `json:"enabled,omitempty"` // accepted and ignored
	HTTPGet *struct {
		Path string             `json:"path,omitempty"`
		Port intstr.IntOrString `json:"port"`
		Host string             `json:"host,omitempty"`
	} `json:"httpGet,omitempty"`
	TCPSocket *struct {
		Port intstr.IntOrString `json:"port"`
	} `json:"tcpSocket,omitempty"`
	Exec *struct {
		Command []string `json:"command"`
	} `json:"exec,omitempty"`
	InitialDelaySeconds int32 `json:"initialDelaySeconds,omitempty"`
}

type classicVolume struct {
	Name   string `json:"name"`
	Source *struct {
		HostDir *struct {
			Path string `json:"path"`
		} `json:"hostDir,omitempty"`
		EmptyDir *struct{} `json:"emptyDir,omitempty"`
	} `json:"source,omitempty"`
}

// isClassic reports whether a document is a 2014 ContainerManifest.
func isClassic(js []byte) bool {
	var h struct {
		Version string `json:"version"`
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(js, &h); err != nil {
		return false
	}
	return h.Version == "v1beta1" || h.Version == "v1beta2"
}

func decodeClassic(js []byte) ([]*v1.Pod, error) {
	var m classicManifest
	if err := strictUnmarshal(js, &m, ""); err != nil {
		return nil, err
	}
	pod, err := convertClassic(&m)
	if err != nil {
		return nil, err
	}
	return []*v1.Pod{pod}, nil
}

// convertClassic maps a ContainerManifest onto the v1 Pod the 2014 agent would
// have run.
func convertClassic(m *classicManifest) (*v1.Pod, error) {
	pod := &v1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: m.ID, UID: types.UID(m.UUID)},
	}
	if rp := m.RestartPolicy; rp != nil {
		switch {
		case rp.Always != nil:
			pod.Spec.RestartPolicy = v1.RestartPolicyAlways
		case rp.OnFailure != nil:
			pod.Spec.RestartPolicy = v1.RestartPolicyOnFailure
		case rp.Never != nil:
			pod.Spec.RestartPolicy = v1.RestartPolicyNever
		}
	}
	for i, vol := range m.Volumes {
		v := v1.Volume{Name: vol.Name}
		switch {
		case vol.Source == nil || vol.Source.EmptyDir != nil:
			// The 2014 agent treated a volume without a source as an empty dir.
			v.EmptyDir = &v1.EmptyDirVolumeSource{}
		case vol.Source.HostDir != nil:
			v.HostPath = &v1.HostPathVolumeSource{Path: vol.Source.HostDir.Path}
		default:
			return nil, fmt.Errorf("volumes[%d].source: no hostDir or emptyDir", i)
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, v)
	}
	for _, cc := range m.Containers {
		c := v1.Container{
			Name:       cc.Name,
			Image:      cc.Image,
			Args:       cc.Command, // Docker Cmd: the image's ENTRYPOINT still runs
			WorkingDir: cc.WorkingDir,
			Ports:      cc.Ports,
			Env:        cc.Env,
		}
		if cc.CPU != 0 {
			setResource(&c.Resources.Requests, v1.ResourceCPU, *resource.NewMilliQuantity(cc.CPU, resource.DecimalSI))
		}
		if cc.Memory != 0 {
			setResource(&c.Resources.Limits, v1.ResourceMemory, *resource.NewQuantity(cc.Memory, resource.BinarySI))
		}
		for _, vm := range cc.VolumeMounts {
			c.VolumeMounts = append(c.VolumeMounts, v1.VolumeMount{Name: vm.Name, MountPath: vm.MountPath, ReadOnly: vm.ReadOnly})
		}
		if p := cc.LivenessProbe; p != nil {
			probe := &v1.Probe{InitialDelaySeconds: p.InitialDelaySeconds}
			switch {
			case p.HTTPGet != nil:
				probe.HTTPGet = &v1.HTTPGetAction{Path: p.HTTPGet.Path, Port: p.HTTPGet.Port, Host: p.HTTPGet.Host}
			case p.TCPSocket != nil:
				probe.TCPSocket = &v1.TCPSocketAction{Port: p.TCPSocket.Port}
			case p.Exec != nil:
				probe.Exec = &v1.ExecAction{Command: p.Exec.Command}
			}
			c.LivenessProbe = probe
		}
		pod.Spec.Containers = append(pod.Spec.Containers, c)
	}
	return pod, nil
}

func setResource(l *v1.ResourceList, name v1.ResourceName, q resource.Quantity) {
	if *l == nil {
		*l = v1.ResourceList{}
	}
	(*l)[name] = q
}
