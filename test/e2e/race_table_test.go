package e2e

import (
	"slices"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name string
		ds   []time.Duration
		want time.Duration
		ok   bool
	}{
		{"none", nil, 0, false},
		{"one", []time.Duration{3 * s}, 3 * s, true},
		{"odd, unsorted", []time.Duration{9 * s, 1 * s, 4 * s}, 4 * s, true},
		{"even: the mean of the middle two", []time.Duration{4 * s, 1 * s, 2 * s, 10 * s}, 3 * s, true},
		{"negative offsets count", []time.Duration{-2 * s, 2 * s, 6 * s}, 2 * s, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.ds)
			got, ok := median(tc.ds)
			if got != tc.want || ok != tc.ok {
				t.Errorf("median(%v) = %v, %v; want %v, %v", tc.ds, got, ok, tc.want, tc.ok)
			}
			if !slices.Equal(in, tc.ds) {
				t.Errorf("median reordered its argument: %v, was %v", tc.ds, in)
			}
		})
	}
}

func TestSummarizeRace(t *testing.T) {
	s := time.Second
	// won is a race the guard won with every stage seen, 1 s apart from 1 s on.
	won := func(offset time.Duration, kubelet time.Duration) raceSample {
		return raceSample{raced: true, guardWon: true, dated: true, kubelet: kubelet, guard: timing{
			metric: 2*s + offset, ageAtScrape: 1, alert: 3*s + offset, amSeen: 4*s + offset,
			webhook: 5*s + offset, recheck: 6*s + offset, evicted: 7*s + offset}}
	}
	// lost is a race the kubelet won after the guard's scrape and rule, before Alertmanager.
	lost := raceSample{raced: true, dated: true, kubelet: 20 * s, guard: timing{metric: 4 * s, ageAtScrape: 0.4, alert: 5 * s, evicted: 6 * s}}
	// undated is a won race whose first over-limit scrape carried no age: scraped, not measured.
	undated := won(2*s, 30*s)
	undated.dated, undated.guard.ageAtScrape = false, 0
	// notified is a race won through the exporter's notice, before any scrape.
	notified := raceSample{raced: true, guardWon: true, kubelet: 10 * s, notified: s, guard: timing{recheck: 1500 * time.Millisecond, evicted: 2500 * time.Millisecond}}
	for _, tc := range []struct {
		name    string
		samples []raceSample
		want    raceRow
	}{
		{"every race won", []raceSample{won(0, 30*s), won(2*s, 50*s), won(s, 40*s)},
			raceRow{stages: []string{"2.0", "-", "3.0", "4.0", "5.0", "6.0", "7.0"}, evicted: "8.0", kubelet: "40.0", ratio: "0.20", won: 3, raced: 3, of: 3}},
		{"a loss: its stages seen count, its eviction is not the guard's", []raceSample{won(0, 30*s), lost},
			raceRow{stages: []string{"2.3", "-", "3.0", "4.0", "4.0 (1/2)", "5.0 (1/2)", "6.0 (1/2)"}, evicted: "7.0 (1/2)", kubelet: "25.0", ratio: "0.28", won: 1, raced: 2, of: 2}},
		{"a scrape without its age: the measurement is not seen, not taken at the scrape", []raceSample{won(0, 30*s), undated},
			raceRow{stages: []string{"1.0 (1/2)", "-", "3.0", "4.0", "5.0", "6.0", "7.0"}, evicted: "8.0", kubelet: "30.0", ratio: "0.27", won: 2, raced: 2, of: 2}},
		{"no scrape dated at all", []raceSample{undated},
			raceRow{stages: []string{"-", "-", "4.0", "5.0", "6.0", "7.0", "8.0"}, evicted: "9.0", kubelet: "30.0", ratio: "0.30", won: 1, raced: 1, of: 1}},
		{"won through the notice, before any alert", []raceSample{notified},
			raceRow{stages: []string{"-", "1.0", "-", "-", "-", "-", "1.5"}, evicted: "2.5", kubelet: "10.0", ratio: "0.25", won: 1, raced: 1, of: 1}},
		{"nothing evicted, the kubelet's twin neither", []raceSample{{}},
			raceRow{stages: []string{"-", "-", "-", "-", "-", "-", "-"}, evicted: "-", kubelet: "-", ratio: "-", of: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := summarizeRace(tc.name, tc.samples)
			if !slices.Equal(got.stages, tc.want.stages) || got.evicted != tc.want.evicted || got.kubelet != tc.want.kubelet ||
				got.ratio != tc.want.ratio || got.won != tc.want.won || got.raced != tc.want.raced || got.of != tc.want.of {
				t.Errorf("summarizeRace:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestRaceTable(t *testing.T) {
	rows := []raceRow{
		{name: "a", stages: []string{"1", "1.5", "2", "3", "4", "5", "6"}, evicted: "7", kubelet: "40", ratio: "0.18", won: 2, raced: 2, of: 2},
		{name: "b", stages: []string{"-", "-", "-", "-", "-", "-", "-"}, evicted: "-", kubelet: "-", ratio: "-", won: 0, raced: 1, of: 3},
	}
	want := "| case | measured | notified | scraped | rule firing | Alertmanager | webhook | live re-check | evicted by the guard | kubelet alone | guard / kubelet | races won |\n" +
		"| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n" +
		"| a | 1 | 1.5 | 2 | 3 | 4 | 5 | 6 | 7 | 40 | 0.18 | 2 of 2 |\n" +
		"| b | - | - | - | - | - | - | - | - | - | - | 0 of 1 (2 not evicted) |\n"
	if got := raceTable(rows); got != want {
		t.Errorf("raceTable:\n%s\nwant:\n%s", got, want)
	}
}

// A win must have passed every stage of its path: the notice's (notified, the live re-check)
// when the remediator had one, the alert's otherwise.
func TestRaceStagesOnPath(t *testing.T) {
	var viaNotice, viaAlert []string
	for _, st := range raceStages {
		if st.on(raceSample{notified: time.Second}) {
			viaNotice = append(viaNotice, st.name)
		}
		if st.on(raceSample{}) {
			viaAlert = append(viaAlert, st.name)
		}
	}
	if want := []string{"notified", "live re-check"}; !slices.Equal(viaNotice, want) {
		t.Errorf("stages of a notice's win %v, want %v", viaNotice, want)
	}
	if want := []string{"measured", "scraped", "rule firing", "Alertmanager", "webhook", "live re-check"}; !slices.Equal(viaAlert, want) {
		t.Errorf("stages of an alert's win %v, want %v", viaAlert, want)
	}
}
