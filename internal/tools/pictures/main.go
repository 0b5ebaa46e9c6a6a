// Command pictures draws the manual's pictures: it reads every
// docs/pictures/NAME.pic and writes docs/pictures/NAME.svg beside it.
//
//	go run ./internal/tools/pictures          write the pictures
//	go run ./internal/tools/pictures -check   fail listing pictures that differ from their source
//
// A .pic file places boxes and arrows by hand, one statement a line
// (coordinates in SVG pixels, y downwards; # starts a comment):
//
//	picture W H "title"                     the canvas and its accessible title
//	frame X Y W H "label" [color C]         a dashed frame drawn behind the boxes
//	box ID X Y W H [kind] "line" ["line"…]  kind: process (default), queue, store, broker, decision, person, note
//	arrow A B [via X,Y …] [dashed] [color C] [label "text" [at X,Y]]
//	text X Y "text" [start|middle|end] [small|bold|italic] [color C]
//
// An arrow end is a box (the line is cut at its border) or a box's side,
// ID.n, ID.s, ID.e or ID.w (the middle of that side), or ID.n@F, a point
// F of the way along the side (0 to 1, left to right or top to bottom).
// Colors: ink (default), red, green, blue, orange, gray, purple.
//
// The output depends on nothing but the source: no fonts are measured
// (text widths are estimated), so the test beside this file regenerates
// every picture and fails when one differs from what is committed. A box
// whose text would run over its border (by that estimate, which errs wide)
// is refused with its line number.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

func main() {
	check := flag.Bool("check", false, "report pictures that differ from their source and exit 1 instead of writing them")
	dir := flag.String("dir", "docs/pictures", "the directory of the .pic sources")
	flag.Parse()
	stale, err := Run(*dir, !*check)
	if err != nil {
		fmt.Fprintln(os.Stderr, "pictures:", err)
		os.Exit(1)
	}
	if *check && len(stale) > 0 {
		fmt.Fprintf(os.Stderr, "pictures: these pictures differ from their source; run go run ./internal/tools/pictures:\n  %s\n", strings.Join(stale, "\n  "))
		os.Exit(1)
	}
}

// Run draws every .pic of dir. With write it writes each .svg that
// differs; it returns the .svg files that differed (or were missing), and
// any .svg without a source.
func Run(dir string, write bool) ([]string, error) {
	sources, err := filepath.Glob(filepath.Join(dir, "*.pic"))
	if err != nil {
		return nil, err
	}
	if len(sources) == 0 {
		return nil, fmt.Errorf("no .pic source in %s", dir)
	}
	var stale []string
	for _, src := range sources {
		text, err := os.ReadFile(src)
		if err != nil {
			return nil, err
		}
		p, err := Parse(string(text))
		if err != nil {
			return nil, fmt.Errorf("%s:%v", src, err)
		}
		svg := p.SVG()
		out := strings.TrimSuffix(src, ".pic") + ".svg"
		have, err := os.ReadFile(out)
		if err == nil && bytes.Equal(have, svg) {
			continue
		}
		stale = append(stale, out)
		if write {
			if err := os.WriteFile(out, svg, 0o644); err != nil {
				return nil, err
			}
		}
	}
	svgs, err := filepath.Glob(filepath.Join(dir, "*.svg"))
	if err != nil {
		return nil, err
	}
	for _, s := range svgs {
		if _, err := os.Stat(strings.TrimSuffix(s, ".svg") + ".pic"); err != nil {
			return nil, fmt.Errorf("%s has no source %s; draw it from a .pic or remove it", s, filepath.Base(strings.TrimSuffix(s, ".svg")+".pic"))
		}
	}
	sort.Strings(stale)
	return stale, nil
}

// Picture is one parsed .pic file.
type Picture struct {
	W, H   float64
	Title  string
	frames []frame
	boxes  []*box
	byID   map[string]*box
	arrows []arrow
	texts  []text
}

type frame struct {
	x, y, w, h float64
	label      string
	color      string
}

type box struct {
	id         string
	x, y, w, h float64
	kind       string
	lines      []string
}

type end struct {
	b    *box
	side byte    // 0: cut at the border; n, s, e, w
	at   float64 // along the side, 0..1
}

