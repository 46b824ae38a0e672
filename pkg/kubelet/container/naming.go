package container

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
)

// namePrefix marks containers the agent names; the classic agent used it too.
const namePrefix = "k8s"

// ContainerName is what a Docker container name
// k8s_<container>.<hash>_<pod>_<namespace>_<uid>_<rand> says.
type ContainerName struct {
	Container string
	Hash      string
	Pod       string
	Namespace string
	UID       string
	Rand      string
}

// BuildName returns the Docker name for n, with a fresh random suffix when
// n.Rand is empty, so that every restart of a container gets a new name.
func BuildName(n ContainerName) string {
	if n.Rand == "" {
		n.Rand = randSuffix()
	}
	return fmt.Sprintf("%s_%s.%s_%s_%s_%s_%s", namePrefix, n.Container, n.Hash, n.Pod, n.Namespace, n.UID, n.Rand)
}

// ParseName parses a Docker container name (with or without Docker's leading
// "/"). A name the agent did not make is an error.
func ParseName(name string) (ContainerName, error) {
	name = strings.TrimPrefix(name, "/")
	parts := strings.Split(name, "_")
	if len(parts) != 6 || parts[0] != namePrefix {
		return ContainerName{}, fmt.Errorf("%w: %q", ErrNotOurName, name)
	}
	container, hash, ok := strings.Cut(parts[1], ".")
	if !ok || container == "" || hash == "" || parts[2] == "" || parts[3] == "" || parts[4] == "" {
		return ContainerName{}, fmt.Errorf("%w: %q", ErrNotOurName, name)
	}
	return ContainerName{Container: container, Hash: hash, Pod: parts[2], Namespace: parts[3], UID: parts[4], Rand: parts[5]}, nil
}

func randSuffix() string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // never fails on Linux
	}
	return hex.EncodeToString(b[:])
}
