package devices

import (
	"context"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// dialTimeout bounds the connection to a registering plugin and its
// options call: the plugin serves its socket before it registers, so a
// plugin that does not answer within it is broken (the kubelet's 10 s).
const dialTimeout = 10 * time.Second

// callTimeout bounds Allocate and GetPreferredAllocation; PreStartContainer
// gets the API's own bound (KubeletPreStartContainerRPCTimeoutInSecs).
const callTimeout = 30 * time.Second

// plugin is the agent's connection to one registered device plugin: the
// resource it serves, its socket, the options it announced.
type plugin struct {
	resource string
	socket   string
	conn     *grpc.ClientConn
	client   pluginapi.DevicePluginClient
	opts     *pluginapi.DevicePluginOptions
}

// dialPlugin connects to the plugin serving resource on socket and asks
// its options.
func dialPlugin(ctx context.Context, resource, socket string) (*plugin, error) {
	// A plugin serves its socket before it registers: one missing is a
	// refusal at once, not a wait.
	if fi, err := os.Stat(socket); err != nil || fi.Mode()&os.ModeSocket == 0 {
		return nil, fmt.Errorf("get options of device plugin %s: no socket at %s", resource, socket)
	}
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithAuthority("localhost"))
	if err != nil {
		return nil, fmt.Errorf("dial device plugin %s at %s: %w", resource, socket, err)
	}
	p := &plugin{resource: resource, socket: socket, conn: conn, client: pluginapi.NewDevicePluginClient(conn)}
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	opts, err := p.client.GetDevicePluginOptions(ctx, &pluginapi.Empty{}, grpc.WaitForReady(true))
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("get options of device plugin %s at %s: %w", resource, socket, err)
	}
	p.opts = opts
	return p, nil
}

// preferred asks the plugin which size devices of available it prefers,
// mustInclude among them; nil if its options say it has no preference.
func (p *plugin) preferred(ctx context.Context, available, mustInclude []string, size int) ([]string, error) {
	if p.opts == nil || !p.opts.GetPreferredAllocationAvailable {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := p.client.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
		AvailableDeviceIDs: available, MustIncludeDeviceIDs: mustInclude, AllocationSize: int32(size)}}})
	if err != nil {
		return nil, fmt.Errorf("device plugin GetPreferredAllocation rpc failed with err: %w", err)
	}
	if len(resp.ContainerResponses) == 0 {
		return nil, nil
	}
	return resp.ContainerResponses[0].DeviceIDs, nil
}

// allocate asks the plugin to prepare ids for one container.
func (p *plugin) allocate(ctx context.Context, ids []string) (*pluginapi.ContainerAllocateResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := p.client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
	if err != nil {
		return nil, fmt.Errorf("device plugin %s Allocate rpc failed with err: %w", p.resource, err)
	}
	if len(resp.ContainerResponses) == 0 {
		return nil, fmt.Errorf("no containers return in allocation response %v", resp)
	}
	return resp.ContainerResponses[0], nil
}

// preStart tells the plugin a container with ids is about to start, if its
// options ask for it.
func (p *plugin) preStart(ctx context.Context, ids []string) error {
	if p.opts == nil || !p.opts.PreStartRequired {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, pluginapi.KubeletPreStartContainerRPCTimeoutInSecs*time.Second)
	defer cancel()
	if _, err := p.client.PreStartContainer(ctx, &pluginapi.PreStartContainerRequest{DevicesIds: ids}); err != nil {
		return fmt.Errorf("device plugin PreStartContainer rpc failed with err: %w", err)
	}
	return nil
}

// watch receives the plugin's device lists until its stream ends (the
// plugin stopped, or ctx ended), handing each to update.
func (p *plugin) watch(ctx context.Context, update func([]*pluginapi.Device)) error {
	stream, err := p.client.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		return err
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return err
		}
		update(resp.Devices)
	}
}

func (p *plugin) close() { _ = p.conn.Close() }
