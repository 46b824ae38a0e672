// Command metricsserver scrapes one node's /metrics/resource with
// metrics-server's own resource client (sigs.k8s.io/metrics-server, the
// code metrics-server runs against each kubelet) and prints what it
// decoded, as JSON: the node's point and each pod's containers. It is a
// module of its own: metrics-server needs newer client-go and apiserver
// than the agent's.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/metrics-server/pkg/scraper/client"
	"sigs.k8s.io/metrics-server/pkg/scraper/client/resource"
)

type podPoint struct {
	Containers map[string]uint64 `json:"containers"` // container: memory working set
}

type result struct {
	Node      map[string]uint64   `json:"node"` // node name: memory working set
	NodeCPU   map[string]uint64   `json:"nodeCPU"`
	Pods      map[string]podPoint `json:"pods"` // namespace/name
	ScrapeErr string              `json:"error,omitempty"`
}

func main() {
	port := flag.Int("port", 10255, "the agent's port serving /metrics/resource")
	node := flag.String("node", "", "the node's name")
	flag.Parse()
	c, err := resource.NewForConfig(&client.KubeletClientConfig{
		Client:              rest.Config{Timeout: 10 * time.Second},
		AddressTypePriority: []corev1.NodeAddressType{corev1.NodeInternalIP},
		Scheme:              "http",
		DefaultPort:         *port,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: *node},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}}}
	out := result{Node: map[string]uint64{}, NodeCPU: map[string]uint64{}, Pods: map[string]podPoint{}}
	batch, err := c.GetMetrics(context.Background(), n)
	if err != nil {
		out.ScrapeErr = err.Error()
	} else {
		for name, p := range batch.Nodes {
			out.Node[name] = p.MemoryUsage
			out.NodeCPU[name] = p.CumulativeCPUUsed
		}
		for key, p := range batch.Pods {
			pp := podPoint{Containers: map[string]uint64{}}
			for name, cp := range p.Containers {
				pp.Containers[name] = cp.MemoryUsage
			}
			out.Pods[key.String()] = pp
		}
	}
	_ = json.NewEncoder(os.Stdout).Encode(out)
}
