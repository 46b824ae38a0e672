package app

import (
	goflag "flag"
	"fmt"
	"reflect"

	"github.com/spf13/pflag"
	"k8s.io/component-base/featuregate"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	"k8s.io/klog/v2"
)

// The agent logs through klog, configured as the kubelet configures it:
// component-base's logging options (--logging-format text or json, -v,
// --vmodule, --log-flush-frequency, the split-stream options) and the
// KubeletConfiguration's logging section. klog's older flags, which the
// agent offered when it logged through glog, are still taken; with a format
// other than text they are refused (checkLegacyLogFlags: component-base
// checks only -v and --vmodule).
var klogLegacyFlags = []string{"logtostderr", "alsologtostderr", "stderrthreshold", "log_dir", "log_backtrace_at"}

// addLoggingFlags adds the logging options, bound to o.Logging, and the
// legacy klog flags from legacy (klog's own, or shadows of them).
func addLoggingFlags(o *Options, fs *pflag.FlagSet, legacy *goflag.FlagSet) {
	logsapi.AddFlags(o.Logging, fs)
	for _, name := range klogLegacyFlags {
		if f := legacy.Lookup(name); f != nil {
			fs.AddGoFlag(f)
		}
	}
}

// checkLegacyLogFlags refuses klog's legacy flags beside a format other
// than text, which writes neither files nor their thresholds.
func checkLegacyLogFlags(fs *pflag.FlagSet, o *Options) error {
	if o.Logging.Format == logsapi.DefaultLogFormat {
		return nil
	}
	for _, name := range klogLegacyFlags {
		if f := fs.Lookup(name); f != nil && fs.Changed(name) {
			return fmt.Errorf("--%s: only with --logging-format=text (the %s format writes to stderr)", f.Name, o.Logging.Format)
		}
	}
	return nil
}

// klogFlags are klog's flags, bound to its global settings: parsing them
// configures klog.
func klogFlags() *goflag.FlagSet {
	fs := goflag.NewFlagSet("klog", goflag.ContinueOnError)
	klog.InitFlags(fs)
	return fs
}

// shadowKlogFlags are plain copies of klog's legacy flags: parsing them
// again (on SIGHUP) must not write klog's settings, which every goroutine
// reads as it logs.
func shadowKlogFlags() *goflag.FlagSet {
	live := klogFlags()
	shadow := goflag.NewFlagSet("klog-shadow", goflag.ContinueOnError)
	for _, name := range klogLegacyFlags {
		if f := live.Lookup(name); f != nil {
			shadow.String(name, f.Value.String(), f.Usage)
		}
	}
	return shadow
}

// validateLogging checks the logging options as ValidateAndApply will.
func (o *Options) validateLogging() error {
	fg, err := o.loggingFeatureGate()
	if err != nil {
		return err
	}
	if errs := logsapi.Validate(o.Logging, fg, nil); len(errs) > 0 {
		return fmt.Errorf("logging: %w", errs.ToAggregate())
	}
	return nil
}

// loggingFeatureGate is the kubelet's feature gate as given: the logging
// options' alpha and beta stages (LoggingAlphaOptions, LoggingBetaOptions)
// and ContextualLogging follow it.
func (o *Options) loggingFeatureGate() (featuregate.FeatureGate, error) {
	fg, err := newFeatureGate()
	if err != nil {
		return nil, err
	}
	if err := fg.SetFromMap(o.FeatureGates); err != nil {
		return nil, fmt.Errorf("--feature-gates: %w", err)
	}
	return fg, nil
}

// ApplyLogging configures klog from o, once, before the agent starts: the
// log format, verbosity and flushing.
func ApplyLogging(o *Options) error {
	fg, err := o.loggingFeatureGate()
	if err != nil {
		return err
	}
	if err := logsapi.ValidateAndApply(o.Logging, fg); err != nil {
		return fmt.Errorf("logging: %w", err)
	}
	return nil
}

// reloadLogging applies what a SIGHUP may change of the logging options,
// the verbosity (through component-base's setter, which every format
// follows); it returns whether anything else changed, which needs a
// restart.
func reloadLogging(old, next *logsapi.LoggingConfiguration) (needRestart bool) {
	if next.Verbosity != old.Verbosity {
		if _, err := logs.GlogSetter(fmt.Sprint(next.Verbosity)); err != nil {
			klog.Errorf("SIGHUP: -v %d: %v", next.Verbosity, err)
		} else {
			klog.Infof("SIGHUP: log verbosity now %d", next.Verbosity)
			old.Verbosity = next.Verbosity
		}
	}
	rest := *next
	rest.Verbosity = old.Verbosity
	return !reflect.DeepEqual(&rest, old)
}
