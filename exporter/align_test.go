package exporter

import (
	"log/slog"
	"slices"
	"testing"
	"time"
)

// scrapesEvery returns n arrivals every period from first, each moved by the matching jitter
// (cycled).
func scrapesEvery(first time.Time, period time.Duration, n int, jitter ...time.Duration) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = first.Add(time.Duration(i) * period)
		if len(jitter) > 0 {
			out[i] = out[i].Add(jitter[i%len(jitter)])
		}
	}
	return out
}

func TestScraperPeriod(t *testing.T) {
	for _, tc := range []struct {
		name     string
		arrivals []time.Time
		want     time.Duration // 0: not regular
	}{
		{"five evenly spaced", scrapesEvery(t0, 5*time.Second, 5), 5 * time.Second},
		{"jitter of a few ms: the median gap", scrapesEvery(t0, 30*time.Second, 5, 0, 3*time.Millisecond, -4*time.Millisecond), 30003 * time.Millisecond},
		{"four arrivals are too few to judge", scrapesEvery(t0, 5*time.Second, 4), 0},
		{"one missed scrape doubles a gap", append(scrapesEvery(t0, 5*time.Second, 4), t0.Add(25*time.Second)), 0},
		{"gaps straying by 20%", scrapesEvery(t0, 5*time.Second, 5, 0, time.Second), 0},
		{"a person reloading the page", []time.Time{t0, t0.Add(2 * time.Second), t0.Add(9 * time.Second), t0.Add(11 * time.Second), t0.Add(30 * time.Second)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := (&scraper{arrivals: tc.arrivals}).period()
			if ok != (tc.want > 0) || got != tc.want {
				t.Errorf("period() = %v, %v; want %v (regular: %v)", got, ok, tc.want, tc.want > 0)
			}
		})
	}
}

// TestScrapeAlignerNext: where the next cycle starts, given the scrapes seen so far. The
// previous cycle started at t0 and took 100ms; the collection interval is 5s unless said.
func TestScrapeAlignerNext(t *testing.T) {
	const duration = 100 * time.Millisecond
	lead := duration + alignMargin
	type scrapes struct {
		from     string
		arrivals []time.Time
	}
	for _, tc := range []struct {
		name     string
		interval time.Duration
		scrapes  []scrapes
		now      time.Time // when the plan is made; zero: t0 + duration
		want     time.Time
		aligned  bool
	}{{
		name: "no scraper: the fixed phase",
		want: t0.Add(5 * time.Second),
	}, {
		// The phase of the bench before alignment: the scrape 4.3s after the cycle.
		name:    "5s scrapes 4.3s after the cycle: the next one ends just before the scrape",
		scrapes: []scrapes{{"10.0.0.1:40000", scrapesEvery(t0.Add(-25*time.Second+4300*time.Millisecond), 5*time.Second, 5)}},
		want:    t0.Add(4300*time.Millisecond - lead),
		aligned: true,
	}, {
		name:    "5s scrapes 0.2s after the cycle: the next one comes earlier, never later",
		scrapes: []scrapes{{"10.0.0.1:40000", scrapesEvery(t0.Add(-25*time.Second+200*time.Millisecond), 5*time.Second, 5)}},
		want:    t0.Add(5*time.Second + 200*time.Millisecond - lead),
		aligned: true,
	}, {
		name:    "30s scrapes: one cycle in six ends just before each",
		scrapes: []scrapes{{"10.0.0.1:40000", scrapesEvery(t0.Add(-150*time.Second+17*time.Second), 30*time.Second, 5)}},
		want:    t0.Add(2*time.Second - lead),
		aligned: true,
	}, {
		name:     "5s scrapes and a 10s interval: every cycle ends before every other scrape",
		interval: 10 * time.Second,
		scrapes:  []scrapes{{"10.0.0.1:40000", scrapesEvery(t0.Add(-24*time.Second), 5*time.Second, 5)}},
		want:     t0.Add(6*time.Second - lead),
		aligned:  true,
	}, {
		name:    "7s scrapes would drift through a 5s cycle: fixed phase",
		scrapes: []scrapes{{"10.0.0.1:40000", scrapesEvery(t0.Add(-30*time.Second), 7*time.Second, 5)}},
		want:    t0.Add(5 * time.Second),
	}, {
		name:    "irregular scrapes: fixed phase",
		scrapes: []scrapes{{"10.0.0.1:40000", scrapesEvery(t0.Add(-25*time.Second), 5*time.Second, 5, 0, 2*time.Second)}},
		want:    t0.Add(5 * time.Second),
	}, {
		name:    "a scraper that stopped three intervals ago: fixed phase",
		scrapes: []scrapes{{"10.0.0.1:40000", scrapesEvery(t0.Add(-40*time.Second), 5*time.Second, 5)}},
		want:    t0.Add(5 * time.Second),
	}, {
		name:    "one address on new ports (reconnects) is one scraper",
		scrapes: []scrapes{{"10.0.0.1:1", scrapesEvery(t0.Add(-22*time.Second), 5*time.Second, 3)}, {"10.0.0.1:2", scrapesEvery(t0.Add(-7*time.Second), 5*time.Second, 2)}},
		want:    t0.Add(3*time.Second - lead),
		aligned: true,
	}, {
		name:    "a cycle that ran past its aligned start: the next starts now",
		scrapes: []scrapes{{"10.0.0.1:40000", scrapesEvery(t0.Add(-24700*time.Millisecond), 5*time.Second, 5)}},
		now:     t0.Add(4990 * time.Millisecond),
		want:    t0.Add(4990 * time.Millisecond),
		aligned: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			interval := tc.interval
			if interval == 0 {
				interval = 5 * time.Second
			}
			now := tc.now
			if now.IsZero() {
				now = t0.Add(duration)
			}
			a := newScrapeAligner(slog.New(slog.DiscardHandler))
			for _, s := range tc.scrapes {
				for _, at := range s.arrivals {
					a.observe(s.from, at)
				}
			}
			got := a.next(t0, now, interval, duration)
			if !got.Equal(tc.want) {
				t.Errorf("next cycle at t0%+v, want t0%+v", got.Sub(t0), tc.want.Sub(t0))
			}
			if st := a.state(); st.aligned != tc.aligned {
				t.Errorf("aligned = %v, want %v", st.aligned, tc.aligned)
			}
			if !got.After(t0) || got.After(t0.Add(interval)) {
				t.Errorf("next cycle at t0%+v: outside (t0, t0+interval]: the interval must never grow", got.Sub(t0))
			}
		})
	}
}

