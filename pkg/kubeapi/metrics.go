package kubeapi

import (
	"context"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// requestResults counts the agent's requests to the API server as the
// kubelet's rest_client_requests_total does (by code, method and host):
// what the request-rate figures of node mode are read from.
type requestResults struct{ c *prometheus.CounterVec }

func (r requestResults) Increment(_ context.Context, code, method, host string) {
	r.c.WithLabelValues(code, method, host).Inc()
}

var registerOnce sync.Once

// RegisterClientMetrics puts client-go's request counter in reg. client-go
// takes one registration per process; later calls do nothing.
func RegisterClientMetrics(reg prometheus.Registerer) {
	registerOnce.Do(func() {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rest_client_requests_total",
			Help: "Requests to the API server, by status code, method and host."}, []string{"code", "method", "host"})
		reg.MustRegister(c)
		clientmetrics.Register(clientmetrics.RegisterOpts{RequestResult: requestResults{c}})
	})
}
