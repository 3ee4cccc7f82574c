package exporter

import (
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Scrape alignment. A measurement reaches Prometheus at the first scrape after its cycle
// ends. With the cycle and the scrapes on independent clocks, every measurement waits for
// that scrape by a fixed phase drawn when the two loops started, up to a whole interval, on
// every write of the node's lifetime. The aligner learns when a scraper's requests arrive
// and shifts the phase of the collection cycle (never its interval) so that a cycle ends
// just before the expected scrape. Scrapes themselves never wait: they are served from the
// last completed snapshot, as always.
//
// A scraper is a remote IP address. With several (a Prometheus HA pair scrapes at two
// phases), the cycles follow one: the one they follow already while it keeps scraping
// regularly, else the earliest-seen regular one, so that two scrapers cannot make the phase
// flip-flop. Scrapes through a proxy on the pod (kube-rbac-proxy) all come from one address;
// several scrapers behind it look irregular, and the cycles keep their fixed phase.

const (
	// scrapeHistory is how many arrivals of one scraper the aligner keeps: their
	// scrapeHistory-1 gaps must agree before it counts as regular.
	scrapeHistory = 5
	// scrapeJitter is how far, as a share of its interval, a scraper's gaps may stray from
	// their median and still count as regular.
	scrapeJitter = 0.1
	// multipleTolerance is how close to a whole multiple of each other the scrape and
	// collection intervals must be, as a share of the shorter one: closer than the drift
	// that would move the phase visibly from cycle to cycle.
	multipleTolerance = 0.02
	// alignMargin is how long before the expected scrape a cycle is planned to end, on top of
	// the last cycle's duration: room for the duration to vary from cycle to cycle.
	alignMargin = 250 * time.Millisecond
	// maxScrapers bounds the scrapers remembered: any client the NetworkPolicy admits may
	// fetch /metrics, and newcomers beyond it are ignored until a remembered one is forgotten.
	maxScrapers = 8
	// unknownScraperTTL is how long a scraper without a regular interval is remembered
	// after its last request.
	unknownScraperTTL = 5 * time.Minute
)

var (
	alignedDesc = newDesc("emptydir_exporter_collection_aligned",
		"1 when the collection cycle ends just before a regular scraper's scrapes, else 0.",
		[]string{"node"}, nil)
	scrapeIntervalDesc = newDesc("emptydir_exporter_aligned_scrape_interval_seconds",
		"The interval in seconds of the scraper the collection cycle follows; absent when not aligned.",
		[]string{"node"}, nil)
	scrapeLeadDesc = newDesc("emptydir_exporter_aligned_scrape_lead_seconds",
		"Seconds the cycle was planned to end before the followed scraper's request.",
		[]string{"node"}, nil)
)

// scraper is what the aligner remembers of one remote address.
type scraper struct {
	firstSeen time.Time
	arrivals  []time.Time // the latest scrapeHistory, oldest first
}

// period is the scraper's interval when its remembered arrivals are evenly spaced.
func (s *scraper) period() (time.Duration, bool) {
	if len(s.arrivals) < scrapeHistory {
		return 0, false
	}
	gaps := make([]time.Duration, 0, len(s.arrivals)-1)
	for i := 1; i < len(s.arrivals); i++ {
		gaps = append(gaps, s.arrivals[i].Sub(s.arrivals[i-1]))
	}
	slices.Sort(gaps)
	median := gaps[len(gaps)/2]
	if median <= 0 {
		return 0, false
	}
	tolerance := time.Duration(scrapeJitter * float64(median))
	for _, g := range gaps {
		if (g - median).Abs() > tolerance {
			return 0, false
		}
	}
	return median, true
}

func (s *scraper) last() time.Time { return s.arrivals[len(s.arrivals)-1] }

// alignment is the plan of the last cycle, for the metrics.
type alignment struct {
	aligned bool
	period  time.Duration // of the scraper followed
	lead    time.Duration // planned end of the cycle before the expected scrape
}

// scrapeAligner learns the scrapers' phases and plans the collection cycles. It is safe for
// concurrent use: scrapes are observed by the HTTP server's goroutines.
type scrapeAligner struct {
	log *slog.Logger

	mu       sync.Mutex
	scrapers map[string]*scraper
	followed string
	plan     alignment
}

func newScrapeAligner(log *slog.Logger) *scrapeAligner {
	return &scrapeAligner{log: log, scrapers: map[string]*scraper{}}
}

// observe records a scrape from remoteAddr (host:port, as in http.Request) arriving at t.
func (a *scrapeAligner) observe(remoteAddr string, t time.Time) {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.forget(t)
	s, ok := a.scrapers[host]
	if !ok {
		if len(a.scrapers) >= maxScrapers {
			return
		}
		s = &scraper{firstSeen: t}
		a.scrapers[host] = s
	}
	if n := len(s.arrivals); n > 0 && !t.After(s.arrivals[n-1]) {
		return // concurrent requests of one scraper: the first one carries its phase
	}
	s.arrivals = append(s.arrivals, t)
	if len(s.arrivals) > scrapeHistory {
		s.arrivals = slices.Delete(s.arrivals, 0, len(s.arrivals)-scrapeHistory)
	}
}

// forget drops the scrapers that have stopped: silent for more than two of their
// intervals past the expected request (they missed two in a row), or unknownScraperTTL
// when they have no regular interval. Called with a.mu held.
func (a *scrapeAligner) forget(now time.Time) {
	for host, s := range a.scrapers {
		ttl := unknownScraperTTL
		if p, ok := s.period(); ok {
			ttl = 3 * p
		}
		if now.Sub(s.last()) > ttl {
			delete(a.scrapers, host)
		}
	}
}

// follow picks the scraper whose phase the cycles follow at now: the one followed so far
// while it scrapes regularly, else the regular one seen first. Called with a.mu held.
func (a *scrapeAligner) follow(now time.Time) (*scraper, time.Duration, bool) {
	a.forget(now)
	if s, ok := a.scrapers[a.followed]; ok {
		if p, ok := s.period(); ok {
			return s, p, true
		}
	}
	var best string
	for host, s := range a.scrapers {
		if _, ok := s.period(); !ok {
			continue
		}
		if b, ok := a.scrapers[best]; best == "" || !ok || s.firstSeen.Before(b.firstSeen) ||
			(s.firstSeen.Equal(b.firstSeen) && host < best) {
			best = host
		}
	}
	if best == "" {
		a.followed = ""
		return nil, 0, false
	}
	a.followed = best
	s := a.scrapers[best]
	p, _ := s.period()
	return s, p, true
}

// next plans when the cycle after the one that started at prevStart and took lastDuration
// starts, at now. Unaligned it is prevStart+interval, the fixed phase of a ticker. Aligned,
// it is the latest moment no later than that from which a cycle of lastDuration ends
// alignMargin before an expected scrape of the followed scraper: the phase moves earlier,
// once, and the interval stays. A start already past means now.
func (a *scrapeAligner) next(prevStart, now time.Time, interval, lastDuration time.Duration) time.Time {
	fixed := prevStart.Add(interval)
	a.mu.Lock()
	defer a.mu.Unlock()
	was, wasFollowed := a.plan, a.followed
	defer func() {
		// Once per change of what the cycle follows, not per millisecond the period moves.
		if a.plan.aligned != was.aligned || a.followed != wasFollowed {
			a.log.Info("collection cycle alignment", "aligned", a.plan.aligned, "scraper", a.followed,
				"scrape_interval", a.plan.period, "lead", a.plan.lead)
		}
	}()
	a.plan = alignment{}
	s, period, ok := a.follow(now)
	if !ok {
		return later(fixed, now)
	}
	short, long := min(period, interval), max(period, interval)
	off := long % short
	if float64(min(off, short-off)) > multipleTolerance*float64(short) {
		return later(fixed, now) // the scrapes would drift through the cycle's phase
	}
	lead := lastDuration + alignMargin
	if lead >= short {
		return later(fixed, now) // a cycle as long as the interval cannot end "just before" anything
	}
	// A cycle started at target + k·short ends lead before the scrape expected at
	// s.last() + k·short, if there is one: every scrape when the scrape interval is a multiple
	// of the collection interval, every interval/period-th one when it is a divisor. The
	// start is the latest such moment at or before fixed.
	target := s.last().Add(-lead)
	back := fixed.Sub(target) % short
	if back < 0 {
		back += short // also for a target after fixed
	}
	start := fixed.Add(-back)
	a.plan = alignment{aligned: true, period: period, lead: lead}
	return later(start, now)
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.Before(b) {
		return b
	}
	return a
}

// state is the last plan.
func (a *scrapeAligner) state() alignment {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.plan
}

// ScrapeHandler wraps the /metrics handler so that the collection cycle can learn when the
// scrapes arrive (Config.AlignToScrapes); without alignment it returns h unchanged.
func (e *Exporter) ScrapeHandler(h http.Handler) http.Handler {
	if e.aligner == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.aligner.observe(r.RemoteAddr, e.now())
		h.ServeHTTP(w, r)
	})
}

