package bench

import (
	"reflect"
	"testing"
)

func TestGoroutinesByStart(t *testing.T) {
	dump := "goroutine profile: total 5\n" +
		"3 @ 0x1 0x2\n#\t0x1\truntime.gopark+0x10\t/go/proc.go:1\n#\t0x2\tgithub.com/google/cadvisor/manager.(*containerData).housekeeping+0x3f2\t/m/container.go:566\n\n" +
		"2 @ 0x3\n#\t0x3\tnet/http.(*conn).serve+0x5\t/go/server.go:2\n\n"
	got := goroutinesByStart(dump)
	want := map[string]float64{"github.com/google/cadvisor/manager.(*containerData).housekeeping": 3, "net/http.(*conn).serve": 2}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
