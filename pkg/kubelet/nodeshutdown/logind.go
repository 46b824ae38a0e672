package nodeshutdown

import (
	"context"
	"io"

	"github.com/classic-kubelet/kubelet/pkg/systemd"
)

// DialLogind connects to logind on the system bus (DBUS_SYSTEM_BUS_ADDRESS,
// else the well-known socket).
func DialLogind() (Logind, error) {
	l, err := systemd.DialLogind()
	if err != nil {
		return nil, err
	}
	return logind{l}, nil
}

// logind is systemd.Logind as the manager uses it.
type logind struct{ *systemd.Logind }

var _ Logind = logind{}

func (l logind) InhibitShutdown(ctx context.Context, who, why string) (io.Closer, error) {
	f, err := l.Logind.InhibitShutdown(ctx, who, why)
	if err != nil {
		return nil, err
	}
	return f, nil
}