// simulation drives an aligner with scrapers at fixed phases and cycles of a fixed duration
// on a fake clock, and returns, for every scrape of the first scraper, the age of the
// snapshot it was served (time since its cycle ended), plus the gaps between cycle starts.
type simulation struct {
	interval, duration time.Duration
	scrapers           []simScraper
	align              bool
	length             time.Duration
}

type simScraper struct {
	addr          string
	period, phase time.Duration
	from, until   time.Duration // active from..until (until 0: to the end)
}

type simResult struct {
	ages map[string][]time.Duration // per scraper, in order
	gaps []time.Duration
}

func (s simulation) run() simResult {
	a := newScrapeAligner(slog.New(slog.DiscardHandler))
	res := simResult{ages: map[string][]time.Duration{}}
	nextScrape := make([]time.Time, len(s.scrapers))
	for i, sc := range s.scrapers {
		nextScrape[i] = t0.Add(sc.from + sc.phase)
	}
	end := t0.Add(s.length)
	cycleStart := t0
	var lastEnd, prevStart time.Time
	for {
		// The earliest event: a scrape, or the end of the running cycle.
		cycleEnd := cycleStart.Add(s.duration)
		i, at := -1, cycleEnd
		for j, ns := range nextScrape {
			if ns.Before(at) {
				i, at = j, ns
			}
		}
		if at.After(end) {
			return res
		}
		if i < 0 {
			lastEnd = cycleEnd
			if !prevStart.IsZero() {
				res.gaps = append(res.gaps, cycleStart.Sub(prevStart))
			}
			prevStart = cycleStart
			if s.align {
				cycleStart = a.next(cycleStart, cycleEnd, s.interval, s.duration)
			} else {
				cycleStart = cycleStart.Add(s.interval)
			}
			continue
		}
		sc := &s.scrapers[i]
		nextScrape[i] = at.Add(sc.period)
		if sc.until > 0 && at.Sub(t0) >= sc.until {
			nextScrape[i] = end.Add(time.Hour)
			continue
		}
		a.observe(sc.addr, at)
		if !lastEnd.IsZero() {
			res.ages[sc.addr] = append(res.ages[sc.addr], at.Sub(lastEnd))
		}
	}
}

