/* pyattacker HTML reports, part 4 of 5: the bench page. */
(function (k) {
  "use strict";
  var R = k.R, X = k.X, root = k.root, F = k.F, QS = k.QS;
  var el = k.el, add = k.add, get = k.get, value = k.value, section = k.section;
  var note = k.note, table = k.table, tiles = k.tiles, kv = k.kv, chart = k.chart;
  var hdr = k.hdr, distTable = k.distTable, countsTable = k.countsTable, seconds = k.seconds;
  var windowsX = k.windowsX, perSecond = k.perSecond, payload = k.payload;

  // ------------------------------------------------------------------------ bench page

  function benchPage() {
    var sc = R.scenario;
    add(root, "h1", "", payload.title);
    add(root, "p", "sub", sc.summary);
    add(root, "p", "sub", "Problem: " + sc.problem + " · seeds " + sc.seeds.join(", ") +
      " · algorithms " + R.algorithms.join(", "));
    section("Winners", "Per metric, the algorithms that can claim the best value, and why. " +
      "The leader has the best mean over the seeds; a challenger shares the mark when the " +
      "data cannot tell it from the leader.");
    (X.notes || []).forEach(function (n) { note(root, n); });
    var rows = Object.keys(R.metrics).map(function (m) {
      var meta = R.metrics[m], w = R.winners[m] || [];
      return [m, meta.unit, meta.better, w.length ? w.join(", ") : "nobody", why(m)];
    });
    table(root, ["metric", "unit", "better", "best", "why"], rows.map(function (r) {
      return [r[0], r[1], r[2], r[3], el("td", "long why", r[4])];
    })).setAttribute("data-winners", "");
    section("Each metric with its spread and confidence intervals", "Mean over the seeds with " +
      "its 95% confidence interval (Student's t), the spread, and each challenger's paired " +
      "difference from the leader with its 95% confidence interval.");
    Object.keys(R.metrics).forEach(metricBlock);
  }

  function why(m) {
    var pd = R.paired_differences[m], w = R.winners[m] || [];
    var better = R.metrics[m].better;
    if (better === "neutral") return "Not ranked: a diagnostic, neither higher nor lower is better.";
    if (!pd || !pd.leader) {
      return w.length ? "Only " + w.join(", ") + " could be compared."
        : "Nobody can claim it: the data single out no leader (the values are undefined, " +
          "or every algorithm is level).";
    }
    var sharers = Object.keys(pd.challengers).filter(function (a) { return pd.challengers[a].shares; });
    var text = pd.leader + " leads (best mean, " + better + " is better)";
    text += sharers.length ? "; " + sharers.join(", ") + " cannot be told apart from it." : "; " +
      "every challenger is clearly behind.";
    return text;
  }

  function metricBlock(m) {
    var meta = R.metrics[m], agg = R.aggregates[m] || {}, pd = R.paired_differences[m];
    var winners = R.winners[m] || [], neutral = meta.better === "neutral";
    add(root, "h3", "", m + " (" + meta.unit + "; " + (neutral ? "a diagnostic, not ranked"
      : meta.better + " is better") + ")");
    note(root, meta.meaning);
    var algs = Object.keys(agg);
    var headers = ["algorithm", "n", "mean", "mean 95% CI low", "mean 95% CI high", "min",
      "max", "stdev"];
    if (!neutral) {
      headers = headers.concat(["difference from leader", "paired se", "95% CI low",
        "95% CI high", "shares the mark"]);
    }
    var t = table(root, headers, algs.map(function (a) { return metricRow(m, a, neutral); }),
      function (r) { return winners.indexOf(algs[r]) >= 0 ? "winner" : ""; });
    t.setAttribute("data-metric", m);
    var defined = algs.filter(function (a) { return agg[a]; });
    if (!defined.length) note(root, "No algorithm has a defined value in this scenario.");
    else if (!neutral) seedPlot(m, defined, agg, meta);
  }

  function metricRow(m, a, neutral) {
    var p = ["aggregates", m, a];
    var own = ["n", "mean", "ci95_low", "ci95_high", "min", "max", "stdev"];
    var row = [a].concat(own.map(function (k) {
      return value("td", p.concat([k]), k === "n" ? F.int : F.num4);
    }));
    if (neutral) return row;
    var pd = R.paired_differences[m];
    var c = pd && pd.challengers && pd.challengers[a];
    if (c) {
      var cp = ["paired_differences", m, "challengers", a];
      return row.concat(["mean", "se", "ci_low", "ci_high"].map(function (k) {
        return value("td", cp.concat([k]), F.num4);
      })).concat([c.shares ? "yes" : "no"]);
    }
    var status = pd && pd.leader === a ? "leader"
      : R.metrics[m].gated && a in (R.excluded_by_completion || {})
        ? "not ranked: too few jobs done" : "";
    return row.concat(["", "", "", "", status]);
  }

  function seedPlot(m, algs, agg, meta) {
    var x = algs.map(function (a, i) { return i; });
    var most = 0;
    algs.forEach(function (a) { most = Math.max(most, (agg[a].values || []).length); });
    var series = [];
    for (var i = 0; i < most; i++) {
      // one legend entry for every seed's dots: they share a colour
      series.push({ label: "one run per seed", pointsOnly: true, points: true, size: 6,
        color: "#1f6fd1", noLegend: i > 0, values: algs.map(function (a) { var v = agg[a].values || []; return i < v.length ? v[i] : null; }) });
    }
    // the mean last, as a large ring, so the runs' dots never hide it
    series.push({ label: "mean", values: algs.map(function (a) { return agg[a].mean; }),
      pointsOnly: true, points: true, size: 16, ring: true, color: "#1d2330" });
    chart({ title: m + " by algorithm", x: x, xLabel: "algorithm", xName: "algorithm",
      xSplits: x, xValues: function (v) { return algs[v] || ""; }, xRange: [-0.5, algs.length - 0.5],
      yLabel: meta.unit, series: series, height: 220,
      caption: "Rings: the mean over the seeds; dots: one run each (one per seed)." });
  }


  k.pages.bench = benchPage;
})(pyattackerKit);
