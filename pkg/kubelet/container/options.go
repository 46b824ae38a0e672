package container

import "time"

// LogOptions selects what a runtime's Logs streams of a container's output.
type LogOptions struct {
	Follow     bool
	Timestamps bool
	TailLines  int64     // < 0: all
	Since      time.Time // zero: from the start
	// LimitBytes bounds the bytes written, timestamps included, the last
	// line cut at the bound (0: no bound), as the kubelet's limitBytes.
	LimitBytes int64
}
