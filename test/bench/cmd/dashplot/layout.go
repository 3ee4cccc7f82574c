package main

import "math"

// Grafana's grid: 24 columns over the dashboard's width, rows of 30 px, 8 px between cells
// (react-grid-layout as Grafana configures it: GRID_COLUMN_COUNT, GRID_CELL_HEIGHT,
// GRID_CELL_VMARGIN). The pictures are drawn at 1200 px, a laptop's dashboard width.
const (
	gridColumns = 24
	gridWidth   = 1200.0
	cellHeight  = 30.0
	cellMargin  = 8.0
	pagePadding = 16.0
)

type rect struct{ X, Y, W, H float64 }

// columnWidth is one grid column's width in px.
func columnWidth() float64 { return (gridWidth - (gridColumns-1)*cellMargin) / gridColumns }

// gridRect places a panel's gridPos on the page, below top.
func gridRect(g gridPos, top float64) rect {
	cw := columnWidth()
	return rect{
		X: pagePadding + float64(g.X)*(cw+cellMargin),
		Y: top + float64(g.Y)*(cellHeight+cellMargin),
		W: float64(g.W)*cw + float64(max(g.W-1, 0))*cellMargin,
		H: float64(g.H)*cellHeight + float64(max(g.H-1, 0))*cellMargin,
	}
}

// gridBottom is the lowest panel edge of panels placed below top.
func gridBottom(panels []panel, top float64) float64 {
	bottom := top
	for _, p := range panels {
		r := gridRect(p.GridPos, top)
		bottom = math.Max(bottom, r.Y+r.H)
	}
	return bottom
}

// inset shrinks r by the given margins.
func (r rect) inset(left, top, right, bottom float64) rect {
	return rect{X: r.X + left, Y: r.Y + top, W: math.Max(r.W-left-right, 0), H: math.Max(r.H-top-bottom, 0)}
}
