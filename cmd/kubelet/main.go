// Command kubelet is the Classic Kubelet node agent.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/classic-kubelet/kubelet/cmd/kubelet/app"
)

func main() {
	opts, err := app.ParseFlags(os.Args[1:])
	if errors.Is(err, app.ErrVersion) {
		fmt.Println("classic-kubelet", app.Version)
		return
	}
	if errors.Is(err, pflag.ErrHelp) {
		return // the usage is printed
	}
	if err == nil {
		err = app.ApplyLogging(opts)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubelet: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	reparse := func() (*app.Options, error) { return app.ReparseFlags(os.Args[1:]) }
	if err := app.Run(ctx, opts, hup, reparse); err != nil {
		klog.Errorf("%v", err)
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}
