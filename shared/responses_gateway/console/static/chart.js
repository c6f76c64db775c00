// Small SVG charts of time buckets (bars, stacked bars, lines) drawn at the width of their box
// and redrawn when it changes; each bucket's column carries a <title> with its values (the
// browser's tooltip). Attributes only (no style attributes): the page's CSP allows no inline
// style. Times are UTC.

const NS = "http://www.w3.org/2000/svg";
export const PALETTE = ["#0b5cad", "#c2410c", "#1a7f37", "#8250df", "#b42318", "#57606a", "#0e7490", "#9a6700"];

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) node.setAttribute(k, v);
  for (const child of children.flat()) if (child) node.append(child);
  return node;
}

function niceMax(value) {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (step * power >= value) return step * power;
  return 10 * power;
}

function timeLabel(seconds, width, span) {
  const iso = new Date(seconds * 1000).toISOString();
  if (width >= 86400 || (width >= 3600 && span > 3 * 86400)) return iso.slice(5, 10);
  if (span > 86400) return `${iso.slice(5, 10)} ${iso.slice(11, 16)}`;
  return iso.slice(11, 16);
}

/** Draw a chart of ``spec`` in ``box`` (a block element), now and whenever its width changes.
 * spec: {starts: [unix s], width: bucket seconds, series: [{label, values, color?}],
 *        kind: "bar" | "line", stacked: bool, format: value -> text, height?} */
export function timeChart(box, spec) {
  let drawn = 0;
  const draw = () => {
    const width = Math.max(240, Math.floor(box.clientWidth || 320));
    if (width === drawn) return;
    drawn = width;
    box.replaceChildren(render(width, spec));
  };
  draw();
  if (typeof ResizeObserver === "function") new ResizeObserver(draw).observe(box);
  return box;
}

function render(width, spec) {
  const height = spec.height || 150;
  const format = spec.format || String;
  const left = 56;
  const right = 6;
  const top = 8;
  const bottom = 20;
  const plotW = width - left - right;
  const plotH = height - top - bottom;
  const n = spec.starts.length;
  const band = plotW / Math.max(1, n);
  const kind = spec.kind || "bar";
  const series = spec.series.map((s, i) => ({ ...s, color: s.color || PALETTE[i % PALETTE.length] }));
  let max = 0;
  for (let i = 0; i < n; i++) {
    if (kind === "bar" && spec.stacked) {
      max = Math.max(max, series.reduce((sum, s) => sum + (Number(s.values[i]) || 0), 0));
    } else {
      for (const s of series) if (s.values[i] !== null && s.values[i] !== undefined) max = Math.max(max, Number(s.values[i]));
    }
  }
  const top_ = niceMax(max);
  const y = (v) => top + plotH - (plotH * v) / top_;
  const root = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, class: "chart-svg", "aria-hidden": "true" });
  for (const fraction of [0, 0.5, 1]) {
    const value = top_ * fraction;
    root.append(
      svg("line", { x1: left, x2: width - right, y1: y(value), y2: y(value), class: "grid" }),
      svg("text", { x: left - 4, y: y(value) + 4, "text-anchor": "end", class: "tick" }, document.createTextNode(format(value))),
    );
  }
  const span = n * spec.width;
  const every = Math.max(1, Math.ceil(n / Math.max(2, Math.floor(plotW / 78))));
  for (let i = 0; i < n; i += every) {
    root.append(svg("text", { x: left + i * band + band / 2, y: height - 5, "text-anchor": "middle", class: "tick" },
      document.createTextNode(timeLabel(spec.starts[i], spec.width, span))));
  }
  if (kind === "bar") {
    const gap = band > 6 ? 1 : 0;
    for (let i = 0; i < n; i++) {
      let base = 0;
      series.forEach((s, k) => {
        const value = Number(s.values[i]) || 0;
        if (!value) return;
        const lower = spec.stacked ? base : 0;
        const upper = lower + value;
        const slot = spec.stacked ? band : band / series.length;
        const x = left + i * band + (spec.stacked ? 0 : k * slot);
        root.append(svg("rect", { x: x + gap / 2, width: Math.max(1, slot - gap), y: y(upper), height: Math.max(1, y(lower) - y(upper)), fill: s.color }));
        base = upper;
      });
    }
  } else {
    for (const s of series) {
      let path = "";
      let pen = false;
      s.values.forEach((v, i) => {
        const x = left + i * band + band / 2;
        if (v === null || v === undefined) { pen = false; return; }
        path += `${pen ? "L" : "M"}${x.toFixed(1)},${y(Number(v)).toFixed(1)}`;
        pen = true;
        const alone = (s.values[i - 1] ?? null) === null && (s.values[i + 1] ?? null) === null;
        if (alone) root.append(svg("circle", { cx: x, cy: y(Number(v)), r: 2.5, fill: s.color }));
      });
      if (path) root.append(svg("path", { d: path, fill: "none", stroke: s.color, "stroke-width": 2 }));
    }
  }
  for (let i = 0; i < n; i++) {  // hover targets: one column per bucket, its values as a tooltip
    const when = new Date(spec.starts[i] * 1000).toISOString().replace("T", " ").slice(0, 16);
    const lines = series.map((s) => `${s.label}: ${s.values[i] === null || s.values[i] === undefined ? "–" : format(Number(s.values[i]))}`);
    root.append(svg("rect", { x: left + i * band, y: top, width: band, height: plotH, class: "hit" },
      svg("title", {}, document.createTextNode(`${when} UTC\n${lines.join("\n")}`))));
  }
  return root;
}

/** A legend for ``series`` (the colors the chart used, in order). */
export function legend(series) {
  const box = document.createElement("ul");
  box.className = "legend";
  series.forEach((s, i) => {
    const item = document.createElement("li");
    const mark = svg("svg", { width: 10, height: 10, "aria-hidden": "true" }, svg("rect", { width: 10, height: 10, fill: s.color || PALETTE[i % PALETTE.length] }));
    item.append(mark, document.createTextNode(` ${s.label}`));
    box.append(item);
  });
  return box;
}
