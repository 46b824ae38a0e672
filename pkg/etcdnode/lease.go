// Package etcdnode is what an agent writes about its node to etcd, beside
// the pods it reads from there: a lease key that is both its heartbeat and
// its claim on the node name, a v1 Node with capacity and conditions, and
// each pod's status. Every write is conditional on the lease key still
// being this agent's, so an agent that lost its name never overwrites the
// keys of the agent that holds it now.
//
// Keys, under <prefix>/<node>/:
//
//	lease               Holder JSON, attached to an etcd lease
//	node                v1.Node JSON
//	pods/<ns>/<name>    PodReport JSON
package etcdnode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/klog/v2"

	"github.com/classic-kubelet/kubelet/pkg/safefile"
)

// Holder names who holds a node name: an instance ID that survives agent
// restarts (kept in the root dir), the host and its boot.
type Holder struct {
	InstanceID string    `json:"instanceID"`
	Hostname   string    `json:"hostname"`
	BootID     string    `json:"bootID"`
	PID        int       `json:"pid"`
	Since      time.Time `json:"since"`
}

func (h Holder) String() string {
	return fmt.Sprintf("instance %s on host %s (boot %s, pid %d)", h.InstanceID, h.Hostname, h.BootID, h.PID)
}

// NewHolder is this agent: its instance ID is read from (or, the first
// time, written to) rootDir/instance-id.
func NewHolder(rootDir string) (Holder, error) {
	path := filepath.Join(rootDir, "instance-id")
	id := ""
	if data, err := os.ReadFile(path); err == nil {
		id = strings.TrimSpace(string(data))
	} else if !errors.Is(err, os.ErrNotExist) {
		return Holder{}, fmt.Errorf("instance ID: %w", err)
	}
	if id == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
		if err := safefile.WriteAtomic(path, []byte(id+"\n")); err != nil {
			return Holder{}, fmt.Errorf("instance ID: %w", err)
		}
	}
	host, _ := os.Hostname()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return Holder{InstanceID: id, Hostname: host, BootID: strings.TrimSpace(string(boot)), PID: os.Getpid()}, nil
}

// TakenError is a node name held by another live agent.
type TakenError struct {
	Node   string
	Holder Holder
}

func (e *TakenError) Error() string {
	return fmt.Sprintf("node name %q is held in etcd by %s: give each agent its own --hostname-override", e.Node, e.Holder)
}

// Lease claims the node name and keeps the claim alive.
type Lease struct {
	c      *clientv3.Client
	node   string
	key    string
	holder Holder
	ttl    time.Duration
	renew  time.Duration

	mu    sync.Mutex
	id    clientv3.LeaseID // 0 when not held
	gen   int              // counts claims and recoveries from outages: writers reconcile on a new one
	taken *TakenError      // set while another agent holds the name
}

// NewLease returns the lease of node under prefix for holder.
func NewLease(c *clientv3.Client, prefix, node string, holder Holder, ttl, renew time.Duration) *Lease {
	return &Lease{c: c, node: node, key: NodeKey(prefix, node) + "/lease", holder: holder, ttl: ttl, renew: renew}
}

// NodeKey is the directory of a node's keys.
func NodeKey(prefix, node string) string { return prefix + "/" + node }

