package cluster

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// CoreDNSImage is the image hack/ensure-coredns.sh builds: CoreDNS v1.15.0
// from its module, laid out as upstream's image.
const CoreDNSImage = "classic-kubelet/coredns:1.15.0"

// DNSOptions describes the cluster DNS DeployCoreDNS deploys.
type DNSOptions struct {
	// Image is CoreDNS's image; default CoreDNSImage.
	Image string
	// ClusterIP is the kube-dns Service's address, the agents'
	// --cluster-dns; default the service range's tenth address
	// (10.96.0.10), as kubeadm's.
	ClusterIP string
	// Domain is the cluster domain; default cluster.local.
	Domain string
	// Replicas; default 2, as kubeadm's.
	Replicas int32
}

// corefile is the configuration kubeadm gives CoreDNS: the kubernetes
// plugin answers for the cluster domain and the reverse zones, anything
// else goes to the resolvers of the pod's resolv.conf (the node's: the
// Deployment's dnsPolicy is Default). Nothing beyond this host answers
// here, so names outside the cluster fail, after forward's timeout.
const corefile = `.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes %[1]s in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30 {
       disable success %[1]s
       disable denial %[1]s
    }
    loop
    reload
    loadbalance
}
`

// DNSClusterIP is the address kubeadm gives the kube-dns Service: the
// service range's tenth.
func DNSClusterIP(serviceCIDR string) (string, error) {
	ip, err := serviceIP(serviceCIDR, 10)
	if err != nil {
		return "", err
	}
	return ip.String(), nil
}

// DeployCoreDNS creates CoreDNS as kubeadm's DNS add-on: its service
// account and RBAC (list and watch of what the kubernetes plugin serves),
// the coredns ConfigMap with the Corefile, the coredns Deployment in
// kube-system (critical priority, spread over nodes, probes on /health and
// /ready, the restricted security context) and the kube-dns Service at
// the cluster DNS address (53/UDP, 53/TCP, 9153/TCP for metrics). It does
// not wait: WaitCoreDNS does.
func (c *Cluster) DeployCoreDNS(ctx context.Context, o DNSOptions) error {
	if o.Image == "" {
		o.Image = CoreDNSImage
	}
	if o.ClusterIP == "" {
		var err error
		if o.ClusterIP, err = DNSClusterIP(c.ServiceCIDR); err != nil {
			return err
		}
	}
	if o.Domain == "" {
		o.Domain = "cluster.local"
	}
	if o.Replicas == 0 {
		o.Replicas = 2
	}
	const ns = metav1.NamespaceSystem
	labels := map[string]string{"k8s-app": "kube-dns"}
	create := func(what string, err error) error {
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("coredns: create %s: %w", what, err)
		}
		return nil
	}
	core, rbac := c.admin.CoreV1(), c.admin.RbacV1()
	_, err := core.ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "coredns"}}, metav1.CreateOptions{})
	if err := create("service account", err); err != nil {
		return err
	}
	_, err = rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		},
	}, metav1.CreateOptions{})
	if err := create("cluster role", err); err != nil {
		return err
	}
	_, err = rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "system:coredns"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:coredns"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "coredns", Namespace: ns}},
	}, metav1.CreateOptions{})
	if err := create("cluster role binding", err); err != nil {
		return err
	}
	_, err = core.ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "coredns"},
		Data:       map[string]string{"Corefile": fmt.Sprintf(corefile, o.Domain)},
	}, metav1.CreateOptions{})
	if err := create("config map", err); err != nil {
		return err
	}
	_, err = c.admin.AppsV1().Deployments(ns).Create(ctx, coreDNSDeployment(o, labels), metav1.CreateOptions{})
	if err := create("deployment", err); err != nil {
		return err
	}
	_, err = core.Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "kube-dns",
			Labels:      map[string]string{"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS"},
			Annotations: map[string]string{"prometheus.io/port": "9153", "prometheus.io/scrape": "true"},
		},
		Spec: corev1.ServiceSpec{
			ClusterIP: o.ClusterIP,
			Selector:  labels,
			Ports: []corev1.ServicePort{
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
				{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
				{Name: "metrics", Port: 9153, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9153)},
			},
		},
	}, metav1.CreateOptions{})
	return create("service", err)
}

