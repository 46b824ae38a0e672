package bench

import (
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// series is one line of a chart.
type series struct {
	name   string
	points [][2]float64 // x, y; drawn in x order
}

// Charts draws the run's pictures as SVG files in dir and returns their
// names: time to running against pods per burst for every contender, the
// distribution of arrival (and churn) latencies, and idle CPU and memory
// against pod count.
func Charts(dir string, rs []Result) ([]string, error) {
	charts := map[string]string{}

	// Bursts: every contender's median, the baseline as its sweep's best.
	bursts := map[string]*series{}
	add := func(name string, x, y float64) {
		if bursts[name] == nil {
			bursts[name] = &series{name: name}
		}
		bursts[name].points = append(bursts[name].points, [2]float64{x, y})
	}
	for _, r := range rs {
		var n float64
		if _, err := fmt.Sscanf(r.Scenario, "%g pod(s) dropped at once", &n); err != nil || r.Note != "" {
			continue
		}
		for k, v := range r.Values {
			if k == "ratio" || k == "baseline level" || strings.HasPrefix(k, "baseline c=") {
				continue
			}
			add(k, n, v)
		}
	}
	if len(bursts) > 0 {
		charts["bench-bursts.svg"] = lineChart("Pods dropped at once: time to running", "pods per burst", "ms", sorted(bursts), false)
	}

	// Latency distributions: the share of pods running within x ms.
	var cdfs []series
	for _, r := range rs {
		prefix := ""
		switch {
		case strings.Contains(r.Scenario, "arriving at"):
			prefix = "arrivals: "
		case strings.HasPrefix(r.Scenario, "churn"):
			prefix = "churn: "
		default:
			continue
		}
		for _, name := range sortedKeys(r.Samples) {
			cdfs = append(cdfs, series{name: prefix + name, points: cdf(r.Samples[name])})
		}
	}
	if len(cdfs) > 0 {
		charts["bench-latency.svg"] = lineChart("Pods arriving one by one: time to running", "ms from arrival", "share of pods running", cdfs, true)
	}

	// Idle cost by pod count.
	cpu := map[string]*series{}
	rss := map[string]*series{}
	for _, r := range rs {
		if !strings.Contains(r.Scenario, "idle pods") || r.Note != "" {
			continue
		}
		n := r.Values["pods"]
		for k, v := range r.Values {
			var m map[string]*series
			switch {
			case strings.HasSuffix(k, "CPU (cores)"):
				m = cpu
			case strings.HasSuffix(k, "RSS (MiB)"):
				m = rss
			default:
				continue
			}
			name := strings.Fields(k)[0]
			if m[name] == nil {
				m[name] = &series{name: name}
			}
			m[name].points = append(m[name].points, [2]float64{n, v})
		}
	}
	if len(cpu) > 0 {
		charts["bench-idle-cpu.svg"] = lineChart("Idle pods: CPU", "pods", "cores", sorted(cpu), false)
		charts["bench-idle-memory.svg"] = lineChart("Idle pods: agent memory", "pods", "RSS (MiB)", sorted(rss), false)
	}

	var names []string
	for _, name := range sortedKeys(charts) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(charts[name]), 0o644); err != nil {
			return nil, err
		}
		names = append(names, name)
	}
	return names, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func sorted(m map[string]*series) []series {
	var out []series
	for _, k := range sortedKeys(m) {
		s := *m[k]
		sort.Slice(s.points, func(i, j int) bool { return s.points[i][0] < s.points[j][0] })
		out = append(out, s)
	}
	return out
}

// cdf is the empirical distribution of xs: (x, share of samples <= x).
func cdf(xs []float64) [][2]float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	out := make([][2]float64, len(s))
	for i, x := range s {
		out[i] = [2]float64{x, float64(i+1) / float64(len(s))}
	}
	return out
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}

// lineChart draws the series on linear axes from zero; steps draws each as
// a staircase (a distribution) rather than points joined by lines.
func lineChart(title, xLabel, yLabel string, ss []series, steps bool) string {
	const w, h, left, right, top, bottom = 720.0, 420.0, 70.0, 200.0, 40.0, 50.0
	var xMax, yMax float64
	for _, s := range ss {
		for _, p := range s.points {
			xMax, yMax = math.Max(xMax, p[0]), math.Max(yMax, p[1])
		}
	}
	xStep, yStep := niceStep(xMax), niceStep(yMax)
	xMax, yMax = math.Ceil(xMax/xStep)*xStep, math.Ceil(yMax/yStep)*yStep
	px := func(x float64) float64 { return left + x/xMax*(w-left-right) }
	py := func(y float64) float64 { return h - bottom - y/yMax*(h-top-bottom) }

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(title))
	for x := 0.0; x <= xMax+xStep/2; x += xStep {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n",
			px(x), py(0), px(x), py(yMax), px(x), h-bottom+16, tick(x))
	}
	for y := 0.0; y <= yMax+yStep/2; y += yStep {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n",
			px(0), py(y), px(xMax), py(y), left-6, py(y)+4, tick(y))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", (left+w-right)/2, h-10, html.EscapeString(xLabel))
	fmt.Fprintf(&b, `<text transform="translate(16 %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", (top+h-bottom)/2, html.EscapeString(yLabel))
	for i, s := range ss {
		color := palette[i%len(palette)]
		var pts []string
		prevY := 0.0
		for _, p := range s.points {
			if steps {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p[0]), py(prevY)))
				prevY = p[1]
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(p[0]), py(p[1])))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", color, strings.Join(pts, " "))
		if !steps {
			for _, p := range s.points {
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", px(p[0]), py(p[1]), color)
			}
		}
		ly := top + 10 + float64(i)*18
		fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="%s" stroke-width="3"/><text x="%.0f" y="%.1f">%s</text>`+"\n",
			w-right+14, ly, w-right+34, ly, color, w-right+40, ly+4, html.EscapeString(s.name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// niceStep is a round grid step that cuts [0, max] into about five.
func niceStep(max float64) float64 {
	if max <= 0 {
		return 1
	}
	raw := max / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}

func tick(v float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
}
