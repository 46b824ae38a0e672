package kuberuntime

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/classic-kubelet/kubelet/pkg/safefile"
)

// errEnvFileParse is the whole message the kubelet gives when an env file
// cannot be read or parsed (pkg/kubelet/kubelet_pods.go,
// makeEnvironmentVariables): the cause is logged, not shown in the status.
var errEnvFileParse = errors.New("couldn't parse env file")

// fileKey resolves a fileKeyRef as the kubelet v1.37 does: the value of
// ref.Key in the env file at ref.Path inside the pod's emptyDir volume
// ref.VolumeName. found is false for an optional reference whose key is
// absent (or empty: the kubelet cannot tell them apart).
//
// The file is opened beneath the volume's directory without following any
// symlink (the kubelet's securejoin would follow one that stays inside the
// volume): a container writes this directory, and the agent reads as root.
// It is opened non-blocking, so a FIFO there cannot hold the pod's sync.
func fileKey(pod *v1.Pod, ref *v1.FileKeySelector, hostPaths map[string]string) (value string, found bool, err error) {
	root, ok := hostPaths[ref.VolumeName]
	if !ok {
		return "", false, fmt.Errorf("cannot find the volume %q referenced by FileKeyRef", ref.VolumeName)
	}
	f, err := safefile.OpenBeneath(root, ref.Path, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err == nil {
		defer f.Close()
		var st unix.Stat_t
		if err = unix.Fstat(int(f.Fd()), &st); err == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
			err = fmt.Errorf("%s is not a regular file", f.Name())
		}
	}
	if err == nil {
		value, err = parseEnvFile(f, ref.Key)
	}
	if err != nil {
		// The status says only what the kubelet's says; the cause is
		// here, at V(2) since the pod retries on its back-off and a
		// failure is logged at V(0) once, by the pod's worker.
		klog.V(2).Infof("pod %s/%s: failed to parse env file: %v", pod.Namespace, pod.Name, err)
		return "", false, errEnvFileParse
	}
	if value == "" {
		if ref.Optional != nil && *ref.Optional {
			return "", false, nil
		}
		return "", false, fmt.Errorf("environment variable key %q not found in file %q", ref.Key, f.Name())
	}
	return value, true, nil
}

// parseEnvFile returns the value of key in an env file, by the kubelet's
// strict rules (pkg/kubelet/util/env ParseEnv, v1.37): each assignment is
// NAME='value' with no space before '=', the value single-quoted and taken
// literally (it may span lines); blank lines and lines starting with '#'
// are skipped, and a '#' comment may follow the closing quote. A space
// right after '=' makes the value empty, as a shell does. A line is at
// most bufio.MaxScanTokenSize (64 KiB), the kubelet's scanner's limit.
// An absent key is "" without an error; a malformed line before the key
// is an error.
func parseEnvFile(r io.Reader, key string) (string, error) {
	scanner := bufio.NewScanner(r)
	lineNum := 0
	for scanner.Scan() {
		lineNum++
		line := strings.TrimLeft(scanner.Text(), " \t")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, ok := strings.Cut(line, "=")
		switch {
		case !ok:
			return "", fmt.Errorf("invalid environment variable format at line %d: missing '='", lineNum)
		case strings.TrimRight(name, " \t") == "":
			return "", fmt.Errorf("invalid environment variable format at line %d: empty variable name", lineNum)
		case strings.TrimRight(name, " \t") != name:
			return "", fmt.Errorf("invalid environment variable format at line %d: whitespace before '=' is not allowed", lineNum)
		case strings.TrimLeft(rest, " \t") != rest:
			if name == key {
				return "", nil
			}
			continue
		case !strings.HasPrefix(rest, "'"):
			return "", fmt.Errorf("invalid environment variable format at line %d: value must be enclosed in single quotes", lineNum)
		}
		value, err := quotedValue(scanner, rest[1:], &lineNum)
		if err != nil {
			return "", err
		}
		if name == key {
			return value, nil
		}
	}
	if err := scanner.Err(); err != nil {
		return "", fmt.Errorf("error reading environment variable file: %w", err)
	}
	return "", nil
}

// quotedValue reads a single-quoted value from rest (the text after the
// opening quote) and, while the quote is open, the scanner's next lines,
// joined by newlines.
func quotedValue(scanner *bufio.Scanner, rest string, lineNum *int) (string, error) {
	var b strings.Builder
	start := *lineNum
	for {
		if value, after, ok := strings.Cut(rest, "'"); ok {
			b.WriteString(value)
			after = strings.TrimLeft(after, " \t")
			if after != "" && !strings.HasPrefix(after, "#") {
				return "", fmt.Errorf("invalid environment variable format at line %d: unexpected content after closing quote", *lineNum)
			}
			return b.String(), nil
		}
		b.WriteString(rest)
		b.WriteByte('\n')
		if !scanner.Scan() {
			if err := scanner.Err(); err != nil {
				return "", fmt.Errorf("error reading environment variable file: %w", err)
			}
			return "", fmt.Errorf("invalid environment variable format starting at line %d: unclosed single quote", start)
		}
		*lineNum++
		rest = scanner.Text()
	}
}
