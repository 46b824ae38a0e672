package eviction

import (
	"strings"
	"testing"
)

func TestParseThresholds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags Flags
		want  []string // Threshold.String(), with grace and min reclaim
		err   string
	}{
		{name: "defaults", flags: Flags{Hard: DefaultHard},
			want: []string{"hard imagefs.available<15%", "hard memory.available<100Mi", "hard nodefs.available<10%", "hard nodefs.inodesFree<5%"}},
		{name: "empty means none", flags: Flags{Hard: ""}},
		{name: "0% and 100% ignored", flags: Flags{Hard: "nodefs.available<0%,imagefs.available<100%"}},
		{name: "soft with grace and min reclaim",
			flags: Flags{Soft: "memory.available<1.5Gi", SoftGracePeriod: "memory.available=1m30s", MinimumReclaim: "memory.available=500Mi"},
			want:  []string{"soft memory.available<1536Mi grace=1m30s reclaim=500Mi"}},
		{name: "pid", flags: Flags{Hard: "pid.available<1k"}, want: []string{"hard pid.available<1k"}},
		{name: "unknown signal", flags: Flags{Hard: "memory.free<1Gi"}, err: "--eviction-hard: unsupported eviction signal memory.free"},
		{name: "no operator", flags: Flags{Hard: "memory.available=1Gi"}, err: `--eviction-hard: "memory.available=1Gi": want <signal><<value>`},
		{name: "bad quantity", flags: Flags{Hard: "memory.available<lots"}, err: "--eviction-hard: memory.available"},
		{name: "zero quantity", flags: Flags{Hard: "memory.available<0"}, err: "--eviction-hard: eviction threshold memory.available must be positive: 0"},
		{name: "percent over 100", flags: Flags{Hard: "nodefs.available<150%"}, err: "must be <= 100%"},
		{name: "negative percent", flags: Flags{Hard: "nodefs.available<-5%"}, err: "must be >= 0%"},
		{name: "soft without grace", flags: Flags{Soft: "memory.available<1Gi"},
			err: "--eviction-soft: grace period must be specified for the soft eviction threshold memory.available"},
		{name: "bad grace", flags: Flags{Soft: "memory.available<1Gi", SoftGracePeriod: "memory.available=soon"}, err: "--eviction-soft-grace-period: memory.available"},
		{name: "grace of unknown signal", flags: Flags{SoftGracePeriod: "cpu=1m"}, err: "--eviction-soft-grace-period: unsupported eviction signal cpu"},
		{name: "negative reclaim", flags: Flags{Hard: "memory.available<1Gi", MinimumReclaim: "memory.available=-1Mi"},
			err: "--eviction-minimum-reclaim: negative eviction minimum reclaim specified for memory.available"},
		{name: "zero percent reclaim", flags: Flags{Hard: "nodefs.available<10%", MinimumReclaim: "nodefs.available=0%"},
			err: "--eviction-minimum-reclaim: eviction percentage minimum reclaim nodefs.available must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseThresholds(tc.flags)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, th := range got {
				d := th.String()
				if th.GracePeriod > 0 {
					d += " grace=" + th.GracePeriod.String()
				}
				if th.MinReclaim != nil {
					d += " reclaim=" + formatValue(*th.MinReclaim)
				}
				s = append(s, d)
			}
			if strings.Join(s, ";") != strings.Join(tc.want, ";") {
				t.Errorf("got %q, want %q", s, tc.want)
			}
		})
	}
}

func TestValueOf(t *testing.T) {
	th, err := ParseThresholds(Flags{Hard: "nodefs.available<10%,memory.available<100Mi"})
	if err != nil {
		t.Fatal(err)
	}
	if got := th[0].Value.of(1000 << 20); got != 100<<20 {
		t.Errorf("memory: %d", got)
	}
	if got := th[1].Value.of(1000); got != 100 {
		t.Errorf("10%% of 1000: %d", got)
	}
}
