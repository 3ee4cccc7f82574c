package svgplot

import (
	"bytes"
	"encoding/xml"
	"math"
	"reflect"
	"testing"
)

func TestNiceStep(t *testing.T) {
	tests := []struct {
		raw      float64
		step     float64
		decimals int
	}{
		{0.7, 1, 0},
		{1, 1, 0},
		{1.3, 2, 0},
		{3, 5, 0},
		{6, 10, 0},
		{0.004, 0.005, 3},
		{2500, 5000, 0},
	}
	for _, tt := range tests {
		step, decimals := NiceStep(tt.raw)
		if step != tt.step || decimals != tt.decimals {
			t.Errorf("NiceStep(%v) = %v, %d; want %v, %d", tt.raw, step, decimals, tt.step, tt.decimals)
		}
	}
}

func TestWrapWords(t *testing.T) {
	got := WrapWords("the walk against  GNU du and a-very-long-word-indeed", 12)
	want := []string{"the walk", "against GNU", "du and", "a-very-long-word-indeed"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("WrapWords = %q, want %q", got, want)
	}
	if got := WrapWords("   ", 10); got != nil {
		t.Errorf("WrapWords of blanks = %q, want none", got)
	}
}

func TestTextWidthScalesWithSize(t *testing.T) {
	if w := TextWidth("abcd", 12); math.Abs(w-4*CharWidth) > 1e-9 {
		t.Errorf("TextWidth at 12 px = %v, want %v", w, 4*CharWidth)
	}
	if w := TextWidth("µs", 6); math.Abs(w-CharWidth) > 1e-9 {
		t.Errorf("TextWidth counts characters, not bytes, at half size: %v, want %v", w, CharWidth)
	}
}

func TestOpenCloseEscape(t *testing.T) {
	var b bytes.Buffer
	Open(&b, 100.4, 50, `a <b> & "c"`)
	Close(&b)
	if err := xml.Unmarshal(b.Bytes(), new(struct{})); err != nil {
		t.Errorf("not well-formed: %v\n%s", err, b.String())
	}
	if !bytes.Contains(b.Bytes(), []byte(`width="100" height="50"`)) {
		t.Errorf("size not rounded to whole px:\n%s", b.String())
	}
}