type arrow struct {
	from, to end
	via      [][2]float64
	dashed   bool
	color    string
	label    string
	labelAt  *[2]float64
}

type text struct {
	x, y   float64
	s      string
	anchor string
	style  string
	color  string
}

var kinds = map[string]bool{"process": true, "queue": true, "store": true, "broker": true, "decision": true, "person": true, "note": true}

var colors = map[string]string{
	"ink":    "#1f2328",
	"red":    "#b42318",
	"green":  "#1a7f37",
	"blue":   "#0550ae",
	"orange": "#b35900",
	"gray":   "#6e7781",
	"purple": "#6f42c1",
}

// Parse reads a .pic source. Errors start with the line number.
func Parse(src string) (*Picture, error) {
	p := &Picture{byID: map[string]*box{}}
	type pending struct {
		line int
		w    []string
	}
	var arrows []pending
	for i, raw := range strings.Split(src, "\n") {
		n := i + 1
		w, err := words(raw)
		if err != nil {
			return nil, fmt.Errorf("%d: %v", n, err)
		}
		if len(w) == 0 {
			continue
		}
		fail := func(format string, a ...any) (*Picture, error) {
			return nil, fmt.Errorf("%d: %s", n, fmt.Sprintf(format, a...))
		}
		switch w[0] {
		case "picture":
			if len(w) != 4 {
				return fail("picture W H \"title\"")
			}
			var err error
			if p.W, p.H, err = pair(w[1], w[2]); err != nil {
				return fail("%v", err)
			}
			p.Title = unquote(w[3])
		case "frame":
			if len(w) < 6 {
				return fail("frame X Y W H \"label\" [color C]")
			}
			f := frame{label: unquote(w[5]), color: "gray"}
			nums, err := numbers(w[1:5])
			if err != nil {
				return fail("%v", err)
			}
			f.x, f.y, f.w, f.h = nums[0], nums[1], nums[2], nums[3]
			rest := w[6:]
			if len(rest) == 2 && rest[0] == "color" {
				if colors[rest[1]] == "" {
					return fail("no color %q", rest[1])
				}
				f.color = rest[1]
			} else if len(rest) > 0 {
				return fail("unexpected %q", rest[0])
			}
			p.frames = append(p.frames, f)
		case "box":
			if len(w) < 7 {
				return fail("box ID X Y W H [kind] \"line\"…")
			}
			b := &box{id: w[1], kind: "process"}
			if p.byID[b.id] != nil {
				return fail("box %s is declared twice", b.id)
			}
			nums, err := numbers(w[2:6])
			if err != nil {
				return fail("%v", err)
			}
			b.x, b.y, b.w, b.h = nums[0], nums[1], nums[2], nums[3]
			rest := w[6:]
			if !quoted(rest[0]) {
				if !kinds[rest[0]] {
					return fail("no box kind %q", rest[0])
				}
				b.kind = rest[0]
				rest = rest[1:]
			}
			for _, s := range rest {
				if !quoted(s) {
					return fail("box lines are quoted: %s", s)
				}
				b.lines = append(b.lines, unquote(s))
			}
			if err := b.fits(); err != nil {
				return fail("box %s: %v", b.id, err)
			}
			p.boxes = append(p.boxes, b)
			p.byID[b.id] = b
		case "arrow":
			arrows = append(arrows, pending{n, w})
		case "text":
			if len(w) < 4 {
				return fail("text X Y \"text\" [anchor] [style] [color C]")
			}
			x, y, err := pair(w[1], w[2])
			if err != nil {
				return fail("%v", err)
			}
			t := text{x: x, y: y, s: unquote(w[3]), anchor: "start", color: "ink"}
			for j := 4; j < len(w); j++ {
				switch a := w[j]; a {
				case "start", "middle", "end":
					t.anchor = a
				case "small", "bold", "italic":
					t.style = a
				case "color":
					if j+1 >= len(w) || colors[w[j+1]] == "" {
						return fail("color needs one of the palette's names")
					}
					t.color = w[j+1]
					j++
				default:
					return fail("unexpected %q", a)
				}
			}
			p.texts = append(p.texts, t)
		default:
			return fail("unknown statement %q", w[0])
		}
	}
	if p.W <= 0 || p.H <= 0 {
		return nil, fmt.Errorf("1: no picture W H \"title\" statement")
	}
	for _, a := range arrows {
		ar, err := p.arrow(a.w)
		if err != nil {
			return nil, fmt.Errorf("%d: %v", a.line, err)
		}
		p.arrows = append(p.arrows, ar)
	}
	return p, nil
}

