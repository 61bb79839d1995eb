/* pyattacker HTML reports, part 1 of 5: the kit the page kinds draw with.
 *
 * The page is drawn from the JSON in #report-data. Every value shown in a table or tile is
 * a value of the embedded report; its element carries data-path (the keys leading to it,
 * as JSON), data-value (the raw value) and data-scale (the factor applied before display:
 * 1000 for milliseconds), so a test can check the page against the JSON report. Text goes
 * in through textContent only: no report value is ever parsed as HTML. The page loads
 * nothing: uPlot is inlined before these scripts. page_attack.js, page_run.js,
 * page_bench.js and page_compare.js each register one kind of page in pyattackerKit.pages;
 * draw() draws the one the payload names.
 */
var pyattackerKit = (function () {
  "use strict";

  // A report file embeds its payload; a live page (attack --serve, serve STORE) has none, and hands
  // each one it fetches to load() before draw().
  var embedded = document.getElementById("report-data");
  var payload = embedded ? JSON.parse(embedded.textContent) : null;
  var R = payload && payload.report;
  var X = payload && payload.extra;
  var root = document.getElementById("page");
  var COLORS = ["#1f6fd1", "#d1541f", "#2a9d4b", "#8a3fc4", "#c4a000", "#1aa3a3", "#b83280",
    "#5b6472"];
  var QS = ["p50", "p90", "p95", "p99", "p99.9"];
  var NINES = { min: 0, p50: 0.30103, p90: 1, p95: 1.30103, p99: 2, "p99.9": 3, max: 4 };
  var NINE_LABELS = { 0: "min", 0.30103: "50%", 1: "90%", 1.30103: "95%", 2: "99%",
    3: "99.9%", 4: "max" };

  // ----------------------------------------------------------------- the DOM, text only

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function add(parent, tag, cls, text) {
    var node = el(tag, cls, text);
    parent.appendChild(node);
    return node;
  }
  function get(obj, path) {
    var v = obj;
    for (var i = 0; i < path.length; i++) {
      if (v === null || v === undefined) return undefined;
      v = v[path[i]];
    }
    return v;
  }

  // ------------------------------------------------------------------------ numbers

  function fixed(v, digits) {
    return Number(v).toLocaleString("en-US", {
      minimumFractionDigits: digits, maximumFractionDigits: digits });
  }
  // A format: how a raw JSON value is shown. scale multiplies before display.
  var F = {
    ms: { scale: 1000, digits: 2, unit: " ms" },
    s: { scale: 1, digits: 2, unit: " s" },
    int: { scale: 1, digits: 0, unit: "" },
    // a count the report leaves out when it is zero (outcomes, states): shown as 0
    count: { scale: 1, digits: 0, unit: "", zero: true },
    rate: { scale: 1, digits: 1, unit: "/s" },
    num: { scale: 1, digits: 2, unit: "" },
    num4: { scale: 1, digits: 4, unit: "" },
    pct: { scale: 100, digits: 1, unit: "%" },
    perMin: { scale: 1, digits: 1, unit: "/min" },
  };
  // a duration in words: "500 ms", "10 s"
  function seconds(v) {
    return v < 1 ? Number((v * 1000).toPrecision(6)) + " ms" : Number(v.toPrecision(6)) + " s";
  }
  function shown(v, f) {
    if ((v === null || v === undefined) && f.zero) return "0";
    if (v === null || v === undefined) return "–";
    if (typeof v !== "number") return String(v);
    return fixed(v * f.scale, f.digits) + f.unit;
  }
  // A cell (or any element) showing report value at `path` (under payload.report or, when
  // path[0] is "extra", under payload.extra).
  function value(tag, path, f, cls) {
    var source = path[0] === "extra" ? X : R;
    var rest = path[0] === "extra" ? path.slice(1) : path;
    var v = get(source, rest);
    var node = el(tag, cls || "", shown(v, f || F.num));
    node.setAttribute("data-path", JSON.stringify(path));
    node.setAttribute("data-value", v === undefined ? "null" : JSON.stringify(v));
    node.setAttribute("data-scale", String((f || F.num).scale));
    if ((f || F.num).zero) node.setAttribute("data-zero", "true");
    return node;
  }

  // ------------------------------------------------------------------------ blocks

  function section(title, intro) {
    add(root, "h2", "", title);
    if (intro) add(root, "p", "sub", intro);
    return root;
  }
  function note(parent, text) { return add(parent, "p", "note", text); }
  // rows: arrays of cells; a cell is a node, or text for a text cell
  function table(parent, headers, rows, rowClass) {
    var t = add(parent, "table");
    var head = add(add(t, "thead"), "tr");
    // a header aligns as its column's first cell does: text left, numbers right
    var first = rows.length ? rows[0] : [];
    headers.forEach(function (h, i) {
      var c = first[i];
      var numeric = c instanceof Node ? c.hasAttribute("data-scale") : typeof c === "number";
      add(head, "th", i === 0 || !numeric ? "text" : "", h);
    });
    var body = add(t, "tbody");
    rows.forEach(function (row, r) {
      var tr = add(body, "tr", rowClass ? rowClass(r) : "");
      row.forEach(function (c) {
        if (c instanceof Node) tr.appendChild(c);
        else add(tr, "td", typeof c === "number" ? "" : "text", c);
      });
    });
    return t;
  }
  function tiles(parent, items) {
    var box = add(parent, "div", "tiles");
    items.forEach(function (it) {
      var tile = add(box, "div", "tile");
      add(tile, "div", "label", it[0]);
      tile.appendChild(value("div", it[1], it[2], "value"));
    });
  }
  function kv(parent, obj, prefix, skip) {
    var rows = [];
    Object.keys(obj || {}).forEach(function (k) {
      if (skip && skip.indexOf(k) >= 0) return;
      var v = obj[k];
      var text = v !== null && typeof v === "object" ? JSON.stringify(v) : v;
      var cell = el("td", "long", text === null || text === undefined ? "–" : text);
      cell.setAttribute("data-path", JSON.stringify(prefix.concat([k])));
      rows.push([k, cell]);
    });
    return table(parent, ["setting", "value"], rows);
  }

  // ------------------------------------------------------------------------ charts

  function finite(v) { return typeof v === "number" && isFinite(v) ? v : null; }
  function positive(v) { return typeof v === "number" && v > 0 ? v : null; }
  // The figure's own width: in a grid, that is its cell's.
  function chartWidth(box) {
    var w = box.clientWidth || root.clientWidth || 900;
    return Math.max(320, Math.min(1120, w - 18));
  }
  // o: {title, caption, x, xLabel, yLabel, series: [{label, values, dash, points}], logY,
  //     xSplits, xValues, points, parent, height, bands}
  // A series with noLegend draws without a legend entry (a band's edge, or the second of
  // several series one entry stands for); bands: [{upper, lower, color}] shades between
  // two series (indexes into o.series).
  function chart(o) {
    var parent = o.parent || root;
    var box = add(parent, "figure", "chart");
    box.setAttribute("data-chart", o.title);
    var series = [{ label: o.xName || "time (s)" }];
    var data = [o.x];
    o.series.forEach(function (s, i) {
      var color = s.color || COLORS[i % COLORS.length];
      var spec = { label: s.label, stroke: color, width: 2, spanGaps: true,
        points: { show: !!(o.points || s.points), size: s.size || 6,
          fill: s.ring ? "rgba(255,255,255,0)" : color, width: s.ring ? 2 : 1 } };
      if (s.dash) spec.dash = s.dash;
      if (s.pointsOnly || s.noLine) spec.paths = function () { return null; };
      if (s.stepped) spec.paths = uPlot.paths.stepped({ align: 1 });  // holds until the next
      series.push(spec);
      data.push(s.values.map(o.logY ? positive : finite));
    });
    var xAxis = { label: o.xLabel, labelSize: 24 };
    if (o.xSplits) {
      xAxis.splits = function () { return o.xSplits; };
      xAxis.values = function (u, splits) { return splits.map(o.xValues); };
    } else if (o.xValues) {
      xAxis.values = function (u, splits) { return splits.map(o.xValues); };
    }
    var yAxis = { label: o.yLabel, labelSize: 24, size: 70 };
    var opts = {
      title: o.title,
      width: chartWidth(box),
      height: o.height || 280,
      scales: { x: { time: false }, y: o.logY ? { distr: 3 } : {} },
      axes: [xAxis, yAxis],
      series: series,
      legend: { show: true, live: false },  // a static page: labels, not hover values
      cursor: { drag: { x: true, y: false } },
    };
    if (o.xRange) opts.scales.x.range = function () { return o.xRange; };
    if (o.bands) {
      opts.bands = o.bands.map(function (b) {
        return { series: [b.upper + 1, b.lower + 1], fill: b.color };
      });
    }
    var plot = new uPlot(opts, data, box);
    plots.push(plot);
    // the legend lists the x series too only when it shows live values
    var rows = plot.root.querySelectorAll(".u-legend .u-series");
    var skip = rows.length - o.series.length;
    o.series.forEach(function (s, i) {
      if (s.noLegend && rows[i + skip]) rows[i + skip].style.display = "none";
    });
    if (o.caption) add(box, "figcaption", "", o.caption);
    return box;
  }
  // An HDR-style plot: latency at each percentile, the x axis in "nines" (log of 1/(1-q)).
  function hdr(parent, title, dists, yLabel) {
    var keys = ["min"].concat(QS).concat(["max"]);
    var x = keys.map(function (k) { return NINES[k]; });
    return chart({
      parent: parent, title: title, x: x, xName: "percentile",
      xLabel: "percentile (log scale: each step is one more nine)",
      xSplits: x, xValues: function (v) { return NINE_LABELS[v] || ""; }, yLabel: yLabel,
      logY: true, points: true,
      series: dists.filter(function (d) { return d.dist && d.dist.count; }).map(function (d) {
        return { label: d.label, values: keys.map(function (k) { return d.dist[k] * 1000; }),
          dash: d.dash };
      }),
      caption: "Each line is one distribution: read up from a percentile to the latency below " +
        "which that share of requests finished. The y axis is logarithmic.",
    });
  }

  // -------------------------------------------------------------- shared attack tables

  function distTable(parent, rows, withMean) {
    var cols = ["count"].concat(withMean ? ["mean"] : []).concat(["min"]).concat(QS)
      .concat(["max"]);
    var headers = ["what", "clock"].concat(cols.map(function (c) {
      return c === "count" ? "count" : c + " (ms)"; }));
    table(parent, headers, rows.filter(function (r) { return get(R, r.path); }).map(function (r) {
      return [r.label, r.clock].concat(cols.map(function (c) {
        return value("td", r.path.concat([c]), c === "count" ? F.int : F.ms);
      }));
    }));
  }
  function countsTable(parent, title, path) {
    var obj = get(R, path) || {};
    var keys = Object.keys(obj);
    add(parent, "h3", "", title);
    if (!keys.length) { note(parent, "none"); return; }
    table(parent, ["", "count"], keys.map(function (k) {
      return [k, value("td", path.concat([k]), F.int)];
    }));
  }

  // time series: a window's start, and a count per second of its width
  function windowsX(windows) { return windows.map(function (w) { return w.start; }); }
  function perSecond(windows, key) {
    return windows.map(function (w) { return w.width ? w[key] / w.width : null; });
  }

  // ------------------------------------------------------------------------ drawing

  var pages = {};
  // the charts drawn: destroyed before the next draw, so a live page's redraws leave no
  // chart (and its window listeners) behind
  var plots = [];
  function draw() {
    plots.forEach(function (u) { u.destroy(); });
    plots = [];
    root.textContent = "";
    pages[payload.kind]();
    add(root, "footer", "", "Written by pyattacker " + payload.version + ". Every figure " +
      "here is a value of " + (payload.live ? "this server's /report.json, fetched when " +
      "drawn." : "the JSON report embedded in this file (view the source)."));
    document.body.setAttribute("data-rendered", "true");
  }
  // Draw from another payload next (the live page's fetched report).
  function load(p) {
    payload = p; R = p.report; X = p.extra;
    api.payload = p; api.R = R; api.X = X;
  }

  var api = {
    pages: pages, draw: draw, load: load, payload: payload, R: R, X: X, root: root, QS: QS, F: F,
    COLORS: COLORS,
    el: el, add: add, get: get, shown: shown, seconds: seconds, value: value,
    section: section, note: note, table: table, tiles: tiles, kv: kv, chart: chart, hdr: hdr,
    distTable: distTable, countsTable: countsTable, windowsX: windowsX, perSecond: perSecond,
  };
  return api;
})();
