package container

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestRestartsByContainerPolicyAndRules(t *testing.T) {
	never, always := v1.ContainerRestartPolicyNever, v1.ContainerRestartPolicyAlways
	in42 := []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
	notIn0 := []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpNotIn, Values: []int32{0}}}}
	for _, tc := range []struct {
		name      string
		podPolicy v1.RestartPolicy
		policy    *v1.ContainerRestartPolicy
		rules     []v1.ContainerRestartRule
		exit      int
		want      bool
	}{
		{"pod policy alone", v1.RestartPolicyAlways, nil, nil, 1, true},
		{"container Never over pod Always", v1.RestartPolicyAlways, &never, nil, 1, false},
		{"container Always over pod Never", v1.RestartPolicyNever, &always, nil, 0, true},
		{"rule In matches", v1.RestartPolicyNever, &never, in42, 42, true},
		{"rule In misses: policy", v1.RestartPolicyNever, &never, in42, 1, false},
		{"rule NotIn matches", v1.RestartPolicyNever, &never, notIn0, 3, true},
		{"rule NotIn misses", v1.RestartPolicyNever, &never, notIn0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := v1.Container{Name: "c", RestartPolicy: tc.policy, RestartPolicyRules: tc.rules}
			pod := &v1.Pod{Spec: v1.PodSpec{RestartPolicy: tc.podPolicy, Containers: []v1.Container{c}}}
			if got := Restarts(pod, &pod.Spec.Containers[0], tc.exit); got != tc.want {
				t.Errorf("restarts after exit %d = %v, want %v", tc.exit, got, tc.want)
			}
		})
	}
}
