// Package cluster runs a real Kubernetes control plane for tests and for
// `make cluster`: etcd (Debian's etcd-server), kube-apiserver,
// kube-controller-manager and kube-scheduler, with the kubectl of the same
// release, as built and cached by hack/ensure-control-plane.sh.
//
// The control plane is set up as a production one is in what concerns a
// node: the API server authorizes with Node,RBAC and admits with
// NodeRestriction (and the default plug-ins, ServiceAccount among them), so
// an agent given NodeCredentials has exactly a kubelet's rights. One CA signs
// every certificate (see docs/kubernetes.md). The API server listens on the
// address of Docker's bridge (docker0): containers and agents reach it there,
// and it reaches agents there, since it refuses to proxy to loopback; nothing
// leaves the machine. etcd and the components' own ports stay on loopback.
package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Options configures Start. The zero value (but BinDir) is a working
// cluster.
type Options struct {
	// BinDir holds kube-apiserver, kube-controller-manager, kube-scheduler
	// and kubectl (BinDir finds it). Required.
	BinDir string
	// Etcd is the etcd server binary; default "etcd" from PATH.
	Etcd string
	// Address is where the API server listens and what it advertises;
	// default: docker0's IPv4 address.
	Address string
	// ServiceCIDR is the services' range; default 10.96.0.0/16 (docker0's
	// default 172.17.0.0/16 and the default route's network must not
	// overlap it).
	ServiceCIDR string
	// ClusterCIDR, if set, is the pods' range: kube-controller-manager
	// allocates each node a /24 of it (Node.spec.podCIDR), as for a
	// network add-on or the agent's reference CNI configuration
	// (StartMachines). Unset, nodes get none, as before.
	ClusterCIDR string
	// APIServerArgs are added to kube-apiserver's flags (a later flag wins).
	APIServerArgs []string
	// ControllerManagerArgs are added to kube-controller-manager's flags
	// (--cluster-signing-duration, for a test of certificate rotation).
	ControllerManagerArgs []string
}

// Cluster is a running control plane. Its files (certificates, kubeconfigs,
// etcd's data, one log per process) are in Dir.
type Cluster struct {
	Dir string
	// Address is the API server's address (docker0's by default): give it
	// to agents as --node-ip, so that the API server can reach them.
	Address string
	// Server is the API server's URL, https://<Address>:<port>.
	Server string
	// CAFile is the cluster CA: it signed the API server's serving
	// certificate, every client certificate, and agents' serving
	// certificates.
	CAFile string
	// AdminKubeconfig authenticates as user "admin", group system:masters.
	AdminKubeconfig string
	// ServiceCIDR is the services' range.
	ServiceCIDR string
	// ClusterCIDR is the pods' range nodes' podCIDRs are cut from; "" if
	// none.
	ClusterCIDR string

	binDir string
	ca     *authority
	admin  kubernetes.Interface

	mu    sync.Mutex
	procs []*process // in start order; stopped in reverse
}

