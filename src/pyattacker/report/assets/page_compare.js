/* pyattacker HTML reports, part 5 of 5: the page of `pyattacker compare`.
 *
 * R is the `compare --json` document; X.runs says who A and B are (from the two reports)
 * and holds what the charts draw. Each row's A, B and change are values of R (data-path);
 * the change in percent is derived from them (data-derived) and the verdict is the row's
 * `significant` and `worse` put into words (data-verdict).
 */
(function (k) {
  "use strict";
  var R = k.R, X = k.X, root = k.root, F = k.F;
  var el = k.el, add = k.add, value = k.value, section = k.section, note = k.note;
  var table = k.table, tiles = k.tiles, chart = k.chart, hdr = k.hdr, payload = k.payload;

  var FORMATS = {
    s: F.ms,
    share: { scale: 100, digits: 3, unit: "%" },
    "/s": { scale: 1, digits: 2, unit: "/s" },
  };
  var WORDS = {
    regression: "regression: B is worse beyond the noise",
    improvement: "improvement: B is better beyond the noise",
    noise: "within noise",
    "n/a": "n/a: too little to judge",
  };

  function verdict(row) {
    if (row.significant === null || row.significant === undefined) return "n/a";
    if (!row.significant) return "noise";
    return row.worse ? "regression" : "improvement";
  }
  function format(row) { return FORMATS[row.unit] || F.num4; }

  function comparePage() {
    add(root, "h1", "", payload.title);
    add(root, "p", "sub", "A (the baseline) = " + R.a + " · B (the candidate) = " + R.b);
    tiles(root, [["regressions", ["extra", "counts", "regressions"], F.int],
      ["improvements", ["extra", "counts", "improvements"], F.int],
      ["figures compared", ["extra", "counts", "rows"], F.int]]);
    var worse = R.regressions.length ? "Regressions beyond the noise: " +
      R.regressions.join(", ") + "." : "No regression beyond the noise.";
    add(root, "p", R.regressions.length ? "bad" : "ok", worse);
    if (R.notes.length) {
      var box = add(root, "ul", "warnings");
      R.notes.forEach(function (n) { add(box, "li", "warning", n); });
    }
    section("Every figure, A against B", "The change is B − A. The verdict says whether it " +
      "is larger than what chance explains, by the test named on the row (its intervals or " +
      "statistic under \"noise\"). Rows in red are regressions; green, improvements.");
    figures();
    if (R.kind === "attack") attackCharts(); else benchCharts();
    section("The two runs", "Who A and B are, read from the two reports; rows that differ " +
      "are shaded.");
    (R.kind === "attack" ? attackRuns : benchRuns)();
  }

  function figures() {
    var rows = R.rows.map(function (row, i) {
      var f = format(row), p = ["rows", i];
      var v = verdict(row), cell = el("td", "text verdict", WORDS[v]);
      cell.setAttribute("data-verdict", v);
      return [row.figure, row.unit, value("td", p.concat(["a"]), f),
        value("td", p.concat(["b"]), f), signed(value("td", p.concat(["change"]), change(row))),
        percent(row), cell, row.test, el("td", "long", row.noise)];
    });
    var t = table(root, ["figure", "unit", "A", "B", "change (B − A)", "change %", "verdict",
      "test", "noise"], rows, function (r) {
      var v = verdict(R.rows[r]);
      return v === "regression" ? "regression" : v === "improvement" ? "improvement" : "";
    });
    t.setAttribute("data-figures", "");
  }
  // a change shows in the row's unit; a share's change in percentage points
  function change(row) {
    var f = format(row);
    return row.unit === "share" ? { scale: 100, digits: 3, unit: " pt" } : f;
  }
  // a positive change reads "+4.07 ms": the sign says which way B moved
  function signed(cell) {
    if (Number(cell.getAttribute("data-value")) > 0) cell.textContent = "+" + cell.textContent;
    return cell;
  }
  function percent(row) {
    var ok = typeof row.change === "number" && typeof row.a === "number" && row.a !== 0;
    var pct = ok ? row.change / row.a * 100 : null;
    var cell = el("td", "", pct === null ? "–" : (pct < 0 ? "" : "+") + pct.toFixed(1) + "%");
    cell.setAttribute("data-derived", pct === null ? "null" : String(pct));
    return cell;
  }

  // ------------------------------------------------------------------------ the runs

  function sideBySide(keys, pick) {
    var rows = keys.map(function (key) {
      var a = pick(X.runs[0], key), b = pick(X.runs[1], key);
      return [key, el("td", "long", a), el("td", "long", b), a === b ? "" : "differs"];
    });
    return table(root, ["", "A", "B", ""], rows, function (r) {
      return rows[r][3] ? "differs" : "";
    });
  }
  function text(v) {
    if (v === null || v === undefined) return "–";
    return typeof v === "object" ? JSON.stringify(v) : String(v);
  }
  function attackRuns() {
    var plans = [X.runs[0].plan || {}, X.runs[1].plan || {}];
    var keys = Object.keys(Object.assign({}, plans[0], plans[1]));
    sideBySide(["file", "started_at", "pyattacker"], function (run, key) {
      return text(run[key]);
    }).setAttribute("data-runs", "");
    add(root, "h3", "", "Plans");
    sideBySide(keys, function (run, key) { return text((run.plan || {})[key]); });
  }
  function benchRuns() {
    sideBySide(["file", "scenario", "seeds", "algorithms"], function (run, key) {
      return text(run[key]);
    }).setAttribute("data-runs", "");
  }

  // ------------------------------------------------------------------------ charts

  function attackCharts() {
    section("Latency distributions, A against B", "Each run's latency percentiles as the " +
      "reports hold them: A solid, B dashed. A line higher up is slower at that percentile.");
    var grid = add(root, "div", "grid");
    [["latency", "Latency by percentile, A vs B (scheduled clock)"],
      ["service_time", "Service time by percentile, A vs B (sent clock)"],
      ["ttft", "TTFT by percentile, A vs B"]].forEach(function (c) {
      var da = X.runs[0].dists[c[0]], db = X.runs[1].dists[c[0]];
      if (!da || !db) return;
      hdr(grid, c[1], [{ label: "A", dist: da }, { label: "B", dist: db, dash: [8, 5] }], "ms");
    });
  }

  function benchCharts() {
    var metrics = {};
    R.rows.forEach(function (row, i) {
      var m = row.figure.slice(0, row.figure.indexOf("["));
      (metrics[m] = metrics[m] || []).push(i);
    });
    section("Each algorithm from A to B", "One line per algorithm: its mean over the " +
      "seeds in run A (left) and in run B (right), the table's A and B; the shaded band " +
      "spans its seeds' lowest to highest value. Whether a change is beyond the noise is " +
      "the table's verdict.");
    var grid = add(root, "div", "grid");
    Object.keys(metrics).forEach(function (m) { benchChart(grid, m, metrics[m]); });
  }
  // one series per algorithm (A's mean to B's), its seeds summarised as a min-max band
  function benchChart(grid, m, indexes) {
    var series = [], bands = [];
    indexes.forEach(function (index, j) {
      var row = R.rows[index];
      var color = k.COLORS[j % k.COLORS.length];
      var seeds = [0, 1].map(function (s) {
        return (X.runs[s].values[row.figure] || []).filter(function (v) {
          return typeof v === "number" && isFinite(v); });
      });
      var low = seeds.map(function (v) { return v.length ? Math.min.apply(null, v) : null; });
      var high = seeds.map(function (v) { return v.length ? Math.max.apply(null, v) : null; });
      var at = series.length;
      series.push({ label: row.figure.slice(m.length + 1, -1), values: [row.a, row.b],
        points: true, size: 8, color: color, dash: j % 2 ? [8, 5] : undefined });
      series.push({ label: "highest seed", values: high, color: "rgba(0,0,0,0)",
        noLine: true, noLegend: true });
      series.push({ label: "lowest seed", values: low, color: "rgba(0,0,0,0)",
        noLine: true, noLegend: true });
      bands.push({ upper: at + 1, lower: at + 2, color: color + "2e" });
    });
    chart({ parent: grid, title: m + ": A vs B by algorithm", x: [0, 1], xName: "run",
      xLabel: "run", xSplits: [0, 1], xRange: [-0.25, 1.25],
      xValues: function (v) { return v === 0 ? "A (baseline)" : v === 1 ? "B (candidate)" : ""; },
      yLabel: R.rows[indexes[0]].unit, series: series, bands: bands, height: 240,
      caption: "Lines: each algorithm's mean; bands: its seeds' range." });
  }

  k.pages.compare = comparePage;
})(pyattackerKit);
