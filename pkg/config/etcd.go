package config

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/classic-kubelet/kubelet/pkg/api"
	"github.com/classic-kubelet/kubelet/pkg/backoff"
)

const (
	// DefaultEtcdPrefix is where the classic agent found its pods:
	// <prefix>/<node name>/kubelet.
	DefaultEtcdPrefix = "/registry/hosts"
	// etcdTimeout bounds one read.
	etcdTimeout = 5 * time.Second
	// keepAliveTime and keepAliveTimeout: gRPC pings on an idle link.
	keepAliveTime    = 5 * time.Second
	keepAliveTimeout = 3 * time.Second
)

// etcdRetry is the back-off between failed reads (started over by a read
// that succeeds): a change made during an outage applies within its Max of
// etcd answering again.
var etcdRetry = backoff.Policy{Initial: 250 * time.Millisecond, Max: 2 * time.Second}

// EtcdKey is the key holding a node's pods.
func EtcdKey(prefix, node string) string { return prefix + "/" + node + "/kubelet" }

// EtcdTLS names the PEM files for a TLS connection to etcd; all empty means
// plain connections.
type EtcdTLS struct{ CAFile, CertFile, KeyFile string }

// NewEtcdClient connects to etcd. The client's own logger is kept at warning
// level: its info logs would drown the agent's.
func NewEtcdClient(endpoints []string, t EtcdTLS) (*clientv3.Client, error) {
	lc := zap.NewProductionConfig()
	lc.Level = zap.NewAtomicLevelAt(zap.WarnLevel)
	cfg := clientv3.Config{Endpoints: endpoints, DialTimeout: etcdTimeout, LogConfig: &lc,
		// A link that died silently (a partition, a dropped route) is
		// noticed within keepAliveTime + keepAliveTimeout, and the client
		// moves to another endpoint.
		DialKeepAliveTime: keepAliveTime, DialKeepAliveTimeout: keepAliveTimeout,
		// Reconnect attempts toward an endpoint back off at most half a
		// second: a healed link is used again within that (a change made
		// during a cut is to run within 2 s of its healing, and the pod's
		// start takes most of that on a busy node), for a dial every half
		// second while it is down.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: grpcbackoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 500 * time.Millisecond},
		})},
	}
	if t != (EtcdTLS{}) {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if t.CertFile != "" || t.KeyFile != "" {
			cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("etcd client certificate: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		if t.CAFile != "" {
			pem, err := os.ReadFile(t.CAFile)
			if err != nil {
				return nil, fmt.Errorf("etcd CA: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("etcd CA %s: no certificates", t.CAFile)
			}
			tc.RootCAs = pool
		}
		cfg.TLS = tc
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	return c, nil
}

// EtcdSource reads the node's key from etcd and watches it. An absent or
// deleted key means zero pods; an empty or invalid value, or etcd being
// unreachable, keeps the last good snapshot. It reads, watches from the
// read's revision + 1, and reads again after a compaction, a broken watch or
// every resync period (a safety net).
type EtcdSource struct {
	client  *clientv3.Client
	key     string
	node    string
	resync  time.Duration
	sink    Sink
	lastErr string // owned by Run's goroutine
}

// NewEtcdSource returns a source for key.
func NewEtcdSource(client *clientv3.Client, key, node string, resync time.Duration, sink Sink) *EtcdSource {
	return &EtcdSource{client: client, key: key, node: node, resync: resync, sink: sink}
}

// Run reads and watches until ctx is cancelled.
func (s *EtcdSource) Run(ctx context.Context) {
	clk := clock.RealClock{}
	retry := backoff.New[backoff.One](etcdRetry, clk)
	for ctx.Err() == nil {
		rev, err := s.read(ctx)
		if err == nil {
			retry.Reset(backoff.One{})
			err = s.watch(ctx, rev)
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.fail(err)
			select {
			case <-ctx.Done():
				return
			case <-clk.After(retry.Next(backoff.One{}, clk.Now())):
			}
		}
	}
}

// read applies the key's current value and returns the revision read.
func (s *EtcdSource) read(ctx context.Context) (int64, error) {
	cctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), etcdTimeout)
	defer cancel()
	resp, err := s.client.Get(cctx, s.key)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", s.key, err)
	}
	var value []byte
	if len(resp.Kvs) > 0 {
		value = resp.Kvs[0].Value
	}
	s.apply(ctx, len(resp.Kvs) > 0, value)
	return resp.Header.Revision, nil
}

// watch applies changes of the key from rev + 1 on. It returns nil when a
// fresh read is due (compaction, resync), an error when the watch broke.
func (s *EtcdSource) watch(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	ch := s.client.Watch(wctx, s.key, clientv3.WithRev(rev+1))
	resync := time.NewTimer(s.resync)
	defer resync.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-resync.C:
			return nil
		case resp, ok := <-ch:
			if !ok {
				return errors.New("watch closed")
			}
			if resp.CompactRevision != 0 {
				klog.V(2).Infof("etcd source: watch compacted at %d; reading again", resp.CompactRevision)
				return nil
			}
			if err := resp.Err(); err != nil {
				return fmt.Errorf("watch %s: %w", s.key, err)
			}
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypeDelete {
					s.apply(ctx, false, nil)
				} else {
					s.apply(ctx, true, ev.Kv.Value)
				}
			}
		}
	}
}

// apply turns one value of the key into a snapshot.
func (s *EtcdSource) apply(ctx context.Context, exists bool, value []byte) {
	if !exists {
		s.ok()
		s.sink.Set(ctx, api.SourceEtcd, nil)
		return
	}
	pods, ignored, err := api.Parse(value, s.node, api.SourceEtcd)
	if errors.Is(err, api.ErrEmpty) {
		err = errors.New("empty value (delete the key, or write an empty list, for zero pods)")
	}
	if err != nil {
		s.fail(fmt.Errorf("%s: %w", s.key, err))
		return
	}
	for _, f := range ignored {
		klog.Infof("etcd source: %s is ignored by this agent", f)
	}
	s.ok()
	s.sink.Set(ctx, api.SourceEtcd, pods)
}

func (s *EtcdSource) ok() {
	s.sink.SetError(api.SourceEtcd, nil)
	s.lastErr = ""
}

func (s *EtcdSource) fail(err error) {
	s.sink.SetError(api.SourceEtcd, err)
	if err.Error() != s.lastErr {
		klog.Errorf("etcd source: %v (keeping its last good pods)", err)
	}
	s.lastErr = err.Error()
}