func (p *Picture) arrow(w []string) (arrow, error) {
	if len(w) < 3 {
		return arrow{}, fmt.Errorf("arrow A B [via X,Y …] [dashed] [color C] [label \"text\" [at X,Y]]")
	}
	var a arrow
	var err error
	if a.from, err = p.end(w[1]); err != nil {
		return a, err
	}
	if a.to, err = p.end(w[2]); err != nil {
		return a, err
	}
	a.color = "ink"
	for i := 3; i < len(w); i++ {
		switch w[i] {
		case "via":
			for i+1 < len(w) && strings.Contains(w[i+1], ",") && !quoted(w[i+1]) {
				pt, err := point(w[i+1])
				if err != nil {
					return a, err
				}
				a.via = append(a.via, pt)
				i++
			}
			if len(a.via) == 0 {
				return a, fmt.Errorf("via needs X,Y points")
			}
		case "dashed":
			a.dashed = true
		case "color":
			if i+1 >= len(w) || colors[w[i+1]] == "" {
				return a, fmt.Errorf("color needs one of the palette's names")
			}
			a.color = w[i+1]
			i++
		case "label":
			if i+1 >= len(w) || !quoted(w[i+1]) {
				return a, fmt.Errorf("label needs a quoted text")
			}
			a.label = unquote(w[i+1])
			i++
		case "at":
			if i+1 >= len(w) {
				return a, fmt.Errorf("at needs X,Y")
			}
			pt, err := point(w[i+1])
			if err != nil {
				return a, err
			}
			a.labelAt = &pt
			i++
		default:
			return a, fmt.Errorf("unexpected %q", w[i])
		}
	}
	return a, nil
}

func (p *Picture) end(s string) (end, error) {
	id, rest, hasSide := strings.Cut(s, ".")
	b := p.byID[id]
	if b == nil {
		return end{}, fmt.Errorf("no box %q", id)
	}
	e := end{b: b, at: 0.5}
	if !hasSide {
		return e, nil
	}
	side, frac, hasAt := strings.Cut(rest, "@")
	if len(side) != 1 || !strings.Contains("nsew", side) {
		return end{}, fmt.Errorf("%s: a side is n, s, e or w", s)
	}
	e.side = side[0]
	if hasAt {
		f, err := strconv.ParseFloat(frac, 64)
		if err != nil || f < 0 || f > 1 {
			return end{}, fmt.Errorf("%s: the point along a side is 0 to 1", s)
		}
		e.at = f
	}
	return e, nil
}

// words splits a line into words, keeping "quoted strings" (with \" and
// \\ escapes) whole with their quotes; # outside quotes ends the line.
func words(line string) ([]string, error) {
	var out []string
	var cur strings.Builder
	in, esc, has := false, false, false
	for _, r := range line {
		switch {
		case esc:
			cur.WriteRune(r)
			esc = false
		case in && r == '\\':
			cur.WriteRune(r)
			esc = true
		case r == '"':
			cur.WriteRune(r)
			in = !in
			has = true
		case in:
			cur.WriteRune(r)
		case r == '#':
			if has {
				out = append(out, cur.String())
			}
			return out, nil
		case unicode.IsSpace(r):
			if has {
				out = append(out, cur.String())
				cur.Reset()
				has = false
			}
		default:
			cur.WriteRune(r)
			has = true
		}
	}
	if in {
		return nil, fmt.Errorf("a quote is never closed")
	}
	if has {
		out = append(out, cur.String())
	}
	return out, nil
}

