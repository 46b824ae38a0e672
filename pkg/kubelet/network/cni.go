package network

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	cnitypes "github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/classic-kubelet/kubelet/pkg/api"
	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
	"github.com/classic-kubelet/kubelet/pkg/safefile"
)

const (
	// ifName is the pod's interface, as the kubelet's.
	ifName = "eth0"
	// cniTimeout bounds one ADD or DEL of a network list: cri-dockerd's
	// 220 s (an IPAM plugin may wait for a lease).
	cniTimeout = 220 * time.Second
)

// confExtensions are the network configuration files read, as libcni's
// and cri-dockerd's: the first valid one in lexical order is the network.
var confExtensions = []string{".conf", ".conflist", ".json"}

// cniNetwork attaches sandboxes through libcni. Its configuration is
// reloaded when a file of the conf or bin directories changes (a stat of
// each per check); what it attached is recorded on disk, one file per
// sandbox, before each ADD, so a crash between the ADD and the record
// leaks nothing.
type cniNetwork struct {
	confDir, cacheDir, stateDir string
	binDirs                     []string
	cni                         *libcni.CNIConfig

	loadMu sync.Mutex // held by a load of the configuration

	mu        sync.Mutex // guards what follows
	stamp     string     // the directories as last loaded (see fingerprint)
	list      *libcni.NetworkConfigList
	loadErr   error
	podCIDRs  []string                  // the Node's (node mode), for the ipRanges capability
	sandboxes map[string]*sandboxRecord // by sandbox ID: attached, or being attached
	ips       map[string]string         // by sandbox ID: its IP, once known

	detaching sync.Map // sandbox ID → *sync.Mutex held by its detachment
}