// Start starts etcd, the API server, the controller-manager and the
// scheduler in dir (which should be empty) and returns once every one of
// them serves: the API server is ready and the controller-manager and
// scheduler hold their leader leases. ctx bounds the start, not the
// cluster's life: the processes run until Stop. On error, whatever was
// started is stopped, and the error carries the failing process's log tail.
func Start(ctx context.Context, dir string, opts Options) (_ *Cluster, retErr error) {
	if opts.BinDir == "" {
		return nil, errors.New("cluster: Options.BinDir is required (hack/ensure-control-plane.sh prints it)")
	}
	for _, name := range binaries {
		if _, err := os.Stat(filepath.Join(opts.BinDir, name)); err != nil {
			return nil, fmt.Errorf("cluster: %w (hack/ensure-control-plane.sh builds it)", err)
		}
	}
	if opts.Etcd == "" {
		opts.Etcd = "etcd"
	}
	etcdBin, err := exec.LookPath(opts.Etcd)
	if err != nil {
		return nil, fmt.Errorf("cluster: etcd server (hack/ensure-test-deps.sh installs etcd-server): %w", err)
	}
	if opts.Address == "" {
		if opts.Address, err = InterfaceIPv4("docker0"); err != nil {
			return nil, fmt.Errorf("cluster: %w (is Docker running? hack/ensure-docker.sh)", err)
		}
	}
	if opts.ServiceCIDR == "" {
		opts.ServiceCIDR = "10.96.0.0/16"
	}
	_, serviceNet, err := net.ParseCIDR(opts.ServiceCIDR)
	if err != nil {
		return nil, fmt.Errorf("cluster: service CIDR: %w", err)
	}
	if opts.ClusterCIDR != "" {
		if _, _, err := net.ParseCIDR(opts.ClusterCIDR); err != nil {
			return nil, fmt.Errorf("cluster: cluster CIDR: %w", err)
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	loopback, err := freeAddrs("127.0.0.1", 4)
	if err != nil {
		return nil, err
	}
	etcdClient, etcdPeer := "http://"+loopback[0], "http://"+loopback[1]
	cmPort, schedPort := portOf(loopback[2]), portOf(loopback[3])
	apiAddr, err := freeAddrs(opts.Address, 1)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Address: opts.Address, Server: "https://" + apiAddr[0], ServiceCIDR: opts.ServiceCIDR,
		ClusterCIDR: opts.ClusterCIDR, binDir: opts.BinDir}
	defer func() {
		if retErr != nil {
			c.Stop()
		}
	}()
	f, err := c.writeFiles(serviceNet)
	if err != nil {
		return nil, err
	}

	// etcd, on loopback only. Its readiness is covered by the API
	// server's (/readyz checks etcd).
	if _, err := c.start("etcd", etcdBin,
		"--name", "etcd",
		"--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdClient, "--advertise-client-urls", etcdClient,
		"--listen-peer-urls", etcdPeer, "--initial-advertise-peer-urls", etcdPeer,
		"--initial-cluster", "etcd="+etcdPeer,
		"--initial-cluster-token", "classic-kubelet-"+filepath.Base(dir),
		"--logger", "zap",
	); err != nil {
		return nil, err
	}

	apiserver, err := c.start("kube-apiserver", filepath.Join(c.binDir, "kube-apiserver"), append([]string{
		"--etcd-servers", etcdClient,
		"--bind-address", c.Address, "--advertise-address", c.Address, "--secure-port", portOf(apiAddr[0]),
		"--cert-dir", filepath.Join(dir, "apiserver"), // unused (certificates given), but not /var/run/kubernetes
		"--tls-cert-file", f.apiserverCert, "--tls-private-key-file", f.apiserverKey,
		"--client-ca-file", c.CAFile,
		"--authorization-mode", "Node,RBAC",
		"--enable-admission-plugins", "NodeRestriction",
		// Bootstrap tokens (Secrets in kube-system) authenticate nodes that
		// join by TLS bootstrap, as kubeadm sets it up; there are none
		// until a test makes one (BootstrapKubeconfig).
		"--enable-bootstrap-token-auth=true",
		"--service-cluster-ip-range", c.ServiceCIDR,
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", f.saPublic,
		"--service-account-signing-key-file", f.saPrivate,
		"--kubelet-client-certificate", f.kubeletClientCert, "--kubelet-client-key", f.kubeletClientKey,
		// Agents' serving certificates are signed by the cluster CA: the API
		// server verifies them, as a production one should.
		"--kubelet-certificate-authority", c.CAFile,
		"--kubelet-preferred-address-types", "InternalIP",
		// Aggregated API servers (metrics-server) trust requests the API
		// server proxies to them by its front-proxy client certificate, of
		// a CA of its own as kubeadm sets it up; with no kube-proxy here it
		// routes to their endpoints, not to service IPs.
		"--requestheader-client-ca-file", f.frontProxyCA,
		"--requestheader-allowed-names", frontProxyUser,
		"--requestheader-username-headers", "X-Remote-User",
		"--requestheader-group-headers", "X-Remote-Group",
		"--requestheader-extra-headers-prefix", "X-Remote-Extra-",
		"--proxy-client-cert-file", f.frontProxyCert, "--proxy-client-key-file", f.frontProxyKey,
		"--enable-aggregator-routing=true",
		"--allow-privileged=true",
		"--profiling=false",
	}, opts.APIServerArgs...)...)
	if err != nil {
		return nil, err
	}
	if c.admin, err = c.Client(c.AdminKubeconfig); err != nil {
		return nil, err
	}
	if err := waitFor(ctx, apiserver, c.apiserverReady); err != nil {
		return nil, err
	}
	// The API server's client certificate to kubelets gets the rights a
	// kubelet's authorizer asks about (nodes/proxy, stats, log, metrics).
	if err := c.bindKubeletClient(ctx); err != nil {
		return nil, apiserver.failure(err)
	}

	var podRanges []string
	if c.ClusterCIDR != "" {
		// The node IPAM controller gives each node a /24 (its default
		// size) of the range as it registers.
		podRanges = []string{"--allocate-node-cidrs=true", "--cluster-cidr", c.ClusterCIDR,
			"--service-cluster-ip-range", c.ServiceCIDR}
	}
	cm, err := c.start("kube-controller-manager", filepath.Join(c.binDir, "kube-controller-manager"), append([]string{
		"--kubeconfig", f.controllerManagerKubeconfig,
		"--authentication-kubeconfig", f.controllerManagerKubeconfig,
		"--authorization-kubeconfig", f.controllerManagerKubeconfig,
		"--bind-address", "127.0.0.1", "--secure-port", cmPort,
		"--cert-dir", filepath.Join(dir, "controller-manager"),
		"--service-account-private-key-file", f.saPrivate,
		"--root-ca-file", c.CAFile, // published as every namespace's kube-root-ca.crt
		"--use-service-account-credentials=true",
		// The certificates controller signs CSRs with the cluster CA.
		"--cluster-signing-cert-file", c.CAFile, "--cluster-signing-key-file", f.caKey,
		"--leader-elect=true",
		"--profiling=false",
	}, append(podRanges, opts.ControllerManagerArgs...)...)...)
	if err != nil {
		return nil, err
	}
	sched, err := c.start("kube-scheduler", filepath.Join(c.binDir, "kube-scheduler"),
		"--config", f.schedulerConfig,
		"--authentication-kubeconfig", f.schedulerKubeconfig,
		"--authorization-kubeconfig", f.schedulerKubeconfig,
		"--bind-address", "127.0.0.1", "--secure-port", schedPort,
		"--cert-dir", filepath.Join(dir, "scheduler"),
	)
	if err != nil {
		return nil, err
	}
	for _, w := range []struct {
		p     *process
		lease string
	}{{cm, "kube-controller-manager"}, {sched, "kube-scheduler"}} {
		if err := waitFor(ctx, w.p, func(ctx context.Context) error { return c.leaderHeld(ctx, w.lease) }); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// binaries are what BinDir must hold.
var binaries = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"}

// files are the paths of what writeFiles wrote, besides the Cluster's
// CAFile and AdminKubeconfig.
type files struct {
	caKey                               string
	apiserverCert, apiserverKey         string
	kubeletClientCert, kubeletClientKey string
	saPrivate, saPublic                 string
	controllerManagerKubeconfig         string
	schedulerKubeconfig                 string
	schedulerConfig                     string
	frontProxyCA                        string
	frontProxyCert, frontProxyKey       string
}

// kubeletClientUser is the API server's identity towards kubelets, as
// kubeadm names it.
const kubeletClientUser = "kube-apiserver-kubelet-client"

// frontProxyUser is the API server's identity towards aggregated API
// servers.
const frontProxyUser = "front-proxy-client"

// writeFiles makes the cluster's CA and every certificate, key and
// kubeconfig the control plane needs, under Dir/pki and Dir.
func (c *Cluster) writeFiles(serviceNet *net.IPNet) (files, error) {
	var f files
	ca, err := newAuthority("classic-kubelet-test-ca")
	if err != nil {
		return f, err
	}
	c.ca = ca
	pki := filepath.Join(c.Dir, "pki")
	c.CAFile = filepath.Join(pki, "ca.crt")
	if err := writeFile(c.CAFile, ca.certPEM); err != nil {
		return f, err
	}
	f.caKey = filepath.Join(pki, "ca.key")
	if err := writeFile(f.caKey, ca.keyPEM); err != nil {
		return f, err
	}

	// The API server answers at its address, on loopback names, and at the
	// first service IP under the names pods use (kubernetes.default...).
	serving, err := ca.issue(certSpec{
		commonName: "kube-apiserver",
		server:     true,
		ips:        []net.IP{net.ParseIP(c.Address), net.ParseIP("127.0.0.1"), firstIP(serviceNet)},
		dnsNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
	})
	if err != nil {
		return f, err
	}
	if f.apiserverCert, f.apiserverKey, err = serving.write(filepath.Join(pki, "apiserver")); err != nil {
		return f, err
	}
	kubeletClient, err := ca.issue(certSpec{commonName: kubeletClientUser, client: true})
	if err != nil {
		return f, err
	}
	if f.kubeletClientCert, f.kubeletClientKey, err = kubeletClient.write(filepath.Join(pki, "apiserver-kubelet-client")); err != nil {
		return f, err
	}
	// A second CA, for the front proxy only: a client certificate of the
	// cluster CA must never be able to assert another user in headers.
	frontCA, err := newAuthority("classic-kubelet-test-front-proxy-ca")
	if err != nil {
		return f, err
	}
	f.frontProxyCA = filepath.Join(pki, "front-proxy-ca.crt")
	if err := writeFile(f.frontProxyCA, frontCA.certPEM); err != nil {
		return f, err
	}
	frontClient, err := frontCA.issue(certSpec{commonName: frontProxyUser, client: true})
	if err != nil {
		return f, err
	}
	if f.frontProxyCert, f.frontProxyKey, err = frontClient.write(filepath.Join(pki, "front-proxy-client")); err != nil {
		return f, err
	}

	saKey, saPub, err := serviceAccountKey()
	if err != nil {
		return f, err
	}
	f.saPrivate, f.saPublic = filepath.Join(pki, "sa.key"), filepath.Join(pki, "sa.pub")
	if err := writeFile(f.saPrivate, saKey); err != nil {
		return f, err
	}
	if err := writeFile(f.saPublic, saPub); err != nil {
		return f, err
	}

	c.AdminKubeconfig = filepath.Join(c.Dir, "admin.kubeconfig")
	f.controllerManagerKubeconfig = filepath.Join(c.Dir, "controller-manager.kubeconfig")
	f.schedulerKubeconfig = filepath.Join(c.Dir, "scheduler.kubeconfig")
	for _, k := range []struct {
		path, user string
		groups     []string
	}{
		{c.AdminKubeconfig, "admin", []string{"system:masters"}},
		// The bootstrap RBAC policy binds these user names to the roles the
		// components need.
		{f.controllerManagerKubeconfig, "system:kube-controller-manager", nil},
		{f.schedulerKubeconfig, "system:kube-scheduler", nil},
	} {
		p, err := ca.issue(certSpec{commonName: k.user, orgs: k.groups, client: true})
		if err != nil {
			return f, err
		}
		if err := writeKubeconfig(k.path, c.Server, ca.certPEM, k.user, p); err != nil {
			return f, err
		}
	}
	// The scheduler's --kubeconfig is deprecated in favour of its
	// configuration file.
	f.schedulerConfig = filepath.Join(c.Dir, "scheduler.yaml")
	cfg := fmt.Sprintf("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"+
		"clientConnection:\n  kubeconfig: %q\nleaderElection:\n  leaderElect: true\n", f.schedulerKubeconfig)
	if err := writeFile(f.schedulerConfig, []byte(cfg)); err != nil {
		return f, err
	}
	return f, nil
}

func (c *Cluster) start(name, bin string, args ...string) (*process, error) {
	p, err := startProcess(c.Dir, name, bin, args...)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return p, nil
}

// waitFor polls check until it succeeds, p exits, or ctx ends.
func waitFor(ctx context.Context, p *process, check func(context.Context) error) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := check(cctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return p.failure(err)
		case <-ctx.Done():
			return p.failure(fmt.Errorf("%w: %w", ctx.Err(), err))
		case <-tick.C:
		}
	}
}

func (c *Cluster) bindKubeletClient(ctx context.Context) error {
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: kubeletClientUser},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: kubeletClientUser}},
	}
	_, err := c.admin.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("bind %s to system:kubelet-api-admin: %w", kubeletClientUser, err)
	}
	return nil
}

