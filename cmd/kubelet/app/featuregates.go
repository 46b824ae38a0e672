package app

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/util/version"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/component-base/featuregate"
)

// kubeletVersion is the kubelet release whose feature gates, configuration
// and defaults the agent follows.
var kubeletVersion = version.MustParse("1.37")

// newFeatureGate is a feature gate knowing the kubelet's gates at
// kubeletVersion: Kubernetes' own (kubeletFeatureGates, generated) and
// client-go's, which the kubelet registers too.
func newFeatureGate() (featuregate.MutableVersionedFeatureGate, error) {
	fg := featuregate.NewVersionedFeatureGate(kubeletVersion)
	if err := fg.AddVersioned(kubeletFeatureGates); err != nil {
		return nil, fmt.Errorf("feature gates: %w", err)
	}
	if err := clientfeatures.AddVersionedFeaturesToExistingFeatureGates(clientGates{fg}); err != nil {
		return nil, fmt.Errorf("client-go feature gates: %w", err)
	}
	return fg, nil
}

// checkFeatureGates parses gates as the kubelet does: an unknown gate, or
// a locked one set against its lock, is an error. The agent's behaviour does
// not change with a gate but the logging ones, so each other gate set away
// from its default is returned as a warning.
func checkFeatureGates(gates map[string]bool) ([]string, error) {
	if len(gates) == 0 {
		return nil, nil
	}
	fg, err := newFeatureGate()
	if err != nil {
		return nil, err
	}
	if err := fg.SetFromMap(gates); err != nil {
		return nil, fmt.Errorf("--feature-gates: %w", err)
	}
	defaults := fg.GetAll()
	var warnings []string
	for name, on := range gates {
		if spec, ok := defaults[featuregate.Feature(name)]; ok && spec.Default != on && !loggingGates[name] {
			warnings = append(warnings, fmt.Sprintf("feature gate %s=%t is accepted, but this agent does not act on it (it behaves as with %t)", name, on, spec.Default))
		}
	}
	sort.Strings(warnings)
	return warnings, nil
}

// loggingGates are the gates component-base's logging options follow
// (ApplyLogging passes them on).
var loggingGates = map[string]bool{"ContextualLogging": true, "LoggingAlphaOptions": true, "LoggingBetaOptions": true}

// clientGates adds client-go's gates, whose types are client-go's own, to a
// component-base gate.
type clientGates struct {
	fg featuregate.MutableVersionedFeatureGate
}

var _ clientfeatures.VersionedRegistry = clientGates{}

func (c clientGates) AddVersioned(in map[clientfeatures.Feature]clientfeatures.VersionedSpecs) error {
	out := map[featuregate.Feature]featuregate.VersionedSpecs{}
	for name, specs := range in {
		for _, s := range specs {
			spec := featuregate.FeatureSpec{Default: s.Default, LockToDefault: s.LockToDefault, Version: s.Version}
			switch s.PreRelease {
			case clientfeatures.Alpha:
				spec.PreRelease = featuregate.Alpha
			case clientfeatures.Beta:
				spec.PreRelease = featuregate.Beta
			case clientfeatures.GA:
				spec.PreRelease = featuregate.GA
			case clientfeatures.Deprecated:
				spec.PreRelease = featuregate.Deprecated
			default:
				return fmt.Errorf("client-go feature gate %s: unknown stage %q", name, s.PreRelease)
			}
			out[featuregate.Feature(name)] = append(out[featuregate.Feature(name)], spec)
		}
	}
	return c.fg.AddVersioned(out)
}
