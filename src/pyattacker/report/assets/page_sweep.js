/* pyattacker HTML reports, part 6 of 6: the sweep page (attack --sweep). */
(function (k) {
  "use strict";
  var F = k.F, add = k.add, value = k.value, section = k.section, note = k.note;
  var table = k.table, chart = k.chart;

  // a row's figure: durations in ms, shares in %, rates per second
  function fmt(key) {
    if (key === "level") return null;
    if (/_rate$/.test(key)) return F.pct;
    if (/_per_s$/.test(key)) return F.num;
    if (/_s$/.test(key)) return F.ms;
    return F.int;
  }

  function sweepPage() {
    var R = k.R, X = k.X, root = k.root, payload = k.payload, sw = R.sweep;
    add(root, "h1", "", payload.title);
    add(root, "p", "sub", "Sweep (" + sw.kind + "): " + sw.levels_run + " of " +
      sw.levels_planned + " levels run, one attack each. Latencies on the scheduled clock.");
    var why = sw.saturation_reason;
    var said = sw.saturated_at !== null ? sw.saturated_at + " (" + why + ")"
      : (why ? "cannot say: " + why : "not within the levels run");
    var verdict = add(root, "p", sw.saturated_at === null && !why ? "ok" : "warning",
      "Saturates at: " + said);
    verdict.setAttribute("data-saturation", "");
    note(root, "Saturation: " + sw.saturation_rule + ".");
    (X.notes || []).forEach(function (line) { note(root, line); });
    if (sw.interrupted) note(root, "Interrupted: the sweep was stopped (Ctrl-C or a signal); " +
      "a level marked (stopped) covers what ran of it and takes no part in the verdict.");
    section("Levels", "One row per level, in order of offered load.");
    var cols = X.columns.filter(function (c) { return c[0] !== "offered"; });
    table(root, ["level", "offered"].concat(cols.slice(1).map(function (c) { return c[1]; })),
      R.rows.map(function (row, i) {
        var offered = row.offered_rate !== null
          ? value("td", ["rows", i, "offered_rate"], F.rate)
          : value("td", ["rows", i, "concurrency"], F.int);
        return [row.level + (row.stopped ? " (stopped)" : ""), offered].concat(cols.slice(1).map(function (c) {
          return value("td", ["rows", i, c[0]], fmt(c[0]));
        }));
      }), function (r) { return r === sw.saturated_index ? "saturated" : ""; }
    ).setAttribute("data-sweep-table", "");
    section("Figures against the level", "x: the levels in order of offered load.");
    var x = R.rows.map(function (r, i) { return i; });
    var names = R.rows.map(function (r) { return r.level; });
    function plot(title, unit, keys, scale) {
      chart({ title: title, x: x, xName: "level", xLabel: "level", xSplits: x,
        xValues: function (v) { return names[v] || ""; }, xRange: [-0.5, x.length - 0.5],
        yLabel: unit, points: true, height: 240,
        series: keys.map(function (kk) {
          return { label: kk[1], values: R.rows.map(function (r) {
            return r[kk[0]] === null ? null : r[kk[0]] * scale; }) };
        }) });
    }
    plot("Throughput", "per second", [["requests_per_s", "OK requests/s"],
      ["sent_per_s", "sent/s"]], 1);
    plot("Output tokens per second", "tokens/s", [["output_tokens_per_s", "output tokens/s"]], 1);
    plot("Time to first token", "ms", [["ttft_p50_s", "TTFT p50"], ["ttft_p99_s", "TTFT p99"]], 1000);
    plot("Inter-token latency and time per output token", "ms", [["itl_p50_s", "ITL p50"],
      ["itl_p99_s", "ITL p99"], ["tpot_p50_s", "TPOT p50"], ["tpot_p99_s", "TPOT p99"]], 1000);
    plot("End to end", "ms", [["e2e_p50_s", "e2e p50"], ["e2e_p99_s", "e2e p99"]], 1000);
    plot("Errors and throttling", "%", [["error_rate", "errors"],
      ["throttled_rate", "throttled"]], 100);
  }

  k.pages.sweep = sweepPage;
})(pyattackerKit);
