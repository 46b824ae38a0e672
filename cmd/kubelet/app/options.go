// Package app wires the agent together: options from flags, validation,
// dependencies, and Run.
package app

import (
	goflag "flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/classic-kubelet/kubelet/pkg/dockertools"
	"github.com/classic-kubelet/kubelet/pkg/kubelet"
)

// DefaultInfraImage is the pause image `make images` builds.
const DefaultInfraImage = "classic-kubelet/pause:1"

// Options is every setting of the agent. The yaml tags are the long flag
// names, so a config file can fill the same struct.
type Options struct {
	PodManifestPath        string        `yaml:"pod-manifest-path"`
	HostnameOverride       string        `yaml:"hostname-override"`
	RootDir                string        `yaml:"root-dir"`
	DockerEndpoint         string        `yaml:"docker-endpoint"`
	PodInfraContainerImage string        `yaml:"pod-infra-container-image"`
	SyncFrequency          time.Duration `yaml:"sync-frequency"`
	FileCheckFrequency     time.Duration `yaml:"file-check-frequency"`
	RelistPeriod           time.Duration `yaml:"relist-period"`
	BackoffInitial         time.Duration `yaml:"backoff-initial"`
	BackoffMax             time.Duration `yaml:"backoff-max"`
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		RootDir:                "/var/lib/kubelet",
		DockerEndpoint:         dockertools.DefaultEndpoint(),
		PodInfraContainerImage: DefaultInfraImage,
		SyncFrequency:          10 * time.Second,
		FileCheckFrequency:     20 * time.Second,
		RelistPeriod:           time.Second,
		BackoffInitial:         kubelet.DefaultBackoffInitial,
		BackoffMax:             kubelet.DefaultBackoffMax,
	}
}

// AddFlags registers the options' flags on fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.PodManifestPath, "pod-manifest-path", o.PodManifestPath, "Directory of pod manifests to run (or a single manifest file). Watched; re-read every --file-check-frequency.")
	fs.StringVar(&o.PodManifestPath, "config", o.PodManifestPath, "Alias of --pod-manifest-path (its 2014 name).")
	fs.StringVar(&o.HostnameOverride, "hostname-override", o.HostnameOverride, "The node name (default: the lower-cased hostname). Scopes the containers this agent owns.")
	fs.StringVar(&o.RootDir, "root-dir", o.RootDir, "Directory for the agent's state: pod volumes, checkpoints.")
	fs.StringVar(&o.DockerEndpoint, "docker-endpoint", o.DockerEndpoint, "Docker Engine API endpoint (unix:// or tcp://).")
	fs.StringVar(&o.PodInfraContainerImage, "pod-infra-container-image", o.PodInfraContainerImage, "Image of each pod's infra container. Never pulled; changing it does not recreate running pods.")
	fs.DurationVar(&o.SyncFrequency, "sync-frequency", o.SyncFrequency, "How often every pod is compared with its spec (from cached state).")
	fs.DurationVar(&o.FileCheckFrequency, "file-check-frequency", o.FileCheckFrequency, "How often the manifest path is re-read besides file notifications.")
	fs.DurationVar(&o.RelistPeriod, "relist-period", o.RelistPeriod, "How often containers are listed from Docker (events trigger a list at once).")
	fs.DurationVar(&o.BackoffInitial, "backoff-initial", o.BackoffInitial, "Crash-loop back-off after the first restart (advanced).")
	fs.DurationVar(&o.BackoffMax, "backoff-max", o.BackoffMax, "Longest crash-loop back-off (advanced).")
	_ = fs.MarkHidden("backoff-initial")
	_ = fs.MarkHidden("backoff-max")
}

// Validate checks the options and fills in derived defaults.
func (o *Options) Validate() error {
	if o.HostnameOverride == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("node name: %w (set --hostname-override)", err)
		}
		o.HostnameOverride = h
	}
	o.HostnameOverride = strings.ToLower(o.HostnameOverride)
	for name, d := range map[string]time.Duration{
		"--sync-frequency": o.SyncFrequency, "--file-check-frequency": o.FileCheckFrequency,
		"--relist-period": o.RelistPeriod, "--backoff-initial": o.BackoffInitial, "--backoff-max": o.BackoffMax,
	} {
		if d <= 0 {
			return fmt.Errorf("%s must be positive, got %v", name, d)
		}
	}
	if o.RootDir == "" {
		return fmt.Errorf("--root-dir must not be empty")
	}
	if o.PodManifestPath != "" {
		if err := checkNotKubeletConfig(o.PodManifestPath); err != nil {
			return err
		}
	}
	return nil
}

// checkNotKubeletConfig catches today's meaning of --config: a file holding
// a KubeletConfiguration, which this agent does not read.
func checkNotKubeletConfig(path string) error {
	fi, err := os.Stat(path)
	if err != nil || fi.IsDir() {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var h struct {
		Kind string `json:"kind"`
	}
	if yaml.Unmarshal(data, &h) == nil && h.Kind == "KubeletConfiguration" {
		return fmt.Errorf("%s is a KubeletConfiguration, but --config (and --pod-manifest-path) name the pod manifest directory, as in 2014: pass agent settings as flags", path)
	}
	return nil
}

// ParseFlags parses the command line into Options. Both "_" and "-" are
// accepted in flag names. glog's flags (-v, --logtostderr, ...) are
// included; klog, used by libraries, follows the same -v.
func ParseFlags(args []string) (*Options, error) {
	o := NewOptions()
	fs := pflag.NewFlagSet("kubelet", pflag.ContinueOnError)
	fs.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		return pflag.NormalizedName(strings.ReplaceAll(name, "_", "-"))
	})
	o.AddFlags(fs)
	// glog registers on the standard flag set; logs go to stderr by default.
	_ = goflag.CommandLine.Set("logtostderr", "true")
	fs.AddGoFlagSet(goflag.CommandLine)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	klogFlags := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(klogFlags)
	if v := goflag.CommandLine.Lookup("v"); v != nil {
		_ = klogFlags.Set("v", v.Value.String())
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return o, nil
}
