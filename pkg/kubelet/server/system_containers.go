package server

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// clockTicks is Linux's USER_HZ, the unit of /proc/<pid>/stat's times.
const clockTicks = 100

// dockerPidFile is where dockerd writes its PID.
const dockerPidFile = "/var/run/docker.pid"

// systemContainers are the agent ("kubelet") and Docker ("runtime"), as
// the kubelet reports its system containers: their processes' CPU time and
// memory, from /proc.
func systemContainers() []statsapi.ContainerStats {
	out := []statsapi.ContainerStats{}
	if st := processStats(statsapi.SystemContainerKubelet, os.Getpid()); st != nil {
		out = append(out, *st)
	}
	if data, err := os.ReadFile(dockerPidFile); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
			if st := processStats(statsapi.SystemContainerRuntime, pid); st != nil {
				out = append(out, *st)
			}
		}
	}
	return out
}

// processStats reads one process's CPU time, resident memory and start.
func processStats(name string, pid int) *statsapi.ContainerStats {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	// The fields after the command (which may hold spaces), from state on.
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return nil
	}
	f := strings.Fields(string(stat[end+1:]))
	if len(f) < 22 {
		return nil
	}
	num := func(i int) uint64 { v, _ := strconv.ParseUint(f[i], 10, 64); return v }
	// state is f[0]: utime, stime, starttime and rss are fields 14, 15, 22
	// and 24 of the line, so f[11], f[12], f[19] and f[21].
	now := metav1.NewTime(time.Now())
	cpu := (num(11) + num(12)) * uint64(time.Second) / clockTicks
	rss := num(21) * uint64(os.Getpagesize())
	st := &statsapi.ContainerStats{Name: name,
		CPU:    &statsapi.CPUStats{Time: now, UsageCoreNanoSeconds: &cpu},
		Memory: &statsapi.MemoryStats{Time: now, RSSBytes: &rss, WorkingSetBytes: &rss}}
	if boot := bootTime(); !boot.IsZero() {
		st.StartTime = metav1.NewTime(boot.Add(time.Duration(num(19)) * time.Second / clockTicks))
	}
	return st
}

// bootTime is when the host booted, from /proc/stat.
func bootTime() time.Time {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			if s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return time.Unix(s, 0)
			}
		}
	}
	return time.Time{}
}
