// Package eviction is the kubelet's eviction manager, for this agent. The
// Manager compares the node's signals (memory, disk, inodes, PIDs) with the
// hard and soft thresholds, says which node conditions are under pressure,
// and picks the one pod to evict, ranked as the kubelet ranks. The Evictor
// runs the rounds around it (every housekeeping period, and at once on the
// memory threshold notification): it observes the node, measures the pods,
// reclaims at node level (dead containers, an evicted pod's all, unused
// images), evicts the pod picked and waits for it to stop; it also admits
// pods under pressure and stops an evicted pod when its worker syncs it.
// It reaches the Kubelet through the small interfaces it declares (Pods,
// PodStates, Runtime, ...): the Kubelet keeps the pods, their records and
// statuses, and an eviction is in memory only.
package eviction

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Signal is an eviction signal, as the kubelet names it.
type Signal string

// The signals this agent observes.
const (
	SignalMemoryAvailable   Signal = "memory.available"
	SignalNodeFsAvailable   Signal = "nodefs.available"
	SignalNodeFsInodesFree  Signal = "nodefs.inodesFree"
	SignalImageFsAvailable  Signal = "imagefs.available"
	SignalImageFsInodesFree Signal = "imagefs.inodesFree"
	SignalPIDAvailable      Signal = "pid.available"
)

// DefaultHard is the kubelet's default --eviction-hard.
const DefaultHard = "memory.available<100Mi,nodefs.available<10%,imagefs.available<15%,nodefs.inodesFree<5%"

// Resources internal to eviction, beside memory and ephemeral-storage.
const (
	resourceInodes v1.ResourceName = "inodes"
	resourcePIDs   v1.ResourceName = "pids"
)

// signalResource is what each signal measures; signalCondition the node
// condition it drives.
var (
	signalResource = map[Signal]v1.ResourceName{
		SignalMemoryAvailable:   v1.ResourceMemory,
		SignalNodeFsAvailable:   v1.ResourceEphemeralStorage,
		SignalNodeFsInodesFree:  resourceInodes,
		SignalImageFsAvailable:  v1.ResourceEphemeralStorage,
		SignalImageFsInodesFree: resourceInodes,
		SignalPIDAvailable:      resourcePIDs,
	}
	signalCondition = map[Signal]v1.NodeConditionType{
		SignalMemoryAvailable:   v1.NodeMemoryPressure,
		SignalNodeFsAvailable:   v1.NodeDiskPressure,
		SignalNodeFsInodesFree:  v1.NodeDiskPressure,
		SignalImageFsAvailable:  v1.NodeDiskPressure,
		SignalImageFsInodesFree: v1.NodeDiskPressure,
		SignalPIDAvailable:      v1.NodePIDPressure,
	}
)

// Value is a threshold's quantity, or its share of the capacity.
type Value struct {
	Quantity   *resource.Quantity
	Percentage float32 // 0..1, used when Quantity is nil
}

// of is the value in the signal's unit for a capacity.
func (v Value) of(capacity int64) int64 {
	if v.Quantity != nil {
		return v.Quantity.Value()
	}
	return int64(float64(v.Percentage) * float64(capacity))
}

// Threshold is one "signal<value": hard without a grace period, soft with.
type Threshold struct {
	Signal      Signal
	Value       Value
	GracePeriod time.Duration
	MinReclaim  *Value
}

// Hard reports whether the threshold acts at once.
func (t Threshold) Hard() bool { return t.GracePeriod == 0 }

func (t Threshold) String() string {
	kind := "hard"
	if !t.Hard() {
		kind = "soft"
	}
	return fmt.Sprintf("%s %s<%s", kind, t.Signal, formatValue(t.Value))
}

func formatValue(v Value) string {
	if v.Quantity != nil {
		return v.Quantity.String()
	}
	// float32 percentages print as 15.000001: rounded to what a flag says.
	return strconv.FormatFloat(math.Round(float64(v.Percentage)*1e6)/1e4, 'f', -1, 64) + "%"
}

// Flags are the eviction flags as given.
type Flags struct {
	Hard, Soft, SoftGracePeriod, MinimumReclaim string
}

