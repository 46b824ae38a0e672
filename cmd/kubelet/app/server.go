package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/golang/glog"

	"github.com/classic-kubelet/kubelet/pkg/config"
	"github.com/classic-kubelet/kubelet/pkg/dockertools"
	"github.com/classic-kubelet/kubelet/pkg/kubelet"
)

// Run runs the agent until ctx is cancelled. It returns once every goroutine
// it started has stopped; containers are left running.
func Run(ctx context.Context, o *Options) error {
	if err := os.MkdirAll(o.RootDir, 0o755); err != nil {
		return fmt.Errorf("root dir: %w", err)
	}
	docker, err := dockertools.NewClient(o.DockerEndpoint)
	if err != nil {
		return err
	}
	merger, err := config.NewMerger(filepath.Join(o.RootDir, "checkpoints"))
	if err != nil {
		return err
	}
	k := kubelet.New(kubelet.Config{
		NodeName:       o.HostnameOverride,
		RootDir:        o.RootDir,
		InfraImage:     o.PodInfraContainerImage,
		SyncFrequency:  o.SyncFrequency,
		RelistPeriod:   o.RelistPeriod,
		BackoffInitial: o.BackoffInitial,
		BackoffMax:     o.BackoffMax,
	}, docker, merger)

	glog.Infof("Classic Kubelet starting: node %q, root dir %s, docker %s", o.HostnameOverride, o.RootDir, o.DockerEndpoint)
	var wg sync.WaitGroup
	if o.PodManifestPath != "" {
		src := config.NewFileSource(o.PodManifestPath, o.HostnameOverride, o.FileCheckFrequency, merger)
		wg.Add(1)
		go func() {
			defer wg.Done()
			src.Run(ctx)
		}()
	} else {
		glog.Warningf("No --pod-manifest-path: no pods will be started")
	}
	k.Run(ctx, merger.Updates())
	wg.Wait()
	glog.Infof("Classic Kubelet stopped; containers left running")
	return nil
}
