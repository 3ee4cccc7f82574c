package main

import (
	"errors"
	"reflect"
	"testing"
)

func TestRunnerStopsAtFatalAndRunsCleanupsInReverse(t *testing.T) {
	r := &runner{}
	var order []string
	r.run(func() {
		r.Cleanup(func() { order = append(order, "first registered") })
		r.Cleanup(func() { order = append(order, "second registered") })
		r.Fatalf("stop here")
		order = append(order, "after Fatal")
	})
	if want := []string{"second registered", "first registered"}; !reflect.DeepEqual(order, want) {
		t.Errorf("ran %v, want %v", order, want)
	}
	if !r.Failed() {
		t.Error("Failed() = false after Fatalf")
	}
}

func TestRunnerErrorfFailsButGoesOn(t *testing.T) {
	r := &runner{}
	went := false
	r.run(func() {
		r.Errorf("not fatal")
		went = true
	})
	if !went || !r.Failed() {
		t.Errorf("after Errorf: went on %v, Failed %v; want true, true", went, r.Failed())
	}
}

func TestRunnerPassesOtherPanicsOnAfterCleanup(t *testing.T) {
	r := &runner{}
	cleaned := false
	boom := errors.New("boom")
	defer func() {
		if err, _ := recover().(error); !errors.Is(err, boom) {
			t.Errorf("recovered %v, want the panic %v passed on", err, boom)
		}
		if !cleaned {
			t.Error("cleanup did not run before the panic went on")
		}
	}()
	r.run(func() {
		r.Cleanup(func() { cleaned = true })
		panic(boom)
	})
}
