package dockertools

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	kubecontainer "github.com/classic-kubelet/kubelet/pkg/kubelet/container"
)

// procRoot is where the host's processes are seen; replaced in tests.
var procRoot = "/proc"

// processUser is the identity of container id's running process pid, as a
// CRI runtime's container status gives it (the kubelet's containerStatuses
// []. user): read from the process itself, since Docker's inspect names
// only the user as written (a name, or uid:gid). nil when the process is
// not the container's as this host sees it (a daemon in another PID
// namespace, or one across the network): its cgroup must name the
// container.
func processUser(id string, pid int) *kubecontainer.ContainerUser {
	if pid <= 0 || id == "" {
		return nil
	}
	dir := filepath.Join(procRoot, strconv.Itoa(pid))
	cg, err := os.ReadFile(filepath.Join(dir, "cgroup"))
	if err != nil || !bytes.Contains(cg, []byte(id)) {
		return nil
	}
	f, err := os.Open(filepath.Join(dir, "status"))
	if err != nil {
		return nil
	}
	defer f.Close()
	u, err := parseProcStatus(f)
	if err != nil {
		return nil
	}
	return u
}

// parseProcStatus reads the real uid, the real gid and the groups from a
// /proc/<pid>/status. The primary gid comes first among the groups, then
// the others in the kernel's (ascending) order, as containerd lists a
// process's additional gids.
func parseProcStatus(r io.Reader) (*kubecontainer.ContainerUser, error) {
	var u kubecontainer.ContainerUser
	var groups []int64
	seen := 0
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(val)
		switch key {
		case "Uid", "Gid":
			if len(fields) == 0 {
				return nil, fmt.Errorf("%s: no value", key)
			}
			n, err := strconv.ParseInt(fields[0], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", key, err)
			}
			if key == "Uid" {
				u.UID = n
			} else {
				u.GID = n
			}
			seen++
		case "Groups":
			for _, f := range fields {
				n, err := strconv.ParseInt(f, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("groups: %w", err)
				}
				groups = append(groups, n)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if seen != 2 {
		return nil, fmt.Errorf("no Uid or Gid line")
	}
	u.SupplementalGroups = []int64{u.GID}
	for _, g := range groups {
		if !slices.Contains(u.SupplementalGroups, g) {
			u.SupplementalGroups = append(u.SupplementalGroups, g)
		}
	}
	return &u, nil
}
