package kubeapi

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/classic-kubelet/kubelet/pkg/kubelet/volumes/csi"
)

// nodeIDAnnotation maps each registered driver to its node ID on the Node,
// as the kubelet keeps it.
const nodeIDAnnotation = "csi.volume.kubernetes.io/nodeid"

// CSINodes records the node's registered CSI drivers where the control
// plane reads them, as the kubelet's node info manager: the CSINode object
// of the node's name (owned by the Node), the Node's nodeid annotation and
// the drivers' topology labels (kept when a driver goes, as the kubelet
// keeps them).
type CSINodes struct {
	client kubernetes.Interface
	node   string
}

// NewCSINodes writes the CSINode of node through client.
func NewCSINodes(client kubernetes.Interface, node string) *CSINodes {
	return &CSINodes{client: client, node: node}
}

// InstallDriver records a driver that registered.
func (c *CSINodes) InstallDriver(ctx context.Context, d csi.DriverInfo) error {
	labels := map[string]*string{}
	for k, v := range d.Topology {
		labels[k] = ptr.To(v)
	}
	if err := c.patchNode(ctx, d.Name, ptr.To(d.NodeID), labels); err != nil {
		return err
	}
	keys := make([]string, 0, len(d.Topology))
	for k := range d.Topology {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	entry := storagev1.CSINodeDriver{Name: d.Name, NodeID: d.NodeID, TopologyKeys: keys}
	if d.MaxVolumes > 0 {
		entry.Allocatable = &storagev1.VolumeNodeResources{Count: ptr.To(int32(d.MaxVolumes))}
	}
	return c.updateCSINode(ctx, func(drivers []storagev1.CSINodeDriver) []storagev1.CSINodeDriver {
		drivers = slices.DeleteFunc(drivers, func(e storagev1.CSINodeDriver) bool { return e.Name == d.Name })
		return append(drivers, entry)
	})
}

// UninstallDriver removes a driver that went.
func (c *CSINodes) UninstallDriver(ctx context.Context, name string) error {
	if err := c.updateCSINode(ctx, func(drivers []storagev1.CSINodeDriver) []storagev1.CSINodeDriver {
		return slices.DeleteFunc(drivers, func(e storagev1.CSINodeDriver) bool { return e.Name == name })
	}); err != nil {
		return err
	}
	return c.patchNode(ctx, name, nil, nil)
}

// patchNode sets (nodeID non-nil) or removes the driver's entry of the
// nodeid annotation, and sets labels.
func (c *CSINodes) patchNode(ctx context.Context, driver string, nodeID *string, labels map[string]*string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := c.client.CoreV1().Nodes().Get(ctx, c.node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		ids := map[string]string{}
		if s := node.Annotations[nodeIDAnnotation]; s != "" {
			if err := json.Unmarshal([]byte(s), &ids); err != nil {
				return fmt.Errorf("annotation %s of node %s: %w", nodeIDAnnotation, c.node, err)
			}
		}
		if nodeID != nil {
			ids[driver] = *nodeID
		} else {
			delete(ids, driver)
		}
		var annotation *string
		if len(ids) > 0 {
			b, _ := json.Marshal(ids)
			annotation = ptr.To(string(b))
		}
		meta := map[string]any{"resourceVersion": node.ResourceVersion, "annotations": map[string]*string{nodeIDAnnotation: annotation}}
		if len(labels) > 0 { // a null would remove them all
			meta["labels"] = labels
		}
		patch, _ := json.Marshal(map[string]any{"metadata": meta})
		_, err = c.client.CoreV1().Nodes().Patch(ctx, c.node, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
		return err
	})
}

// updateCSINode applies edit to the CSINode's drivers, making the CSINode
// (owned by the Node) if there is none.
func (c *CSINodes) updateCSINode(ctx context.Context, edit func([]storagev1.CSINodeDriver) []storagev1.CSINodeDriver) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		api := c.client.StorageV1().CSINodes()
		cur, err := api.Get(ctx, c.node, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			node, err := c.client.CoreV1().Nodes().Get(ctx, c.node, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur = &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: c.node, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}}}
			cur.Spec.Drivers = edit(nil)
			_, err = api.Create(ctx, cur, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(storagev1.Resource("csinodes"), c.node, err)
			}
			return err
		} else if err != nil {
			return err
		}
		cur.Spec.Drivers = edit(cur.Spec.Drivers)
		_, err = api.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

// CSIDriver returns the driver's CSIDriver object, nil if it has none, as
// read at most ttl ago.
func (o *Objects) CSIDriver(ctx context.Context, name string) (*storagev1.CSIDriver, error) {
	obj, err := o.get(ctx, "csidriver/"+name, func() (any, error) {
		return o.client.StorageV1().CSIDrivers().Get(ctx, name, metav1.GetOptions{})
	})
	if apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return obj.(*storagev1.CSIDriver), nil
}

// VolumeAttachment reads a volume's attachment to this node, never from
// the cache: a pod waits for it to be attached.
func (o *Objects) VolumeAttachment(ctx context.Context, name string) (*storagev1.VolumeAttachment, error) {
	return o.client.StorageV1().VolumeAttachments().Get(ctx, name, metav1.GetOptions{})
}
