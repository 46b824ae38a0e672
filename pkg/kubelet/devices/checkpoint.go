package devices

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"sort"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/types"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/classic-kubelet/kubelet/pkg/safefile"
)

// CheckpointName is the checkpoint of the assignments, in the device-plugin
// directory beside the sockets, named as the kubelet's.
const CheckpointName = "kubelet_internal_checkpoint"

// noTopology is the NUMA node of the checkpoint under which devices
// without topology are listed (the kubelet's -1).
const noTopology = -1

// checkpointEntry is one container's devices of one resource. The layout
// is the kubelet's (devices by NUMA node, the plugin's Allocate response
// as protobuf bytes), so a reader of the kubelet's file reads ours; the
// checksum is our own (an FNV-32a of the data's JSON), so the files are
// not interchangeable with a kubelet's.
type checkpointEntry struct {
	PodUID        string
	ContainerName string
	ResourceName  string
	DeviceIDs     map[int64][]string
	AllocResp     []byte
}

type checkpointData struct {
	PodDeviceEntries  []checkpointEntry
	RegisteredDevices map[string][]string
}

type checkpointFile struct {
	Data     checkpointData
	Checksum uint64
}

// errCheckpointCorrupt says the checkpoint's checksum does not match its
// data.
var errCheckpointCorrupt = errors.New("devices: checkpoint checksum mismatch")

func checksum(d checkpointData) (uint64, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return 0, err
	}
	h := fnv.New32a()
	_, _ = h.Write(b)
	return uint64(h.Sum32()), nil
}

// encodeCheckpoint is the checkpoint of the assignments and the registered
// devices (healthy ones, by resource), entries in a stable order.
func encodeCheckpoint(assigned map[types.UID]podAssignments, registered map[string][]string) ([]byte, error) {
	d := checkpointData{PodDeviceEntries: []checkpointEntry{}, RegisteredDevices: registered}
	for uid, pod := range assigned {
		for container, byResource := range pod {
			for res, a := range byResource {
				resp, err := proto.Marshal(a.Response)
				if err != nil {
					return nil, fmt.Errorf("encode allocation of %s/%s %s: %w", uid, container, res, err)
				}
				d.PodDeviceEntries = append(d.PodDeviceEntries, checkpointEntry{PodUID: string(uid), ContainerName: container,
					ResourceName: res, DeviceIDs: a.byNUMA(), AllocResp: resp})
			}
		}
	}
	sort.Slice(d.PodDeviceEntries, func(i, j int) bool {
		a, b := d.PodDeviceEntries[i], d.PodDeviceEntries[j]
		if a.PodUID != b.PodUID {
			return a.PodUID < b.PodUID
		}
		if a.ContainerName != b.ContainerName {
			return a.ContainerName < b.ContainerName
		}
		return a.ResourceName < b.ResourceName
	})
	sum, err := checksum(d)
	if err != nil {
		return nil, err
	}
	return json.Marshal(checkpointFile{Data: d, Checksum: sum})
}

// decodeCheckpoint reads what encodeCheckpoint wrote.
func decodeCheckpoint(b []byte) (map[types.UID]podAssignments, map[string][]string, error) {
	var f checkpointFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, nil, fmt.Errorf("decode checkpoint: %w", err)
	}
	if sum, err := checksum(f.Data); err != nil || sum != f.Checksum {
		return nil, nil, errCheckpointCorrupt
	}
	assigned := map[types.UID]podAssignments{}
	for _, e := range f.Data.PodDeviceEntries {
		resp := &pluginapi.ContainerAllocateResponse{}
		if err := proto.Unmarshal(e.AllocResp, resp); err != nil {
			return nil, nil, fmt.Errorf("decode allocation of %s/%s %s: %w", e.PodUID, e.ContainerName, e.ResourceName, err)
		}
		a := &assignment{Response: resp, NUMA: map[string][]int64{}}
		for node, ids := range e.DeviceIDs {
			for _, id := range ids {
				if _, seen := a.NUMA[id]; !seen {
					a.IDs = append(a.IDs, id)
				}
				if node != noTopology {
					a.NUMA[id] = append(a.NUMA[id], node)
				} else if a.NUMA[id] == nil {
					a.NUMA[id] = nil
				}
			}
		}
		sort.Strings(a.IDs)
		assign(assigned, types.UID(e.PodUID), e.ContainerName, e.ResourceName, a)
	}
	return assigned, f.Data.RegisteredDevices, nil
}

// readCheckpoint reads the checkpoint at path; a missing one is empty.
func readCheckpoint(path string) (map[types.UID]podAssignments, map[string][]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[types.UID]podAssignments{}, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return decodeCheckpoint(b)
}

// writeCheckpoint writes the checkpoint durably.
func writeCheckpoint(path string, data []byte) error {
	return safefile.WriteAtomic(path, data)
}
