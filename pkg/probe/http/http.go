// Package http probes with an HTTP GET: a status from 200 to 399 is success
// (from 300, a redirect not followed, with a warning).
package http

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/classic-kubelet/kubelet/pkg/probe"
)

// Prober sends HTTP probes. It follows no redirect to another host and
// verifies no certificate, as Kubernetes.
type Prober struct {
	client *http.Client
}

// New returns a prober.
func New() *Prober {
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // probes never verify, as Kubernetes
		DisableKeepAlives: true,
		Proxy:             nil,
	}
	return &Prober{client: &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 10 || req.URL.Host != via[0].URL.Host {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}}
}

// Probe GETs u with header within timeout.
func (p *Prober) Probe(ctx context.Context, u *url.URL, header http.Header, timeout time.Duration) (probe.Result, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return probe.Failure, "", err
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if header.Get("Host") != "" {
		req.Host = header.Get("Host")
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "classic-kubelet-probe")
	}
	resp, err := p.client.Do(req)
	if err != nil {
		// Refused, reset or timed out: the check failed, as Kubernetes counts it.
		return probe.Failure, err.Error(), nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, probe.MaxOutput))
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		// A redirect not followed (to another host): a success with a
		// warning, as the kubelet reports it.
		return probe.Warning, "Probe terminated redirects, Response body: " + string(body), nil
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return probe.Success, string(body), nil
	}
	return probe.Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode), nil
}
