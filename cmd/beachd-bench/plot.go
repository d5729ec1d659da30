package main

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"strings"
)

// plotSoak draws the soak's samples as a PNG: beachd's RSS on top, the
// ingest→delivered latency (p50, p99) and the ingest p99 below, against
// time. Drawn with image/png and a 3×5 bitmap font (no dependencies).
func plotSoak(path string, res *soakResult) error {
	const w, h = 1000, 640
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	fillRect(img, 0, 0, w, h, color.RGBA{255, 255, 255, 255})
	n := len(res.Samples)
	xs := make([]float64, n)
	rss := make([]float64, n)
	anon := make([]float64, n)
	p50 := make([]float64, n)
	p99 := make([]float64, n)
	ip99 := make([]float64, n)
	for i, s := range res.Samples {
		anon[i] = s.RSSAnonMiB
		xs[i], rss[i], p50[i], p99[i], ip99[i] = s.AtSec, s.RSSMiB, s.E2EP50ms, s.E2EP99ms, s.IngestP99ms
	}
	title := fmt.Sprintf("BEACHD SOAK %s AT %d/S: ACCEPTED %d, DELIVERED %d, UNDELIVERED %d", strings.ToUpper(res.Duration), res.Rate, res.Accepted, res.Delivered, res.Undelivered)
	drawText(img, 20, 12, title, 2, color.RGBA{0, 0, 0, 255})
	blue := color.RGBA{30, 90, 200, 255}
	red := color.RGBA{210, 40, 40, 255}
	green := color.RGBA{40, 150, 60, 255}
	orange := color.RGBA{230, 140, 20, 255}
	panel(img, image.Rect(80, 50, w-30, 320), xs, [][]float64{rss, anon}, []color.RGBA{blue, orange}, []string{"RSS MIB", "ANON RSS MIB (HEAP)"})
	panel(img, image.Rect(80, 360, w-30, h-50), xs, [][]float64{p50, p99, ip99}, []color.RGBA{green, red, orange},
		[]string{"INGEST->DELIVERED P50 MS", "P99 MS", "INGEST P99 MS"})
	drawText(img, w/2-60, h-25, "TIME (S)", 2, color.RGBA{0, 0, 0, 255})
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return png.Encode(f, img)
}

func panel(img *image.RGBA, r image.Rectangle, xs []float64, series [][]float64, cols []color.RGBA, names []string) {
	black := color.RGBA{0, 0, 0, 255}
	grey := color.RGBA{225, 225, 225, 255}
	xmax, ymax := 1.0, 1.0
	for _, x := range xs {
		xmax = math.Max(xmax, x)
	}
	for _, s := range series {
		for _, y := range s {
			ymax = math.Max(ymax, y)
		}
	}
	ymax = niceCeil(ymax * 1.1)
	// Grid and tick labels.
	for i := 0; i <= 5; i++ {
		y := r.Max.Y - i*r.Dy()/5
		line(img, r.Min.X, y, r.Max.X, y, grey)
		drawText(img, 4, y-5, trimNum(ymax*float64(i)/5), 2, black)
		x := r.Min.X + i*r.Dx()/5
		line(img, x, r.Min.Y, x, r.Max.Y, grey)
		drawText(img, x-10, r.Max.Y+6, trimNum(xmax*float64(i)/5), 2, black)
	}
	line(img, r.Min.X, r.Max.Y, r.Max.X, r.Max.Y, black)
	line(img, r.Min.X, r.Min.Y, r.Min.X, r.Max.Y, black)
	for si, s := range series {
		for i := 1; i < len(s); i++ {
			x0 := r.Min.X + int(xs[i-1]/xmax*float64(r.Dx()))
			x1 := r.Min.X + int(xs[i]/xmax*float64(r.Dx()))
			y0 := r.Max.Y - int(s[i-1]/ymax*float64(r.Dy()))
			y1 := r.Max.Y - int(s[i]/ymax*float64(r.Dy()))
			thick(img, x0, y0, x1, y1, cols[si])
		}
		if len(s) == 1 {
			x := r.Min.X + int(xs[0]/xmax*float64(r.Dx()))
			fillRect(img, x-2, r.Max.Y-int(s[0]/ymax*float64(r.Dy()))-2, 5, 5, cols[si])
		}
		lx := r.Min.X + 10 + si*260
		fillRect(img, lx, r.Min.Y+6, 14, 6, cols[si])
		drawText(img, lx+20, r.Min.Y+4, names[si], 2, black)
	}
}

func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func trimNum(v float64) string {
	if v >= 100 || v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.1f", v), "0"), ".")
}

func fillRect(img *image.RGBA, x, y, w, h int, c color.RGBA) {
	for j := y; j < y+h; j++ {
		for i := x; i < x+w; i++ {
			img.SetRGBA(i, j, c)
		}
	}
}

func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := sign(x1-x0), sign(y1-y0)
	e := dx + dy
	for {
		img.SetRGBA(x0, y0, c)
		if x0 == x1 && y0 == y1 {
			return
		}
		if e2 := 2 * e; e2 >= dy {
			e += dy
			x0 += sx
		} else {
			e += dx
			y0 += sy
		}
	}
}

func thick(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	line(img, x0, y0, x1, y1, c)
	line(img, x0, y0+1, x1, y1+1, c)
	line(img, x0+1, y0, x1+1, y1, c)
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

func sign(v int) int {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}

// font3x5 is a 3×5 bitmap font: each glyph is five rows of three bits.
var font3x5 = map[rune]string{
	'0': "111101101101111", '1': "010110010010111", '2': "111001111100111", '3': "111001111001111",
	'4': "101101111001001", '5': "111100111001111", '6': "111100111101111", '7': "111001010010010",
	'8': "111101111101111", '9': "111101111001111", '.': "000000000000010", '-': "000000111000000",
	'>': "100010001010100", '/': "001001010100100", '(': "010100100100010", ')': "010001001001010",
	':': "000010000010000", ',': "000000000010100", '%': "101001010100101", ' ': "000000000000000",
	'A': "010101111101101", 'B': "110101110101110", 'C': "011100100100011", 'D': "110101101101110",
	'E': "111100110100111", 'F': "111100110100100", 'G': "011100101101011", 'H': "101101111101101",
	'I': "111010010010111", 'J': "001001001101010", 'K': "101101110101101", 'L': "100100100100111",
	'M': "101111111101101", 'N': "110101101101101", 'O': "010101101101010", 'P': "110101110100100",
	'Q': "010101101110011", 'R': "110101110101101", 'S': "011100010001110", 'T': "111010010010010",
	'U': "101101101101111", 'V': "101101101101010", 'W': "101101111111101", 'X': "101101010101101",
	'Y': "101101010010010", 'Z': "111001010100111",
}

func drawText(img *image.RGBA, x, y int, s string, scale int, c color.RGBA) {
	for _, r := range strings.ToUpper(s) {
		g, ok := font3x5[r]
		if !ok {
			g = font3x5[' ']
		}
		for row := 0; row < 5; row++ {
			for col := 0; col < 3; col++ {
				if g[row*3+col] == '1' {
					fillRect(img, x+col*scale, y+row*scale, scale, scale, c)
				}
			}
		}
		x += 4 * scale
	}
}