// ParseThresholds parses the eviction flags as the kubelet does: "" means
// no thresholds; 0% and 100% are ignored; every soft threshold needs a
// grace period. Errors name the flag.
func ParseThresholds(f Flags) ([]Threshold, error) {
	hard, err := parseStatements("--eviction-hard", f.Hard, "<")
	if err != nil {
		return nil, err
	}
	soft, err := parseStatements("--eviction-soft", f.Soft, "<")
	if err != nil {
		return nil, err
	}
	graces, err := parseMap("--eviction-soft-grace-period", f.SoftGracePeriod, "=")
	if err != nil {
		return nil, err
	}
	reclaims, err := parseMap("--eviction-minimum-reclaim", f.MinimumReclaim, "=")
	if err != nil {
		return nil, err
	}
	for i := range soft {
		g, ok := graces[soft[i].Signal]
		if !ok {
			return nil, fmt.Errorf("--eviction-soft: grace period must be specified for the soft eviction threshold %v", soft[i].Signal)
		}
		d, err := time.ParseDuration(g)
		if err != nil {
			return nil, fmt.Errorf("--eviction-soft-grace-period: %v: %w", soft[i].Signal, err)
		}
		if d <= 0 {
			// A zero grace would make the soft threshold hard.
			return nil, fmt.Errorf("--eviction-soft-grace-period: invalid eviction grace period specified: %v, must be a positive value", g)
		}
		soft[i].GracePeriod = d
	}
	out := append(hard, soft...)
	for sig, val := range reclaims {
		v, err := parseMinReclaim(sig, val)
		if err != nil {
			return nil, fmt.Errorf("--eviction-minimum-reclaim: %w", err)
		}
		for i := range out {
			if out[i].Signal == sig {
				out[i].MinReclaim = &v
			}
		}
	}
	return out, nil
}

// parseMap splits "a<b,c<d" (or "a=b,c=d") into signal → value, each
// signal known.
func parseMap(flag, s, sep string) (map[Signal]string, error) {
	out := map[Signal]string{}
	for _, stmt := range strings.Split(s, ",") {
		if stmt = strings.TrimSpace(stmt); stmt == "" {
			continue
		}
		k, v, ok := strings.Cut(stmt, sep)
		if !ok {
			return nil, fmt.Errorf("%s: %q: want <signal>%s<value>", flag, stmt, sep)
		}
		sig := Signal(strings.TrimSpace(k))
		if _, known := signalResource[sig]; !known {
			return nil, fmt.Errorf("%s: unsupported eviction signal %v", flag, sig)
		}
		out[sig] = strings.TrimSpace(v)
	}
	return out, nil
}

func parseStatements(flag, s, sep string) ([]Threshold, error) {
	m, err := parseMap(flag, s, sep)
	if err != nil {
		return nil, err
	}
	var out []Threshold
	for sig, val := range m {
		v, skip, err := parseThresholdValue(sig, val)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", flag, err)
		}
		if !skip {
			out = append(out, Threshold{Signal: sig, Value: v})
		}
	}
	// Map order is random; a stable order keeps logs and tests stable.
	sort.Slice(out, func(i, j int) bool { return out[i].Signal < out[j].Signal })
	return out, nil
}

func parseThresholdValue(sig Signal, val string) (v Value, skip bool, err error) {
	if strings.HasSuffix(val, "%") {
		if val == "0%" || val == "100%" {
			return Value{}, true, nil
		}
		p, err := parsePercentage(val)
		if err != nil {
			return Value{}, false, fmt.Errorf("%v: %w", sig, err)
		}
		if p < 0 {
			return Value{}, false, fmt.Errorf("eviction percentage threshold %v must be >= 0%%: %s", sig, val)
		}
		if p > 1 {
			return Value{}, false, fmt.Errorf("eviction percentage threshold %v must be <= 100%%: %s", sig, val)
		}
		return Value{Percentage: p}, false, nil
	}
	q, err := resource.ParseQuantity(val)
	if err != nil {
		return Value{}, false, fmt.Errorf("%v: %q: %w", sig, val, err)
	}
	if q.Sign() <= 0 {
		return Value{}, false, fmt.Errorf("eviction threshold %v must be positive: %s", sig, &q)
	}
	return Value{Quantity: &q}, false, nil
}

func parseMinReclaim(sig Signal, val string) (Value, error) {
	if strings.HasSuffix(val, "%") {
		p, err := parsePercentage(val)
		if err != nil {
			return Value{}, fmt.Errorf("%v: %w", sig, err)
		}
		if p <= 0 {
			return Value{}, fmt.Errorf("eviction percentage minimum reclaim %v must be positive: %s", sig, val)
		}
		return Value{Percentage: p}, nil
	}
	q, err := resource.ParseQuantity(val)
	if err != nil {
		return Value{}, fmt.Errorf("%v: %q: %w", sig, val, err)
	}
	if q.Sign() < 0 {
		return Value{}, fmt.Errorf("negative eviction minimum reclaim specified for %v", sig)
	}
	return Value{Quantity: &q}, nil
}

func parsePercentage(s string) (float32, error) {
	f, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 32)
	if err != nil {
		return 0, fmt.Errorf("percentage %q: %w", s, err)
	}
	return float32(f) / 100, nil
}
