// Package probe holds what every probe mechanism returns. A probe that
// fails is a Result; an error means the probe could not be carried out.
package probe

// Result is the outcome of one probe.
type Result int

const (
	// Success: the check passed.
	Success Result = iota
	// Failure: the check ran and failed (wrong status, refused, exit code).
	Failure
	// Warning: the check passed, with something to report (an HTTP
	// redirect not followed); it counts as Success.
	Warning
)

func (r Result) String() string {
	switch r {
	case Success:
		return "success"
	case Warning:
		return "warning"
	}
	return "failure"
}

// MaxOutput caps the output a probe keeps (for status messages and logs).
const MaxOutput = 10 << 10

// Truncate keeps at most MaxOutput bytes of out.
func Truncate(out string) string {
	if len(out) > MaxOutput {
		return out[:MaxOutput]
	}
	return out
}