// Claim takes the node name: the key is created with a fresh lease, or taken
// over if it is this instance's from before (an agent restart). A name held
// by another live agent is a *TakenError.
func (l *Lease) Claim(ctx context.Context) error {
	ttl := int64(l.ttl / time.Second)
	for {
		grant, err := l.c.Grant(ctx, max(ttl, 1))
		if err != nil {
			return fmt.Errorf("etcd lease: %w", err)
		}
		h := l.holder
		h.Since = time.Now().UTC().Truncate(time.Second)
		val, _ := json.Marshal(h)
		resp, err := l.c.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", 0)).
			Then(clientv3.OpPut(l.key, string(val), clientv3.WithLease(grant.ID))).
			Else(clientv3.OpGet(l.key)).Commit()
		if err != nil {
			l.revoke(grant.ID)
			return fmt.Errorf("claim %s: %w", l.key, err)
		}
		if !resp.Succeeded {
			kvs := resp.Responses[0].GetResponseRange().Kvs
			if len(kvs) == 0 {
				l.revoke(grant.ID)
				continue // gone meanwhile: try again
			}
			var other Holder
			_ = json.Unmarshal(kvs[0].Value, &other)
			if other.InstanceID != l.holder.InstanceID {
				l.revoke(grant.ID)
				taken := &TakenError{Node: l.node, Holder: other}
				l.mu.Lock()
				l.id, l.taken = 0, taken
				l.mu.Unlock()
				return taken
			}
			// Ours, from before a restart or a lapse: take it over, exactly
			// that version of it.
			resp, err = l.c.Txn(ctx).
				If(clientv3.Compare(clientv3.ModRevision(l.key), "=", kvs[0].ModRevision)).
				Then(clientv3.OpPut(l.key, string(val), clientv3.WithLease(grant.ID))).Commit()
			if err != nil || !resp.Succeeded {
				l.revoke(grant.ID)
				if err != nil {
					return fmt.Errorf("claim %s: %w", l.key, err)
				}
				continue
			}
			if old := clientv3.LeaseID(kvs[0].Lease); old != 0 {
				l.revoke(old)
			}
		}
		l.mu.Lock()
		l.id, l.taken = grant.ID, nil
		l.gen++
		l.mu.Unlock()
		return nil
	}
}

func (l *Lease) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, _ = l.c.Revoke(ctx, id)
}

// Run renews the lease every renew interval until ctx ends. A lease that
// expired (etcd was out of reach longer than the TTL) is claimed again; if
// another agent took the name meanwhile, this one stops writing and keeps
// asking, logging the holder.
func (l *Lease) Run(ctx context.Context) {
	t := time.NewTicker(l.renew)
	defer t.Stop()
	failing := false // the last renewal failed: etcd was out of reach
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		l.mu.Lock()
		id := l.id
		l.mu.Unlock()
		if id != 0 {
			rctx, cancel := context.WithTimeout(ctx, l.renew)
			_, err := l.c.KeepAliveOnce(rctx, id)
			cancel()
			switch {
			case err == nil && failing:
				// Back from an outage: what was written meanwhile by
				// others is read again.
				klog.Infof("Node lease %s renewed: etcd answers again", l.key)
				l.mu.Lock()
				l.gen++
				l.mu.Unlock()
				failing = false
				continue
			case err == nil:
				continue
			case !errors.Is(err, rpctypes.ErrLeaseNotFound):
				failing = true
				if ctx.Err() == nil {
					klog.V(2).Infof("Node lease %s: renew: %v (retrying)", l.key, err)
				}
				continue
			}
			failing = false
			klog.Warningf("Node lease %s expired (etcd out of reach longer than %v): claiming the name again", l.key, l.ttl)
			l.mu.Lock()
			l.id = 0
			l.mu.Unlock()
		}
		cctx, cancel := context.WithTimeout(ctx, l.renew)
		err := l.Claim(cctx)
		cancel()
		var taken *TakenError
		switch {
		case errors.As(err, &taken):
			klog.Errorf("Not writing to etcd: %v", err)
		case err != nil && ctx.Err() == nil:
			klog.V(2).Infof("Node lease %s: %v (retrying)", l.key, err)
		case err == nil:
			klog.Infof("Node lease %s taken again", l.key)
		}
	}
}

// guard is the condition of every write: the lease key is still attached
// to this agent's lease. ok is false while the name is not held.
func (l *Lease) guard() (cmp clientv3.Cmp, gen int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.id == 0 {
		return clientv3.Cmp{}, l.gen, false
	}
	return clientv3.Compare(clientv3.LeaseValue(l.key), "=", int64(l.id)), l.gen, true
}

// Held reports whether the agent holds its name, and if not, who does (nil
// when no one is known to).
func (l *Lease) Held() (bool, *TakenError) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.id != 0, l.taken
}

// lost is called by a writer whose guarded write failed: the key is no
// longer this lease's.
func (l *Lease) lost(gen int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gen == gen && l.id != 0 {
		klog.Warningf("Node lease %s is no longer this agent's: claiming it again", l.key)
		l.id = 0
	}
}