// nextCycle is when the collection cycle after the one planned for prevStart starts: one
// interval later, or as the aligner plans; now when that is past (the cycle overran).
func (e *Exporter) nextCycle(prevStart time.Time, interval time.Duration) time.Time {
	if e.aligner == nil {
		return later(prevStart.Add(interval), e.now())
	}
	e.mu.RLock()
	lastDuration := e.snap.duration
	e.mu.RUnlock()
	return e.aligner.next(prevStart, e.now(), interval, lastDuration)
}

func describeAlignment(ch chan<- *prometheus.Desc) {
	ch <- alignedDesc
	ch <- scrapeIntervalDesc
	ch <- scrapeLeadDesc
}

func (e *Exporter) collectAlignment(ch chan<- prometheus.Metric) {
	var plan alignment
	if e.aligner != nil {
		plan = e.aligner.state()
	}
	node := e.cfg.NodeName
	ch <- prometheus.MustNewConstMetric(alignedDesc, prometheus.GaugeValue, boolFloat(plan.aligned), node)
	if plan.aligned {
		ch <- prometheus.MustNewConstMetric(scrapeIntervalDesc, prometheus.GaugeValue, plan.period.Seconds(), node)
		ch <- prometheus.MustNewConstMetric(scrapeLeadDesc, prometheus.GaugeValue, plan.lead.Seconds(), node)
	}
}
