//go:build tools

// Module cniplugins builds the reference CNI plugins the CNI-mode tests and
// `make cluster` run (bridge, host-local, portmap, loopback, bandwidth,
// firewall), from
// github.com/containernetworking/plugins. It is a module of its own so that
// none of it reaches the agent's go.mod (the agent links only libcni);
// hack/ensure-cni-plugins.sh builds them once per machine.
package cniplugins

import (
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/bridge"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
	_ "github.com/containernetworking/plugins/plugins/meta/bandwidth"
	_ "github.com/containernetworking/plugins/plugins/meta/firewall"
	_ "github.com/containernetworking/plugins/plugins/meta/portmap"
)
