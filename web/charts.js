/*
 * Remora web client: charts, drawn here as inline SVG (no library, nothing
 * from another origin; the page's Content-Security-Policy allows neither).
 *
 * lineChart(id, title, series, fmt) returns a <figure class="chart">: the
 * title, an <svg role="img"> with the title as its accessible name, a line and a
 * dot per point for each series (each dot's <title> says the series, the
 * time and the value), the value axis from zero, the first and last times
 * under it, and a legend.  series: [{ name, color, points: [[time, value],
 * …] }] with times as Date or milliseconds; fmt formats a value.  Names and
 * values reach the page as text nodes only.
 */
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";

function svgEl(tag, attrs, ...kids) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  for (const c of kids) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function hhmm(t) {
  return new Date(t).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

function lineChart(id, title, series, fmt) {
  /* drawn at about the width it is shown at (a phone's 360 px, a
   * desktop's 640), so that its 11-unit labels stay 11 px, not 6 */
  const W = Math.round(Math.min(640, Math.max(320, (window.innerWidth || 640) - 32)));
  const H = W < 480 ? 180 : 200, L = 72, R = 12, T = 12, B = 28;
  const pts = series.flatMap((s) => s.points);
  const fig = document.createElement("figure");
  fig.className = "chart";
  fig.id = id;
  fig.dataset.points = String(pts.length);
  const cap = document.createElement("figcaption");
  cap.append(document.createTextNode(title));
  if (pts.length === 0) {
    cap.append(document.createTextNode(": no data yet"));
    fig.append(cap);
    return fig;
  }
  const t0 = Math.min(...pts.map((p) => +p[0]));
  const t1 = Math.max(t0 + 1, ...pts.map((p) => +p[0]));
  const vmax = Math.max(1, ...pts.map((p) => p[1]));
  const x = (t) => L + (W - L - R) * (+t - t0) / (t1 - t0);
  const y = (v) => T + (H - T - B) * (1 - v / vmax);
  const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": title,
    preserveAspectRatio: "xMidYMid meet" });
  svg.append(svgEl("title", {}, title));
  /* 0, the middle and the top; a middle that reads as one of them (a
   * count's 0.5 is "1") is left out */
  const ticks = [0, vmax / 2, vmax].filter((v, i, a) => i === 0 || fmt(v) !== fmt(a[i - 1]));
  for (const v of ticks) {
    svg.append(svgEl("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: "#ccc", "stroke-width": 1 }),
      svgEl("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end", "font-size": 11, fill: "#444" }, fmt(v)));
  }
  svg.append(svgEl("text", { x: L, y: H - 8, "font-size": 11, fill: "#444" }, hhmm(t0)),
    svgEl("text", { x: W - R, y: H - 8, "text-anchor": "end", "font-size": 11, fill: "#444" }, hhmm(t1)));
  for (const s of series) {
    if (s.points.length === 0) continue;
    const g = svgEl("g", { class: "series", "data-name": s.name });
    g.append(svgEl("polyline", { points: s.points.map((p) => x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1)).join(" "),
      fill: "none", stroke: s.color, "stroke-width": 2 }));
    for (const p of s.points) {
      g.append(svgEl("circle", { class: "pt", cx: x(p[0]).toFixed(1), cy: y(p[1]).toFixed(1), r: 2.5, fill: s.color },
        svgEl("title", {}, s.name + " at " + hhmm(p[0]) + ": " + fmt(p[1]))));
    }
    svg.append(g);
  }
  const legend = document.createElement("ul");
  legend.className = "legend";
  for (const s of series) {
    const li = document.createElement("li");
    const sw = svgEl("svg", { width: 12, height: 12, "aria-hidden": "true" }, svgEl("rect", { width: 12, height: 12, fill: s.color }));
    li.append(sw, document.createTextNode(" " + s.name));
    legend.append(li);
  }
  fig.append(cap, svg, legend);
  return fig;
}