// TestAlignmentFreshensScrapes: on the fixed phase every scrape is served a snapshot as old
// as the phase drew (4.2s here, every time); aligned, after a few scrapes to learn the phase,
// every scrape of the followed scraper is served a cycle that ended alignMargin before it,
// and the cycles keep their interval.
func TestAlignmentFreshensScrapes(t *testing.T) {
	const duration = 100 * time.Millisecond
	for _, tc := range []struct {
		name     string
		interval time.Duration
		period   time.Duration
		phase    time.Duration
	}{
		{"5s scrapes, 5s cycles", 5 * time.Second, 5 * time.Second, 4300 * time.Millisecond},
		{"30s scrapes, 5s cycles", 5 * time.Second, 30 * time.Second, 9300 * time.Millisecond},
		{"5s scrapes, 10s cycles", 10 * time.Second, 5 * time.Second, 2300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := simulation{interval: tc.interval, duration: duration, length: 40 * max(tc.period, tc.interval),
				scrapers: []simScraper{{addr: "10.0.0.1:9", period: tc.period, phase: tc.phase}}}
			fixed := sim.run()
			sim.align = true
			aligned := sim.run()

			fixedAges, alignedAges := fixed.ages["10.0.0.1:9"], aligned.ages["10.0.0.1:9"]
			// Scrapes to learn the period, then those until the next cycle has moved.
			learn := scrapeHistory + int(tc.interval/tc.period) + 1
			for i, age := range alignedAges[learn:] {
				// With 10s cycles every other 5s scrape gets the older cycle.
				if age != alignMargin && (tc.period >= tc.interval || age != alignMargin+tc.period) {
					t.Errorf("aligned: scrape %d served a snapshot %v old, want %v", learn+i, age, alignMargin)
				}
			}
			if slices.Min(fixedAges) <= alignMargin {
				t.Errorf("fixed phase: a scrape was served a snapshot only %v old: the case proves nothing", slices.Min(fixedAges))
			}
			moved := 0
			for _, g := range aligned.gaps {
				if g > tc.interval {
					t.Errorf("a gap of %v between cycles: over the interval %v", g, tc.interval)
				}
				if g != tc.interval {
					moved++
				}
			}
			if moved != 1 {
				t.Errorf("%d cycles moved (gaps %v), want exactly one phase shift", moved, aligned.gaps)
			}
		})
	}
}

// TestAlignmentFollowsOneOfTwoScrapers: a Prometheus HA pair scrapes at two phases. The
// cycles follow the one seen first while it scrapes regularly; when it stops, or misses a
// scrape, they follow the other, and do not flip back when the first is regular again.
func TestAlignmentFollowsOneOfTwoScrapers(t *testing.T) {
	const (
		period = 5 * time.Second
		phaseA = 1300 * time.Millisecond
		phaseB = 3700 * time.Millisecond
	)
	for _, tc := range []struct {
		name     string
		first    []simScraper // 10.0.0.1
		switchAt time.Duration
	}{{
		name:     "the first stops and comes back on a new port",
		first:    []simScraper{{addr: "10.0.0.1:9", until: 3 * time.Minute}, {addr: "10.0.0.1:10", from: 4 * time.Minute}},
		switchAt: 3 * time.Minute,
	}, {
		name:     "the first misses one scrape and goes on",
		first:    []simScraper{{addr: "10.0.0.1:9", until: time.Minute}, {addr: "10.0.0.1:9", from: time.Minute + period}},
		switchAt: time.Minute,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			sim := simulation{interval: 5 * time.Second, duration: 100 * time.Millisecond, align: true, length: 10 * time.Minute,
				scrapers: []simScraper{{addr: "10.0.0.2:9", period: period, phase: phaseB, from: 2 * time.Second}}}
			for _, a := range tc.first {
				a.period, a.phase = period, phaseA
				sim.scrapers = append(sim.scrapers, a)
			}
			res := sim.run()
			a := res.ages["10.0.0.1:9"]
			for i := scrapeHistory + 1; i < len(a) && phaseA+time.Duration(i)*period < tc.switchAt; i++ {
				if a[i] != alignMargin {
					t.Errorf("first scraper, scrape %d: snapshot %v old, want %v (followed while it scrapes regularly)", i, a[i], alignMargin)
				}
			}
			// The second's scrapes from four intervals after the switch to the end: the
			// cycles follow it, also once the first is back and regular.
			fresh := 0
			for i, age := range res.ages["10.0.0.2:9"] {
				at := 2*time.Second + phaseB + time.Duration(i)*period
				if at < tc.switchAt+4*period {
					continue
				}
				if age != alignMargin {
					t.Errorf("second scraper at t0+%v: snapshot %v old, want %v (followed since the first stopped being regular)", at, age, alignMargin)
				}
				fresh++
			}
			if fresh < 50 {
				t.Fatalf("%d scrapes of the second scraper after the switch: the case proves too little", fresh)
			}
			shifts := 0
			for _, g := range res.gaps {
				if g != sim.interval {
					shifts++
				}
			}
			if shifts != 2 {
				t.Errorf("%d phase shifts, want 2 (to the first scraper, then once to the second)", shifts)
			}
		})
	}
}