func quoted(s string) bool { return len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' }

func unquote(s string) string {
	s = strings.TrimSuffix(strings.TrimPrefix(s, `"`), `"`)
	return strings.NewReplacer(`\"`, `"`, `\\`, `\`).Replace(s)
}

func numbers(ws []string) ([]float64, error) {
	out := make([]float64, len(ws))
	for i, w := range ws {
		f, err := strconv.ParseFloat(w, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", w)
		}
		out[i] = f
	}
	return out, nil
}

func pair(a, b string) (float64, float64, error) {
	n, err := numbers([]string{a, b})
	if err != nil {
		return 0, 0, err
	}
	return n[0], n[1], nil
}

func point(s string) ([2]float64, error) {
	a, b, ok := strings.Cut(s, ",")
	if !ok {
		return [2]float64{}, fmt.Errorf("%q is not X,Y", s)
	}
	x, y, err := pair(a, b)
	return [2]float64{x, y}, err
}

// The drawing.

const (
	fontFamily = "Helvetica, Arial, sans-serif"
	boxFont    = 14.0
	labelFont  = 12.0
	lineGap    = 1.3
)

var fills = map[string][2]string{ // fill, stroke
	"process":  {"#fff8c5", "#9a6700"},
	"queue":    {"#ddf4ff", "#0969da"},
	"store":    {"#eaeef2", "#57606a"},
	"broker":   {"#fbefff", "#8250df"},
	"decision": {"#ffebe9", "#cf222e"},
	"person":   {"#dafbe1", "#1a7f37"},
	"note":     {"#ffffff", "#8c959f"},
}

// SVG renders the picture. The bytes depend on the picture alone.
func (p *Picture) SVG() []byte {
	var b bytes.Buffer
	f := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	f(`<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" role="img" aria-label="%s" font-family="%s">`+"\n",
		num(p.W), num(p.H), num(p.W), num(p.H), esc(p.Title), fontFamily)
	f("<!-- Drawn by go run ./internal/tools/pictures from the .pic file beside this one; do not edit. -->\n")
	f("<title>%s</title>\n", esc(p.Title))
	f("<defs>\n")
	names := make([]string, 0, len(colors))
	for n := range colors {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f(`<marker id="head-%s" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="%s"/></marker>`+"\n", n, colors[n])
	}
	f("</defs>\n")
	f(`<rect x="0" y="0" width="%s" height="%s" fill="#ffffff"/>`+"\n", num(p.W), num(p.H))
	for _, fr := range p.frames {
		c := colors[fr.color]
		f(`<rect x="%s" y="%s" width="%s" height="%s" rx="10" fill="none" stroke="%s" stroke-width="1.5" stroke-dasharray="6 4"/>`+"\n", num(fr.x), num(fr.y), num(fr.w), num(fr.h), c)
		f(`<text x="%s" y="%s" font-size="%s" font-weight="bold" fill="%s">%s</text>`+"\n", num(fr.x+10), num(fr.y+18), num(labelFont+1), c, esc(fr.label))
	}
	for _, a := range p.arrows {
		p.drawArrow(&b, a)
	}
	for _, bx := range p.boxes {
		drawBox(&b, bx)
	}
	for _, a := range p.arrows {
		drawLabel(&b, a)
	}
	for _, t := range p.texts {
		size, weight, style := labelFont, "normal", "normal"
		switch t.style {
		case "small":
			size = labelFont - 1
		case "bold":
			weight = "bold"
		case "italic":
			style = "italic"
		}
		f(`<text x="%s" y="%s" font-size="%s" font-weight="%s" font-style="%s" text-anchor="%s" fill="%s">%s</text>`+"\n",
			num(t.x), num(t.y), num(size), weight, style, t.anchor, colors[t.color], esc(t.s))
	}
	f("</svg>\n")
	return b.Bytes()
}

func drawBox(b *bytes.Buffer, bx *box) {
	f := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	fill, stroke := fills[bx.kind][0], fills[bx.kind][1]
	x, y, w, h := bx.x, bx.y, bx.w, bx.h
	switch bx.kind {
	case "store":
		ry := math.Min(10, h/5)
		f(`<path d="M%s,%s v%s a%s,%s 0 0 0 %s,0 v%s a%s,%s 0 0 0 %s,0 z" fill="%s" stroke="%s" stroke-width="1.5"/>`+"\n",
			num(x), num(y+ry), num(h-2*ry), num(w/2), num(ry), num(w), num(-(h - 2*ry)), num(w/2), num(ry), num(-w), fill, stroke)
		f(`<path d="M%s,%s a%s,%s 0 0 0 %s,0" fill="none" stroke="%s" stroke-width="1.5"/>`+"\n", num(x), num(y+ry), num(w/2), num(ry), num(w), stroke)
	case "decision":
		d := math.Min(16, w/6)
		f(`<path d="M%s,%s L%s,%s L%s,%s L%s,%s L%s,%s L%s,%s z" fill="%s" stroke="%s" stroke-width="1.5"/>`+"\n",
			num(x+d), num(y), num(x+w-d), num(y), num(x+w), num(y+h/2), num(x+w-d), num(y+h), num(x+d), num(y+h), num(x), num(y+h/2), fill, stroke)
	case "queue":
		f(`<rect x="%s" y="%s" width="%s" height="%s" rx="4" fill="%s" stroke="%s" stroke-width="1.5"/>`+"\n", num(x), num(y), num(w), num(h), fill, stroke)
		for i := 1; i <= 3; i++ {
			lx := x + w - 8*float64(i)
			f(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1"/>`+"\n", num(lx), num(y+4), num(lx), num(y+h-4), stroke)
		}
	case "note":
		f(`<rect x="%s" y="%s" width="%s" height="%s" rx="4" fill="%s" stroke="%s" stroke-width="1" stroke-dasharray="3 3"/>`+"\n", num(x), num(y), num(w), num(h), fill, stroke)
	case "person":
		f(`<rect x="%s" y="%s" width="%s" height="%s" rx="%s" fill="%s" stroke="%s" stroke-width="1.5"/>`+"\n", num(x), num(y), num(w), num(h), num(math.Min(h/2, 18)), fill, stroke)
	default:
		f(`<rect x="%s" y="%s" width="%s" height="%s" rx="8" fill="%s" stroke="%s" stroke-width="1.5"/>`+"\n", num(x), num(y), num(w), num(h), fill, stroke)
	}
	cx := x + w/2
	if bx.kind == "queue" {
		cx = x + (w-24)/2
	}
	size := boxFont
	if bx.kind == "note" {
		size = labelFont
	}
	n := float64(len(bx.lines))
	top := y + h/2 - (n-1)*size*lineGap/2 + size*0.35
	for i, l := range bx.lines {
		weight := "normal"
		if i == 0 && bx.kind != "note" {
			weight = "bold"
		}
		f(`<text x="%s" y="%s" font-size="%s" font-weight="%s" text-anchor="middle" fill="#1f2328">%s</text>`+"\n",
			num(cx), num(top+float64(i)*size*lineGap), num(size), weight, esc(l))
	}
}

// points returns the arrow's polyline: its ends on the boxes' borders.
func (p *Picture) points(a arrow) [][2]float64 {
	first := endPoint(a.from, nil)
	last := endPoint(a.to, nil)
	next := last
	if len(a.via) > 0 {
		next = a.via[0]
	}
	prev := first
	if len(a.via) > 0 {
		prev = a.via[len(a.via)-1]
	}
	if a.from.side == 0 {
		first = endPoint(a.from, &next)
	}
	if a.to.side == 0 {
		last = endPoint(a.to, &prev)
	}
	pts := [][2]float64{first}
	pts = append(pts, a.via...)
	return append(pts, last)
}

// endPoint is the point where an arrow meets its box: a side's point, or
// where the line towards toward leaves the box (the centre if none).
func endPoint(e end, toward *[2]float64) [2]float64 {
	b := e.b
	switch e.side {
	case 'n':
		return [2]float64{b.x + e.at*b.w, b.y}
	case 's':
		return [2]float64{b.x + e.at*b.w, b.y + b.h}
	case 'w':
		return [2]float64{b.x, b.y + e.at*b.h}
	case 'e':
		return [2]float64{b.x + b.w, b.y + e.at*b.h}
	}
	cx, cy := b.x+b.w/2, b.y+b.h/2
	if toward == nil {
		return [2]float64{cx, cy}
	}
	dx, dy := toward[0]-cx, toward[1]-cy
	if dx == 0 && dy == 0 {
		return [2]float64{cx, cy}
	}
	t := math.Inf(1)
	if dx != 0 {
		t = math.Min(t, (b.w/2)/math.Abs(dx))
	}
	if dy != 0 {
		t = math.Min(t, (b.h/2)/math.Abs(dy))
	}
	return [2]float64{cx + t*dx, cy + t*dy}
}

func (p *Picture) drawArrow(b *bytes.Buffer, a arrow) {
	pts := p.points(a)
	var d strings.Builder
	for i, pt := range pts {
		if i == 0 {
			fmt.Fprintf(&d, "M%s,%s", num(pt[0]), num(pt[1]))
		} else {
			fmt.Fprintf(&d, " L%s,%s", num(pt[0]), num(pt[1]))
		}
	}
	dash := ""
	if a.dashed {
		dash = ` stroke-dasharray="6 4"`
	}
	fmt.Fprintf(b, `<path d="%s" fill="none" stroke="%s" stroke-width="1.6"%s marker-end="url(#head-%s)"/>`+"\n", d.String(), colors[a.color], dash, a.color)
}

func drawLabel(b *bytes.Buffer, a arrow) {
	if a.label == "" {
		return
	}
	var x, y float64
	if a.labelAt != nil {
		x, y = a.labelAt[0], a.labelAt[1]
	} else {
		// The middle of the longest segment.
		pts := (&Picture{}).points(a)
		best := -1.0
		for i := 1; i < len(pts); i++ {
			l := math.Hypot(pts[i][0]-pts[i-1][0], pts[i][1]-pts[i-1][1])
			if l > best {
				best = l
				x, y = (pts[i][0]+pts[i-1][0])/2, (pts[i][1]+pts[i-1][1])/2
			}
		}
	}
	lines := strings.Split(a.label, `\n`)
	width := 0.0
	for _, l := range lines {
		width = math.Max(width, textWidth(l, labelFont))
	}
	h := float64(len(lines)) * labelFont * lineGap
	fmt.Fprintf(b, `<rect x="%s" y="%s" width="%s" height="%s" rx="3" fill="#ffffff" fill-opacity="0.9"/>`+"\n",
		num(x-width/2-3), num(y-h/2), num(width+6), num(h))
	for i, l := range lines {
		ly := y - h/2 + labelFont*lineGap*(float64(i)+0.5) + labelFont*0.35
		fmt.Fprintf(b, `<text x="%s" y="%s" font-size="%s" text-anchor="middle" fill="%s">%s</text>`+"\n",
			num(x), num(ly), num(labelFont), colors[a.color], esc(l))
	}
}

// fits reports a line wider than the box has room for (by textWidth's
// estimate, bold for a first line) or more lines than its height holds:
// text running over a border is what a glance at a rendered picture
// catches first, so the source is refused instead.
func (bx *box) fits() error {
	size := boxFont
	if bx.kind == "note" {
		size = labelFont
	}
	room := bx.w - 8 // 4 px a side
	switch bx.kind {
	case "queue":
		room -= 24 // the stripes on the right
	case "decision":
		room -= math.Min(16, bx.w/6) // the slanted ends, half of each
	}
	for i, l := range bx.lines {
		w := textWidth(l, size)
		if i == 0 && bx.kind != "note" {
			w *= 1.1 // bold
		}
		if w > room {
			return fmt.Errorf("line %q is about %.0f px wide, the box has room for %.0f: widen the box or shorten the line", l, w, room)
		}
	}
	if need := float64(len(bx.lines)) * size * lineGap; need > bx.h {
		return fmt.Errorf("%d lines need about %.0f px, the box is %.0f high", len(bx.lines), need, bx.h)
	}
	return nil
}

// textWidth estimates a text's width, generously (DejaVu Sans, wider than
// Helvetica, is what many Linux browsers use): no font is measured, so the
// picture is the same on every machine.
func textWidth(s string, size float64) float64 {
	w := 0.0
	for _, r := range s {
		switch {
		case strings.ContainsRune("il.,:;'|!()[]{}", r):
			w += 0.32
		case strings.ContainsRune("mwMW", r):
			w += 0.92
		case unicode.IsUpper(r):
			w += 0.72
		case r == ' ':
			w += 0.32
		default:
			w += 0.6
		}
	}
	return w * size
}

func num(f float64) string {
	return strconv.FormatFloat(math.Round(f*10)/10, 'f', -1, 64)
}

func esc(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}
