package container

import "time"

// LogOptions selects what a runtime's Logs streams of a container's output.
type LogOptions struct {
	Follow     bool
	Timestamps bool
	TailLines  int64     // < 0: all
	Since      time.Time // zero: from the start
}