func coreDNSDeployment(o DNSOptions, labels map[string]string) *appsv1.Deployment {
	port := func(name string, n int32, proto corev1.Protocol) corev1.ContainerPort {
		return corev1.ContainerPort{Name: name, ContainerPort: n, Protocol: proto}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "coredns", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(o.Replicas),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr.To(intstr.FromInt32(1))}},
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					PriorityClassName:  "system-cluster-critical",
					ServiceAccountName: "coredns",
					// One replica per node where there are nodes enough.
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
							Weight: 100,
							PodAffinityTerm: corev1.PodAffinityTerm{
								LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
								TopologyKey:   corev1.LabelHostname,
							},
						}},
					}},
					Tolerations: []corev1.Toleration{
						{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists},
						{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule},
					},
					NodeSelector: map[string]string{corev1.LabelOSStable: "linux"},
					// The node's resolvers, not the cluster's own.
					DNSPolicy: corev1.DNSDefault,
					Containers: []corev1.Container{{
						Name:            "coredns",
						Image:           o.Image,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Args:            []string{"-conf", "/etc/coredns/Corefile"},
						Resources: corev1.ResourceRequirements{
							Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("170Mi")},
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"),
								corev1.ResourceMemory: resource.MustParse("70Mi")},
						},
						VolumeMounts: []corev1.VolumeMount{{Name: "config-volume", MountPath: "/etc/coredns", ReadOnly: true}},
						Ports: []corev1.ContainerPort{
							port("dns", 53, corev1.ProtocolUDP), port("dns-tcp", 53, corev1.ProtocolTCP),
							port("metrics", 9153, corev1.ProtocolTCP),
							port("liveness-probe", 8080, corev1.ProtocolTCP), port("readiness-probe", 8181, corev1.ProtocolTCP),
						},
						LivenessProbe: &corev1.Probe{
							ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
								Path: "/health", Port: intstr.FromString("liveness-probe"), Scheme: corev1.URISchemeHTTP}},
							InitialDelaySeconds: 60, TimeoutSeconds: 5, SuccessThreshold: 1, FailureThreshold: 5,
						},
						ReadinessProbe: &corev1.Probe{
							ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
								Path: "/ready", Port: intstr.FromString("readiness-probe"), Scheme: corev1.URISchemeHTTP}},
						},
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							Capabilities: &corev1.Capabilities{
								Add: []corev1.Capability{"NET_BIND_SERVICE"}, Drop: []corev1.Capability{"ALL"}},
							ReadOnlyRootFilesystem: ptr.To(true),
						},
					}},
					Volumes: []corev1.Volume{{Name: "config-volume", VolumeSource: corev1.VolumeSource{
						ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: "coredns"},
							Items:                []corev1.KeyToPath{{Key: "Corefile", Path: "Corefile"}},
						},
					}}},
				},
			},
		},
	}
}

// WaitCoreDNS waits until every replica of the coredns Deployment is
// available: running and ready, which CoreDNS's /ready is once its
// kubernetes plugin has listed the API through the kubernetes Service (so
// through kube-proxy and the pod network).
func (c *Cluster) WaitCoreDNS(ctx context.Context) error {
	why := "no deployment"
	for {
		d, err := c.admin.AppsV1().Deployments(metav1.NamespaceSystem).Get(ctx, "coredns", metav1.GetOptions{})
		if err == nil {
			want := ptr.Deref(d.Spec.Replicas, 1)
			if d.Status.ObservedGeneration >= d.Generation && d.Status.AvailableReplicas == want && d.Status.UpdatedReplicas == want {
				return nil
			}
			why = fmt.Sprintf("%d of %d replicas available", d.Status.AvailableReplicas, want)
			if pods, err := c.admin.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"}); err == nil {
				var states []string
				for _, p := range pods.Items {
					states = append(states, fmt.Sprintf("%s on %q: %s %s", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Message))
				}
				why += "; pods: " + strings.Join(states, ", ")
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("coredns: %s: %w", why, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// serviceIP is the range's address at offset i.
func serviceIP(cidr string, i int) (net.IP, error) {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil, fmt.Errorf("service CIDR: %w", err)
	}
	if n.IP.To4() == nil {
		return nil, fmt.Errorf("service CIDR %s: IPv4 only", cidr)
	}
	return nthIP(n, i), nil
}
