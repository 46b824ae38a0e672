package app

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/config"
	"github.com/classic-kubelet/kubelet/pkg/kubeapi"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/certificate"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/events"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/network"
	"github.com/classic-kubelet/kubelet/pkg/kubelet/nodestatus"
)

// userAgent names the agent to the API server (its audit log and request
// logs), as the kubelet's does.
func userAgent() string {
	return fmt.Sprintf("classic-kubelet/%s (%s/%s)", Version, runtime.GOOS, runtime.GOARCH)
}

// nodeMode is the agent as a node of the cluster --kubeconfig names.
type nodeMode struct {
	client   kubernetes.Interface
	server   string
	services *kubeapi.Services
	objects  *kubeapi.Objects
	bundles  *kubeapi.TrustBundles
	// certs and rotator keep the client certificate (TLS bootstrap,
	// --rotate-certificates); nil when --kubeconfig's credentials are
	// used as they are.
	certs   *certificate.Client
	rotator *certificate.Rotator
}

func newNodeMode(o *Options, reg prometheus.Registerer) (*nodeMode, error) {
	if o.BootstrapKubeconfig == "" && !o.RotateCertificates {
		client, cfg, err := kubeapi.NewClient(o.Kubeconfig, o.KubeAPIQPS, o.KubeAPIBurst, userAgent())
		if err != nil {
			return nil, err
		}
		return &nodeMode{client: client, server: cfg.Host, services: kubeapi.NewServices(client), objects: kubeapi.NewObjects(client),
			bundles: kubeapi.NewTrustBundles(client)}, nil
	}
	cfgs, why, err := certificate.LoadClientConfigs(o.Kubeconfig, o.BootstrapKubeconfig, o.CertDir, time.Now())
	if err != nil {
		return nil, err
	}
	if cfgs.Bootstrapped {
		klog.Infof("TLS bootstrap (%s): requesting a client certificate with --bootstrap-kubeconfig %s into %s; --kubeconfig %s now uses it",
			why, o.BootstrapKubeconfig, o.CertDir, o.Kubeconfig)
	}
	certs, err := certificate.NewClient(certificate.ClientConfig{NodeName: o.HostnameOverride, CertDir: o.CertDir, Configs: cfgs,
		Rotate: o.RotateCertificates, Registry: reg})
	if err != nil {
		return nil, err
	}
	cfg, rotator, err := certificate.RotatingConfig(cfgs.Client, certs.Current)
	if err != nil {
		return nil, err
	}
	client, err := kubeapi.NewClientForConfig(cfg, o.KubeAPIQPS, o.KubeAPIBurst, userAgent())
	if err != nil {
		return nil, err
	}
	return &nodeMode{client: client, server: cfg.Host, services: kubeapi.NewServices(client), objects: kubeapi.NewObjects(client),
		bundles: kubeapi.NewTrustBundles(client), certs: certs, rotator: rotator}, nil
}

// start runs the node's parts until ctx ends: the pods bound to the node as
// a source, the Node and its Lease, pod statuses and deletions, events.
// None of them waits for the API server: it may be down at start.
func (n *nodeMode) start(ctx context.Context, o *Options, merger *config.Merger, pods kubeapi.LocalPods,
	recorder *events.Recorder, node *nodestatus.Builder, podNetwork *network.Manager, goRun func(func())) {
	if n.certs != nil {
		goRun(func() { n.certs.Run(ctx) })
		goRun(func() { n.rotator.Run(ctx) })
	}
	taints, _ := ParseTaints(o.RegisterWithTaints) // validated
	src := config.NewAPIServerSource(n.client, o.HostnameOverride, merger)
	reporter := kubeapi.NewNodeReporter(n.client, kubeapi.NodeConfig{
		Name: o.HostnameOverride, Register: o.RegisterNode, Labels: o.NodeLabels, Taints: taints,
		UpdateFrequency: o.NodeStatusUpdateFrequency, ReportFrequency: o.NodeStatusReportFrequency,
		LeaseDuration: o.NodeLeaseDurationSeconds, Port: int32(o.Port), Server: n.server,
		PodCIDRs: podNetwork.SetPodCIDRs,
	}, node.Build)
	writer := kubeapi.NewStatusWriter(n.client, pods, src, &kubeapi.Mirrors{
		NodeUID: reporter.NodeUID,
		SourcesSeen: func() bool {
			for _, s := range configuredSources(o) {
				if s != api.SourceAPIServer && !merger.Seen(s) {
					return false
				}
			}
			return true
		},
		Refused: func(pod *v1.Pod, why string) {
			recorder.Event(events.PodRef(pod, ""), true, "FailedMirrorPod",
				"No mirror pod in the API server: %s, which NodeRestriction refuses for mirror pods", why)
		},
	})
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: n.client.CoreV1().Events("")})
	apiRecorder := broadcaster.NewRecorder(scheme.Scheme, v1.EventSource{Component: "kubelet", Host: o.HostnameOverride})
	recorder.SendToAPI(apiRecorder)
	reporter.RecordEvents(apiRecorder)
	goRun(func() { src.Run(ctx) })
	goRun(func() { n.services.Run(ctx) })
	goRun(func() { n.bundles.Run(ctx) })
	goRun(func() { reporter.Run(ctx) })
	goRun(func() { writer.Run(ctx) })
	goRun(func() { <-ctx.Done(); broadcaster.Shutdown() })
}