// sandboxRecord is what the agent keeps of a sandbox it attaches: whose it
// is (the CNI args of a DEL when libcni cached nothing) and the network it
// joined (where libcni's cache has the ADD's configuration and result).
type sandboxRecord struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`
	Network   string    `json:"network"`
	IfName    string    `json:"ifName"`
}

func newCNI(cfg Config) (*cniNetwork, error) {
	var bins []string
	for _, d := range cfg.BinDirs {
		if d != "" {
			bins = append(bins, d)
		}
	}
	c := &cniNetwork{confDir: cfg.ConfDir, cacheDir: cfg.CacheDir, binDirs: bins,
		stateDir:  filepath.Join(cfg.StateDir, "sandboxes"),
		cni:       libcni.NewCNIConfigWithCacheDir(bins, cfg.CacheDir, nil),
		sandboxes: map[string]*sandboxRecord{}, ips: map[string]string{}}
	entries, err := os.ReadDir(c.stateDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read the CNI sandbox records: %w", err)
	}
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok {
			continue
		}
		data, err := os.ReadFile(filepath.Join(c.stateDir, e.Name()))
		rec := &sandboxRecord{}
		if err == nil {
			err = json.Unmarshal(data, rec)
		}
		if err != nil {
			// The sandbox is still detached (with the current network and
			// no pod names) rather than forgotten.
			klog.Errorf("CNI: sandbox record %s: %v", e.Name(), err)
			rec = &sandboxRecord{IfName: ifName}
		}
		c.sandboxes[id] = rec
	}
	return c, nil
}

// network is the network pods join now: the first valid configuration in
// the conf directory, reloaded when the directories changed.
func (c *cniNetwork) network() (*libcni.NetworkConfigList, error) {
	stamp := c.fingerprint()
	// Loads take turns, outside mu: a load runs the plugins (for their
	// versions), and mu guards what the relist reads (podIP).
	c.loadMu.Lock()
	defer c.loadMu.Unlock()
	c.mu.Lock()
	list, err, loaded := c.list, c.loadErr, c.stamp == stamp && (c.list != nil || c.loadErr != nil)
	c.mu.Unlock()
	if loaded {
		return list, err
	}
	list, err = c.load()
	c.mu.Lock()
	c.list, c.loadErr, c.stamp = list, err, stamp
	c.mu.Unlock()
	if err != nil {
		klog.Errorf("CNI: %v", err)
	} else {
		klog.Infof("CNI: network %q (%d plugins) from %s", list.Name, len(list.Plugins), c.confDir)
	}
	return list, err
}

// fingerprint names, sizes and modification times of the conf and bin
// directories' files: a configuration is loaded (and its plugins run for
// their versions) again only when it changes.
func (c *cniNetwork) fingerprint() string {
	h := sha256.New()
	for _, dir := range append([]string{c.confDir}, c.binDirs...) {
		entries, _ := os.ReadDir(dir)
		fmt.Fprintf(h, "%s\n", dir)
		for _, e := range entries {
			if fi, err := os.Stat(filepath.Join(dir, e.Name())); err == nil {
				fmt.Fprintf(h, "%s %d %d\n", e.Name(), fi.Size(), fi.ModTime().UnixNano())
			}
		}
	}
	return string(h.Sum(nil))
}

// load reads the first valid network configuration, as cri-dockerd does:
// files in lexical order, a .conf upconverted to a list, a list without
// plugins skipped, and each plugin's binary found and asked its versions.
func (c *cniNetwork) load() (*libcni.NetworkConfigList, error) {
	files, err := libcni.ConfFiles(c.confDir, confExtensions)
	if err != nil {
		return nil, fmt.Errorf("cni config uninitialized: read %s: %w", c.confDir, err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("cni config uninitialized: no networks found in %s", c.confDir)
	}
	sort.Strings(files)
	var errs []string
	for _, file := range files {
		list, err := readConf(file)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, err = c.cni.ValidateNetworkList(ctx, list)
			cancel()
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", filepath.Base(file), err))
			continue
		}
		return list, nil
	}
	return nil, fmt.Errorf("cni config uninitialized: no valid networks found in %s: %s", c.confDir, strings.Join(errs, "; "))
}

// readConf reads a network configuration file as a list.
func readConf(file string) (*libcni.NetworkConfigList, error) {
	if strings.HasSuffix(file, ".conflist") {
		list, err := libcni.NetworkConfFromFile(file)
		if err != nil {
			return nil, err
		}
		if len(list.Plugins) == 0 {
			return nil, errors.New("no plugins in the list")
		}
		return list, nil
	}
	conf, err := libcni.ConfFromFile(file)
	if err != nil {
		return nil, err
	}
	if conf.Network.Type == "" {
		return nil, errors.New("no 'type'; perhaps this is a .conflist?")
	}
	return libcni.ConfListFromConf(conf)
}

// setUp attaches a running sandbox (see Manager.SetUp).
func (c *cniNetwork) setUp(ctx context.Context, pod *v1.Pod, id string, pid int) (string, error) {
	list, err := c.network()
	if err != nil {
		return "", notReady(err)
	}
	// The pod's earlier sandboxes have stopped (the runtime manager stops
	// them before it makes a new one): their IPs and host ports go first,
	// or the new sandbox's ports would be shadowed by their rules.
	c.tearDownPod(ctx, pod.UID, id)
	rec := &sandboxRecord{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, Network: list.Name, IfName: ifName}
	if err := c.record(id, rec); err != nil {
		return "", err
	}
	netns, err := pinNetNS(c.netnsDir(), id, pid)
	if err != nil {
		return "", c.failed(ctx, pod, id, rec, err)
	}
	rt, err := c.runtimeConf(pod, id, netns)
	if err != nil {
		return "", c.failed(ctx, pod, id, rec, err)
	}
	actx, cancel := context.WithTimeout(ctx, cniTimeout)
	res, err := c.cni.AddNetworkList(actx, list, rt)
	cancel()
	if err != nil {
		return "", c.failed(ctx, pod, id, rec, err)
	}
	ip, err := resultIP(res)
	if err != nil {
		return "", c.failed(ctx, pod, id, rec, err)
	}
	c.mu.Lock()
	c.ips[id] = ip
	c.mu.Unlock()
	klog.V(2).Infof("Pod %s: sandbox %s attached to network %q: %s", api.Key(pod), kubecontainer.ShortID(id), list.Name, ip)
	return ip, nil
}

// failed undoes a failed attachment (the kubelet stops a sandbox whose
// RunPodSandbox failed, and with it its network) and returns the
// sandbox's error, in cri-dockerd's words.
func (c *cniNetwork) failed(ctx context.Context, pod *v1.Pod, id string, rec *sandboxRecord, err error) error {
	if derr := c.del(ctx, id, rec); derr != nil {
		klog.Errorf("Pod %s: detach sandbox %s after its failed attachment: %v", api.Key(pod), kubecontainer.ShortID(id), derr)
	}
	return fmt.Errorf("failed to set up sandbox container %q network for pod %q: networkPlugin cni failed to set up pod \"%s_%s\" network: %w",
		id, pod.Name, pod.Name, pod.Namespace, err)
}

// runtimeConf is what the plugins are told of a sandbox: the kubelet's CNI
// args, and the capabilities the pod asks for — its host ports
// (portMappings), its bandwidth annotations, the node's pod CIDRs
// (ipRanges) — of which libcni hands each plugin those it declares.
func (c *cniNetwork) runtimeConf(pod *v1.Pod, id, netns string) (*libcni.RuntimeConf, error) {
	rt := &libcni.RuntimeConf{ContainerID: id, NetNS: netns, IfName: ifName,
		Args: podArgs(pod.Namespace, pod.Name, pod.UID, id), CapabilityArgs: map[string]any{"portMappings": portMappings(pod)}}
	bw, err := podBandwidth(pod.Annotations)
	if err != nil {
		return nil, err
	}
	if bw != nil {
		rt.CapabilityArgs["bandwidth"] = bw
	}
	c.mu.Lock()
	cidrs := c.podCIDRs
	c.mu.Unlock()
	if len(cidrs) > 0 {
		var ranges [][]map[string]string
		for _, cidr := range cidrs {
			ranges = append(ranges, []map[string]string{{"subnet": cidr}})
		}
		rt.CapabilityArgs["ipRanges"] = ranges
	}
	return rt, nil
}

// podArgs are the kubelet's CNI_ARGS (IgnoreUnknown: plugins that know none
// of them must not fail).
func podArgs(namespace, name string, uid types.UID, id string) [][2]string {
	return [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", namespace}, {"K8S_POD_NAME", name},
		{"K8S_POD_INFRA_CONTAINER_ID", id}, {"K8S_POD_UID", string(uid)}}
}

// portMapping is one entry of the portMappings capability.
type portMapping struct {
	HostPort      int32  `json:"hostPort"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"hostIP,omitempty"`
}

// portMappings are the pod's host ports.
func portMappings(pod *v1.Pod) []portMapping {
	out := []portMapping{}
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			proto := strings.ToLower(string(p.Protocol))
			if proto == "" {
				proto = "tcp"
			}
			out = append(out, portMapping{HostPort: p.HostPort, ContainerPort: p.ContainerPort, Protocol: proto, HostIP: p.HostIP})
		}
	}
	return out
}

// resultIP is the first IP of an ADD's result (the pod's IP).
func resultIP(res cnitypes.Result) (string, error) {
	r, err := types100.NewResultFromResult(res)
	if err != nil {
		return "", fmt.Errorf("read the result: %w", err)
	}
	for _, ip := range r.IPs {
		if ip.Address.IP != nil {
			return ip.Address.IP.String(), nil
		}
	}
	return "", errors.New("the plugins gave the sandbox no IP")
}

// tearDown detaches a sandbox the agent attached (see Manager.TearDown).
// Two detachments of one sandbox (the start's and its pod's new sandbox's,
// say) take turns: the second finds it detached.
func (c *cniNetwork) tearDown(ctx context.Context, id string) error {
	l, _ := c.detaching.LoadOrStore(id, &sync.Mutex{})
	l.(*sync.Mutex).Lock()
	defer l.(*sync.Mutex).Unlock()
	c.mu.Lock()
	rec := c.sandboxes[id]
	c.mu.Unlock()
	if rec == nil {
		c.detaching.Delete(id)
		return nil
	}
	err := c.del(ctx, id, rec)
	if err == nil {
		c.detaching.Delete(id)
	}
	return err
}

// tearDownPod detaches the pod's sandboxes other than keep.
func (c *cniNetwork) tearDownPod(ctx context.Context, uid types.UID, keep string) {
	c.mu.Lock()
	var ids []string
	for id, rec := range c.sandboxes {
		if rec.UID == uid && id != keep {
			ids = append(ids, id)
		}
	}
	c.mu.Unlock()
	for _, id := range ids {
		if err := c.tearDown(ctx, id); err != nil {
			klog.Errorf("CNI: detach the earlier sandbox %s: %v", kubecontainer.ShortID(id), err)
		}
	}
}

// del runs CNI DEL for a sandbox that no longer runs, with the
// configuration and capabilities of its ADD as libcni cached them (else the
// current network), in its pinned network namespace (none if it is gone:
// the plugins then release what is keyed by the sandbox's ID alone — IPAM
// leases, port mappings, shaping). Then the namespace is released and the
// record goes.
func (c *cniNetwork) del(ctx context.Context, id string, rec *sandboxRecord) error {
	base := &libcni.RuntimeConf{ContainerID: id, IfName: rec.IfName, Args: podArgs(rec.Namespace, rec.Name, rec.UID, id)}
	var list *libcni.NetworkConfigList
	if rec.Network != "" {
		conf, rt, err := c.cni.GetNetworkListCachedConfig(&libcni.NetworkConfigList{Name: rec.Network}, base)
		if err == nil && conf != nil {
			if list, err = libcni.NetworkConfFromBytes(conf); err == nil && len(list.Plugins) > 0 {
				base = rt
			} else {
				list = nil
			}
		}
	}
	if list == nil {
		current, err := c.network()
		if err != nil {
			return fmt.Errorf("no cached configuration of its network and %w", notReady(err))
		}
		list = current
	}
	base.NetNS = pinnedNetNS(c.netnsDir(), id)
	dctx, cancel := context.WithTimeout(ctx, cniTimeout)
	err := c.cni.DelNetworkList(dctx, list, base)
	cancel()
	// A DEL may fail on what an earlier, partial one removed; cri-dockerd
	// takes that as done.
	if err != nil && !strings.Contains(err.Error(), "no such file or directory") {
		return fmt.Errorf("networkPlugin cni failed to teardown pod \"%s_%s\" network: %w", rec.Name, rec.Namespace, err)
	}
	if err := releaseNetNS(c.netnsDir(), id); err != nil {
		klog.Errorf("CNI: %v", err)
	}
	c.forget(id)
	return nil
}

// netnsDir holds the pinned network namespaces of attached sandboxes.
func (c *cniNetwork) netnsDir() string { return filepath.Join(filepath.Dir(c.stateDir), "netns") }

// record writes the sandbox's record, durably, before its ADD.
func (c *cniNetwork) record(id string, rec *sandboxRecord) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.sandboxes[id] = rec
	c.mu.Unlock()
	if err := safefile.WriteAtomic(filepath.Join(c.stateDir, id+".json"), data); err != nil {
		return fmt.Errorf("record sandbox %s: %w", kubecontainer.ShortID(id), err)
	}
	return nil
}

// forget drops a detached sandbox's record.
func (c *cniNetwork) forget(id string) {
	c.mu.Lock()
	delete(c.sandboxes, id)
	delete(c.ips, id)
	c.mu.Unlock()
	if err := os.Remove(filepath.Join(c.stateDir, id+".json")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		klog.Errorf("CNI: remove the record of sandbox %s: %v", kubecontainer.ShortID(id), err)
	}
}

// recorded are the sandboxes the agent attached and has not detached.
func (c *cniNetwork) recorded() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]string, 0, len(c.sandboxes))
	for id := range c.sandboxes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// podIP is the IP of an attached sandbox: from its ADD, or after a restart
// from libcni's cache of the ADD's result (read once). "" for a sandbox the
// agent did not attach.
func (c *cniNetwork) podIP(id string) string {
	c.mu.Lock()
	ip, rec := c.ips[id], c.sandboxes[id]
	c.mu.Unlock()
	if ip != "" || rec == nil || rec.Network == "" {
		return ip
	}
	rt := &libcni.RuntimeConf{ContainerID: id, IfName: rec.IfName}
	conf, _, err := c.cni.GetNetworkListCachedConfig(&libcni.NetworkConfigList{Name: rec.Network}, rt)
	if err != nil || conf == nil {
		return ""
	}
	list, err := libcni.NetworkConfFromBytes(conf)
	if err != nil {
		return ""
	}
	res, err := c.cni.GetNetworkListCachedResult(list, rt)
	if err != nil || res == nil {
		return ""
	}
	if ip, err = resultIP(res); err != nil {
		return ""
	}
	c.mu.Lock()
	if c.sandboxes[id] != nil {
		c.ips[id] = ip
	}
	c.mu.Unlock()
	return ip
}
