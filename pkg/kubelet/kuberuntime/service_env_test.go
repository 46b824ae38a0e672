package kuberuntime

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/classic-kubelet/kubelet/pkg/api"
)

type fakeServices struct {
	svcs   []*v1.Service
	synced bool
}

func (f fakeServices) Services() ([]*v1.Service, bool) { return f.svcs, f.synced }

func svc(ns, name, ip string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ServiceSpec{ClusterIP: ip, Ports: ports}}
}

func TestServiceEnv(t *testing.T) {
	master := svc("default", "kubernetes", "10.96.0.1", v1.ServicePort{Name: "https", Port: 443, Protocol: v1.ProtocolTCP})
	web := svc("ns", "my-web", "10.96.0.9", v1.ServicePort{Port: 80}, v1.ServicePort{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP})
	headless := svc("ns", "headless", v1.ClusterIPNone, v1.ServicePort{Port: 80})
	other := svc("elsewhere", "db", "10.96.0.7", v1.ServicePort{Port: 5432})
	masterVars := []string{"KUBERNETES_SERVICE_HOST=10.96.0.1", "KUBERNETES_SERVICE_PORT=443", "KUBERNETES_SERVICE_PORT_HTTPS=443",
		"KUBERNETES_PORT=tcp://10.96.0.1:443", "KUBERNETES_PORT_443_TCP=tcp://10.96.0.1:443", "KUBERNETES_PORT_443_TCP_PROTO=tcp",
		"KUBERNETES_PORT_443_TCP_PORT=443", "KUBERNETES_PORT_443_TCP_ADDR=10.96.0.1"}
	webVars := []string{"MY_WEB_SERVICE_HOST=10.96.0.9", "MY_WEB_SERVICE_PORT=80", "MY_WEB_SERVICE_PORT_DNS=53",
		"MY_WEB_PORT=tcp://10.96.0.9:80", "MY_WEB_PORT_80_TCP=tcp://10.96.0.9:80", "MY_WEB_PORT_80_TCP_PROTO=tcp",
		"MY_WEB_PORT_80_TCP_PORT=80", "MY_WEB_PORT_80_TCP_ADDR=10.96.0.9",
		"MY_WEB_PORT_53_UDP=udp://10.96.0.9:53", "MY_WEB_PORT_53_UDP_PROTO=udp", "MY_WEB_PORT_53_UDP_PORT=53", "MY_WEB_PORT_53_UDP_ADDR=10.96.0.9"}
	all := []*v1.Service{master, web, headless, other}
	for _, tc := range []struct {
		name    string
		lister  ServiceLister
		links   *bool
		source  string
		want    []string
		wantErr bool
	}{
		{"standalone", nil, nil, api.SourceFile, nil, false},
		{"namespace and master", fakeServices{all, true}, nil, api.SourceAPIServer, append(append([]string{}, masterVars...), webVars...), false},
		{"links off: master only", fakeServices{all, true}, ptr.To(false), api.SourceAPIServer, masterVars, false},
		{"not synced: API pod waits", fakeServices{nil, false}, nil, api.SourceAPIServer, nil, true},
		{"not synced: static pod runs", fakeServices{nil, false}, nil, api.SourceFile, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Manager{cfg: Config{Services: tc.lister}}
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Annotations: map[string]string{api.ConfigSourceAnnotation: tc.source}},
				Spec: v1.PodSpec{EnableServiceLinks: tc.links}}
			vars, err := m.serviceEnv(pod)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v", err)
			}
			var got []string
			for _, v := range vars {
				got = append(got, v.Name+"="+v.Value)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got\n%v\nwant\n%v", got, tc.want)
			}
		})
	}
}