// leaderHeld checks that a component holds its leader-election lease in
// kube-system (the etcd is fresh: a holder is the process just started).
func (c *Cluster) leaderHeld(ctx context.Context, name string) error {
	var l *coordinationv1.Lease
	l, err := c.admin.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("leader lease: %w", err)
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return errors.New("leader lease has no holder")
	}
	return nil
}

// Stop stops every process the cluster started, the last started first
// (components, then the API server, then etcd), each with its process
// group. It is idempotent. Dir stays: the caller removes it.
func (c *Cluster) Stop() {
	c.mu.Lock()
	procs := c.procs
	c.procs = nil
	c.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].stop(5 * time.Second)
	}
}

// Admin is a client authenticated as admin (system:masters).
func (c *Cluster) Admin() kubernetes.Interface { return c.admin }

// RESTConfig loads a kubeconfig (AdminKubeconfig, a node's, a user's).
func (c *Cluster) RESTConfig(kubeconfig string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}

// Client is a clientset authenticated by a kubeconfig.
func (c *Cluster) Client(kubeconfig string) (kubernetes.Interface, error) {
	cfg, err := c.RESTConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// Kubectl runs the cluster's kubectl as admin and returns its standard
// output; on failure the error carries its standard error.
func (c *Cluster) Kubectl(args ...string) (string, error) {
	return c.KubectlAs(c.AdminKubeconfig, args...)
}

// KubectlAs runs kubectl with another kubeconfig (a node's, a user's).
func (c *Cluster) KubectlAs(kubeconfig string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(c.binDir, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// KubectlPath is the kubectl binary.
func (c *Cluster) KubectlPath() string { return filepath.Join(c.binDir, "kubectl") }

// NodeFiles are the files an agent needs to be a node of the cluster.
type NodeFiles struct {
	// Kubeconfig authenticates as system:node:<name> in group
	// system:nodes: the Node authorizer and NodeRestriction apply.
	Kubeconfig string
	// CertFile and KeyFile are the agent's serving certificate
	// (--tls-cert-file, --tls-private-key-file) for the node's IP, its name
	// and localhost, signed by the cluster CA, which the API server checks.
	CertFile, KeyFile string
	// ClientCAFile is the CA the agent should trust for client certificates
	// (--client-ca-file): the one that signed the API server's client
	// certificate to kubelets.
	ClientCAFile string
}

// NodeCredentials writes the credentials of a node under Dir/nodes/<name>.
func (c *Cluster) NodeCredentials(nodeName, nodeIP string) (NodeFiles, error) {
	ip := net.ParseIP(nodeIP)
	if ip == nil {
		return NodeFiles{}, fmt.Errorf("node %s: invalid IP %q", nodeName, nodeIP)
	}
	dir := filepath.Join(c.Dir, "nodes", nodeName)
	client, err := c.ca.issue(certSpec{commonName: "system:node:" + nodeName, orgs: []string{"system:nodes"}, client: true})
	if err != nil {
		return NodeFiles{}, err
	}
	nf := NodeFiles{Kubeconfig: filepath.Join(dir, "kubeconfig"), ClientCAFile: c.CAFile}
	if err := writeKubeconfig(nf.Kubeconfig, c.Server, c.ca.certPEM, "system:node:"+nodeName, client); err != nil {
		return NodeFiles{}, err
	}
	serving, err := c.ca.issue(certSpec{
		commonName: nodeName,
		server:     true,
		ips:        []net.IP{ip, net.ParseIP("127.0.0.1")},
		dnsNames:   []string{nodeName, "localhost"},
	})
	if err != nil {
		return NodeFiles{}, err
	}
	if nf.CertFile, nf.KeyFile, err = serving.write(filepath.Join(dir, "serving")); err != nil {
		return NodeFiles{}, err
	}
	return nf, nil
}

// UserKubeconfig writes a kubeconfig for a user in groups (none: only
// system:authenticated, which the API server adds) under Dir/users and
// returns its path. Such a user has no rights beyond what RBAC grants
// system:authenticated (discovery, self reviews): tests bind it what they
// need.
func (c *Cluster) UserKubeconfig(user string, groups ...string) (string, error) {
	p, err := c.ca.issue(certSpec{commonName: user, orgs: groups, client: true})
	if err != nil {
		return "", err
	}
	path := filepath.Join(c.Dir, "users", strings.NewReplacer("/", "_", ":", "_").Replace(user)+".kubeconfig")
	if err := writeKubeconfig(path, c.Server, c.ca.certPEM, user, p); err != nil {
		return "", err
	}
	return path, nil
}

// InterfaceIPv4 returns the first IPv4 address of a network interface.
func InterfaceIPv4(name string) (string, error) {
	iface, err := net.InterfaceByName(name)
	if err != nil {
		return "", fmt.Errorf("interface %s: %w", name, err)
	}
	addrs, err := iface.Addrs()
	if err != nil {
		return "", fmt.Errorf("addresses of %s: %w", name, err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			return n.IP.String(), nil
		}
	}
	return "", fmt.Errorf("interface %s has no IPv4 address", name)
}

// BinDir asks hack/ensure-control-plane.sh of the repository at root where
// the control plane's binaries are, without building them: an error says
// they are missing (run the script without --check to build them, about 10
// minutes cold).
func BinDir(root string) (string, error) {
	cmd := exec.Command(filepath.Join(root, "hack", "ensure-control-plane.sh"), "--check")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("control plane binaries: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// freeAddrs returns n addresses host:port, each with a port free on host
// right now and never returned before in this process (the kernel may hand
// a just-closed port out again, and two servers would then collide).
func freeAddrs(host string, n int) ([]string, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	var out []string
	for len(out) < n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("cluster: find a free port on %s: %w", host, err)
		}
		addr := l.Addr().String()
		l.Close()
		if !portsGiven[addr] {
			portsGiven[addr] = true
			out = append(out, addr)
		}
	}
	return out, nil
}

var (
	portsMu    sync.Mutex
	portsGiven = map[string]bool{}
)

func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}

// firstIP is the network's first host address: the API server's service
// IP (kubernetes.default).
func firstIP(n *net.IPNet) net.IP {
	ip := make(net.IP, len(n.IP))
	copy(ip, n.IP)
	ip[len(ip)-1]++
	return ip
}

// apiserverReady checks the API server's /readyz.
func (c *Cluster) apiserverReady(ctx context.Context) error {
	// A failing /readyz names its failing checks in the body.
	body, err := c.admin.Discovery().RESTClient().Get().AbsPath("/readyz").Param("verbose", "true").Do(ctx).Raw()
	if err != nil && len(body) > 0 {
		return fmt.Errorf("/readyz: %w: %s", err, body)
	}
	if err != nil {
		return fmt.Errorf("/readyz: %w", err)
	}
	return nil
}

// RestartAPIServer stops the API server (SIGTERM: its clients' connections
// and watches end), waits down for the given time, starts it again with the
// same flags and returns once it is ready.
func (c *Cluster) RestartAPIServer(ctx context.Context, down time.Duration) error {
	c.mu.Lock()
	i := slices.IndexFunc(c.procs, func(p *process) bool { return p.name == "kube-apiserver" })
	var old *process
	if i >= 0 {
		old = c.procs[i]
	}
	c.mu.Unlock()
	if old == nil {
		return fmt.Errorf("cluster: no kube-apiserver")
	}
	old.stop(5 * time.Second)
	select {
	case <-time.After(down):
	case <-ctx.Done():
		return ctx.Err()
	}
	p, err := startProcess(c.Dir, old.name, old.bin, old.args...)
	if err != nil {
		return err
	}
	c.mu.Lock()
	stopped := i >= len(c.procs) || c.procs[i] != old // Stop ran meanwhile
	if !stopped {
		c.procs[i] = p
	}
	c.mu.Unlock()
	if stopped {
		p.stop(5 * time.Second)
		return fmt.Errorf("cluster: stopped while its API server restarted")
	}
	return waitFor(ctx, p, c.apiserverReady)
}

// Signal sends sig to a server of the cluster by name (kube-apiserver,
// kube-controller-manager, kube-scheduler, etcd): SIGSTOP and SIGCONT make
// an outage that clients see as requests that hang, as a partition does.
func (c *Cluster) Signal(name string, sig syscall.Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.procs {
		if p.name == name {
			return syscall.Kill(-p.cmd.Process.Pid, sig)
		}
	}
	return fmt.Errorf("cluster: no process %q", name)
}
