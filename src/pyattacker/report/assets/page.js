/* pyattacker HTML reports: draws the page from the JSON in #report-data.
 *
 * Every value shown in a table or tile is a value of the embedded report; its cell carries
 * data-path (the keys leading to it, as JSON), data-value (the raw value) and data-scale
 * (the factor applied before display: 1000 for milliseconds), so a test can check the
 * page against the JSON report. Text goes in through textContent only: no report value is
 * ever parsed as HTML. The page loads nothing: uPlot is inlined before this script.
 */
(function () {
  "use strict";

  var payload = JSON.parse(document.getElementById("report-data").textContent);
  var R = payload.report;
  var X = payload.extra;
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
  //     xSplits, xValues, points, parent, height}
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
      if (s.pointsOnly) spec.paths = function () { return null; };
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
    new uPlot(opts, data, box);
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

  // ------------------------------------------------------------------------ attack page

  function attackPage() {
    var plan = R.plan, s = R.summary, llm = R.llm;
    add(root, "h1", "", payload.title);
    var load = plan.load;
    var what = load.model === "open"
      ? "open model: " + load.arrival + " arrivals at " + load.rate + "/s" +
        (load.stages.length ? " then stages " + JSON.stringify(load.stages) : "")
      : "closed model: " + load.clients + " clients, think " + load.think_time + " s";
    add(root, "p", "sub", plan.method + " " + plan.targets.join(", ") + " · " + what +
      " · retry " + plan.retry + " · started " + R.started_at);
    warnings();
    tiles(root, [
      ["requests sent", ["summary", "sent"], F.int],
      ["achieved rate", ["summary", "achieved_rate"], F.rate],
      ["planned rate", ["summary", "planned_rate"], F.rate],
      ["ok", ["total", "outcomes", "ok"], F.count],
      ["failed", ["total", "outcomes", "failed"], F.count],
      ["throttled (ended)", ["total", "outcomes", "throttled"], F.count],
      ["p50 latency (scheduled)", ["total", "latency_s", "scheduled", "p50"], F.ms],
      ["p99 latency (scheduled)", ["total", "latency_s", "scheduled", "p99"], F.ms],
    ]);
    latencySection();
    timeSection();
    outcomesSection();
    targetsSection();
    if (llm) llmSection(llm);
    errorsSection();
    planSection();
  }

  function warnings() {
    section("Warnings", "What a careful reader would notice first, in words.");
    if (!X.warnings.length) {
      add(root, "p", "ok", "No warnings: the generator kept to its schedule, nothing was " +
        "dropped, and every request succeeded.");
      return;
    }
    var ul = add(root, "ul", "warnings");
    X.warnings.forEach(function (w) { add(ul, "li", "warning", w); });
  }

  function latencySection() {
    section("Latency", "Two clocks: scheduled counts from when the load model meant the " +
      "request to start (what a user would see; a generator that falls behind cannot hide " +
      "it), sent from when it actually left (service time).");
    distTable(root, [
      { label: "all requests", clock: "scheduled", path: ["total", "latency_s", "scheduled"] },
      { label: "all requests", clock: "sent", path: ["total", "latency_s", "sent"] },
      { label: "ok requests only", clock: "scheduled", path: ["total", "latency_ok_s"] },
      { label: "dispatch delay", clock: "scheduled→sent", path: ["total", "dispatch_delay_s"] },
      { label: "first byte", clock: "sent", path: ["total", "ttfb_s"] },
    ]);
    var dists = [
      { label: "all, scheduled clock", dist: R.total.latency_s.scheduled },
      { label: "all, sent clock", dist: R.total.latency_s.sent, dash: [6, 4] },
    ];
    var targets = Object.keys(R.targets);
    if (targets.length > 1) {
      targets.forEach(function (t) {
        dists.push({ label: t + " (scheduled)", dist: R.targets[t].latency_s.scheduled,
          dash: [2, 3] });
      });
    }
    hdr(root, "Latency by percentile (HDR style)", dists, "latency (ms, log scale)");
  }

  function windowsX(windows) { return windows.map(function (w) { return w.start; }); }
  function perSecond(windows, key) {
    return windows.map(function (w) { return w.width ? w[key] / w.width : null; });
  }

  function timeSection() {
    var ws = R.windows;
    section("Over time", "One point per " + seconds(R.plan.window_s) + " window, at its start.");
    if (!ws.length) { note(root, "No windows: nothing was scheduled."); return; }
    var x = windowsX(ws);
    var grid = add(root, "div", "grid");
    function pct(key, q) { return ws.map(function (w) { return w[key].count ? w[key][q] * 1000 : null; }); }
    chart({ parent: grid, title: "Latency percentiles over time, both clocks", x: x,
      xLabel: "time since start (s)", yLabel: "latency (ms)", series: [
        { label: "p50 scheduled", values: pct("latency", "p50") },
        { label: "p99 scheduled", values: pct("latency", "p99") },
        { label: "p50 sent", values: pct("service_time", "p50"), dash: [6, 4] },
        { label: "p99 sent", values: pct("service_time", "p99"), dash: [6, 4] },
      ], caption: "When the scheduled lines rise above the sent ones, requests waited to be " +
        "sent: the generator (or the connection pool) fell behind." });
    chart({ parent: grid, title: "Offered vs achieved rate", x: x,
      xLabel: "time since start (s)", yLabel: "requests per second", series: [
        { label: "offered (scheduled)", values: perSecond(ws, "scheduled") },
        { label: "achieved (sent)", values: perSecond(ws, "sent"), dash: [6, 4] },
        { label: "completed", values: perSecond(ws, "completed") },
      ] });
    chart({ parent: grid, title: "Requests in flight", x: x, xLabel: "time since start (s)",
      yLabel: "requests in progress (max in window)", series: [
        { label: "max in flight", values: ws.map(function (w) { return w.max_in_flight; }) },
      ] });
    chart({ parent: grid, title: "Outcomes and errors over time", x: x,
      xLabel: "time since start (s)", yLabel: "requests per window", series: [
        { label: "ok", values: ws.map(function (w) { return w.ok; }) },
        { label: "failed", values: ws.map(function (w) { return w.failed; }) },
        { label: "throttled (ended)", values: ws.map(function (w) { return w.throttled; }) },
        { label: "dropped", values: ws.map(function (w) { return w.dropped; }) },
        { label: "cancelled", values: ws.map(function (w) { return w.cancelled; }) },
      ], caption: "Each request counts in the window it ended in (dropped: the window it " +
        "was due in). Status codes are reported for the whole attack, below." });
  }

  function outcomesSection() {
    section("Outcomes, status codes and attempts", "How requests ended, over the whole attack.");
    var grid = add(root, "div", "grid");
    var cols = [add(grid, "div"), add(grid, "div"), add(grid, "div")];
    countsTable(cols[0], "Outcomes", ["total", "outcomes"]);
    countsTable(cols[1], "Status codes", ["total", "status"]);
    countsTable(cols[2], "Error classes", ["total", "error_classes"]);
    countsTable(cols[0], "Attempts per request (attempts: requests)", ["total", "attempts_per_request"]);
    countsTable(cols[1], "Retry decisions", ["retry_decisions"]);
    tiles(cols[2], [
      ["attempts", ["total", "attempts"], F.int],
      ["throttled at least once", ["total", "throttled_requests"], F.int],
      ["throttled attempts", ["total", "throttled_attempts"], F.int],
    ]);
  }

  function targetsSection() {
    var names = Object.keys(R.targets);
    section("Per target", names.length + " target(s); each URL and key is one target.");
    table(root, ["target", "requests", "ok", "failed", "throttled", "p50 sched (ms)",
      "p99 sched (ms)", "p50 sent (ms)", "p99 sent (ms)", "status codes"],
      names.map(function (t) {
        var p = ["targets", t];
        var codes = R.targets[t].status;
        return [t, value("td", p.concat(["requests"]), F.int),
          value("td", p.concat(["outcomes", "ok"]), F.count),
          value("td", p.concat(["outcomes", "failed"]), F.count),
          value("td", p.concat(["outcomes", "throttled"]), F.count),
          value("td", p.concat(["latency_s", "scheduled", "p50"]), F.ms),
          value("td", p.concat(["latency_s", "scheduled", "p99"]), F.ms),
          value("td", p.concat(["latency_s", "sent", "p50"]), F.ms),
          value("td", p.concat(["latency_s", "sent", "p99"]), F.ms),
          Object.keys(codes).map(function (c) { return c + ": " + codes[c]; }).join(", ")];
      }));
    if (names.length > 1) note(root, "The report has no per-target time series; the latency " +
      "by percentile chart above has one line per target.");
  }

  function llmSection(llm) {
    section("LLM", "Time to first token (TTFT), inter-token latency (ITL), time per output " +
      "token (TPOT) and end to end, as the server streamed them. TTFT, ITL and TPOT need a " +
      "stream.");
    var p = ["llm"];
    distTable(root, [
      { label: "time to first token", clock: "sent", path: ["llm", "ttft_s", "sent"] },
      { label: "time to first token", clock: "scheduled", path: ["llm", "ttft_s", "scheduled"] },
      { label: "inter-token latency", clock: "chunk gaps", path: ["llm", "itl_s"] },
      { label: "time per output token", clock: "first→end", path: ["llm", "tpot_s"] },
      { label: "end to end", clock: "sent", path: ["llm", "e2e_s", "sent"] },
      { label: "end to end", clock: "scheduled", path: ["llm", "e2e_s", "scheduled"] },
    ], true);
    var grid = add(root, "div", "grid");
    hdr(grid, "TTFT and end to end by percentile", [
      { label: "TTFT (sent)", dist: llm.ttft_s.sent },
      { label: "TTFT (scheduled)", dist: llm.ttft_s.scheduled, dash: [6, 4] },
      { label: "e2e (sent)", dist: llm.e2e_s.sent },
      { label: "e2e (scheduled)", dist: llm.e2e_s.scheduled, dash: [6, 4] },
    ], "latency (ms, log scale)");
    hdr(grid, "ITL and TPOT by percentile", [
      { label: "inter-token latency", dist: llm.itl_s },
      { label: "time per output token", dist: llm.tpot_s },
    ], "time (ms, log scale)");
    tiles(root, [
      ["prompt tokens", p.concat(["tokens", "prompt"]), F.int],
      ["completion tokens", p.concat(["tokens", "completion"]), F.int],
      ["OK answers per minute", p.concat(["per_minute", "ok_requests"]), F.perMin],
      ["prompt tokens per minute", p.concat(["per_minute", "prompt_tokens"]), F.perMin],
      ["completion tokens per minute", p.concat(["per_minute", "completion_tokens"]), F.perMin],
      ["throttled requests", p.concat(["throttled_requests"]), F.int],
      ["throttled attempts", p.concat(["throttled_attempts"]), F.int],
      ["attempts per request", p.concat(["attempts_per_request"]), F.num],
    ]);
    llmWindows(llm.windows);
  }

  function llmWindows(ws) {
    if (!ws.length) return;
    var x = windowsX(ws);
    var grid = add(root, "div", "grid");
    function q(key, name) { return ws.map(function (w) { return w[key].count ? w[key][name] * 1000 : null; }); }
    chart({ parent: grid, title: "TTFT and end to end over time", x: x,
      xLabel: "time since start (s)", yLabel: "latency (ms)", series: [
        { label: "TTFT mean (sent)", values: q("ttft_sent_s", "mean") },
        { label: "TTFT p95 (sent)", values: q("ttft_sent_s", "p95") },
        { label: "e2e mean (scheduled)", values: q("e2e_scheduled_s", "mean"), dash: [6, 4] },
        { label: "e2e p95 (scheduled)", values: q("e2e_scheduled_s", "p95"), dash: [6, 4] },
      ], caption: "The report's LLM windows carry TTFT on the sent clock and end to end on " +
        "the scheduled clock; ITL and TPOT are reported for the whole attack only." });
    chart({ parent: grid, title: "Tokens per second, in and out", x: x,
      xLabel: "time since start (s)", yLabel: "tokens per second", series: [
        { label: "in (prompt)", values: perSecond(ws, "prompt_tokens") },
        { label: "out (completion)", values: perSecond(ws, "completion_tokens") },
      ], caption: "Tokens of the requests that ended in each window, divided by its width." });
    chart({ parent: grid, title: "Throttling over time", x: x, xLabel: "time since start (s)",
      yLabel: "per window", series: [
        { label: "throttled attempts", values: ws.map(function (w) { return w.throttled_attempts; }) },
        { label: "requests ended throttled", values: ws.map(function (w) { return w.throttled; }) },
        { label: "failed", values: ws.map(function (w) { return w.failed; }) },
      ] });
    chart({ parent: grid, title: "Requests sent per minute", x: x,
      xLabel: "time since start (s)", yLabel: "requests per minute", series: [
        { label: "sent per minute", values: ws.map(function (w) { return w.rpm; }) },
      ], caption: "Over the part of each window in which requests were being sent; none " +
        "after the schedule ends. Requests in flight are charted above." });
  }

  function errorsSection() {
    section("Errors", "The most common kinds of error message (messages that differ only in " +
      "numbers and ids are grouped), one example each.");
    if (!R.errors.length) { note(root, "none"); return; }
    table(root, ["kind", "count", "example"], R.errors.map(function (e, i) {
      return [el("td", "long", e.key), value("td", ["errors", i, "count"], F.int),
        el("td", "long", e.example)];
    }));
  }

  function planSection() {
    section("The plan and the machine", "What was asked for, and where it ran (the machine " +
      "is the one that wrote this page).");
    var grid = add(root, "div", "grid");
    var left = add(grid, "div"), right = add(grid, "div");
    add(left, "h3", "", "Plan");
    kv(left, R.plan, ["plan"]);
    add(right, "h3", "", "Machine");
    kv(right, X.machine, ["extra", "machine"]);
    add(right, "h3", "", "Summary");
    kv(right, R.summary, ["summary"], ["loop_lag_s"]);
  }

  // ------------------------------------------------------------------------ run page

  function runPage() {
    add(root, "h1", "", payload.title);
    add(root, "p", "sub", "Store " + R.store + " · " + R.runs.length + " run(s)");
    tiles(root, [
      ["pipelines", ["pipelines", "total"], F.int],
      ["succeeded", ["pipelines", "by_state", "succeeded"], F.count],
      ["failed", ["pipelines", "by_state", "failed"], F.count],
      ["attempts", ["attempts", "total"], F.int],
      ["retries", ["attempts", "retries"], F.int],
      ["retry wait", ["attempts", "retry_wait_s"], F.s],
    ]);
    section("Runs");
    table(root, ["run", "state", "elapsed (s)", "stop reason", "rows read", "host"],
      R.runs.map(function (r, i) {
        return [r.run_id, r.state, value("td", ["runs", i, "elapsed_s"], F.s),
          r.stop_reason || "–", value("td", ["runs", i, "consumed", "rows_read"], F.int),
          r.host || "–"];
      }));
    runTimeline();
    runTasks();
    runResources();
    runErrors();
    runFailedItems();
  }

  function runTimeline() {
    var tl = X.timeline;
    section("Progress over time", tl.width_s ? "One point per " + seconds(tl.width_s) + " window, " +
      "from the first recorded attempt; each attempt counts in the window it ended in." : "");
    if (!tl.windows.length) { note(root, "No attempts recorded yet."); return; }
    var ws = tl.windows, x = ws.map(function (w) { return w.t; });
    var done = 0, failed = 0;
    var grid = add(root, "div", "grid");
    chart({ parent: grid, title: "Pipelines finished (cumulative)", x: x,
      xLabel: "time since first attempt (s)", yLabel: "pipelines", series: [
        { label: "succeeded", values: ws.map(function (w) { done += w.succeeded; return done; }) },
        { label: "failed", values: ws.map(function (w) { failed += w.pipelines_failed; return failed; }) },
      ] });
    chart({ parent: grid, title: "Attempts per window", x: x,
      xLabel: "time since first attempt (s)", yLabel: "attempts per window", series: [
        { label: "ok", values: ws.map(function (w) { return w.ok; }) },
        { label: "failed", values: ws.map(function (w) { return w.failed; }) },
        { label: "cancelled", values: ws.map(function (w) { return w.cancelled; }) },
        { label: "retries asked for", values: ws.map(function (w) { return w.retries; }), dash: [6, 4] },
      ] });
  }

  function runTasks() {
    section("Tasks", "Attempts and durations per task; a task's duration is one attempt's.");
    table(root, ["task", "succeeded", "failed", "interrupted", "attempts", "p50 (ms)",
      "p95 (ms)", "max (ms)"], Object.keys(R.tasks).map(function (t) {
      var p = ["tasks", t];
      return [t].concat(["succeeded", "failed", "interrupted", "attempts"].map(function (k) {
        return value("td", p.concat([k]), F.int);
      })).concat(["p50", "p95", "max"].map(function (k) {
        return value("td", p.concat(["duration_s", k]), F.ms);
      }));
    }));
    var grid = add(root, "div", "grid");
    var cols = [add(grid, "div"), add(grid, "div"), add(grid, "div")];
    countsTable(cols[0], "Attempts by outcome", ["attempts", "by_outcome"]);
    countsTable(cols[1], "Attempts by error class", ["attempts", "by_error_class"]);
    countsTable(cols[2], "Retry decisions", ["attempts", "decisions"]);
    add(root, "h3", "", "Retry delays the policy asked for");
    var d = X.retry_delays_s;
    if (!d.count) { note(root, "No retries."); return; }
    table(root, ["retries", "total (s)", "p50 (ms)", "p90 (ms)", "p99 (ms)", "max (ms)"], [[
      value("td", ["extra", "retry_delays_s", "count"], F.int),
      value("td", ["extra", "retry_delays_s", "sum"], F.s),
      value("td", ["extra", "retry_delays_s", "p50"], F.ms),
      value("td", ["extra", "retry_delays_s", "p90"], F.ms),
      value("td", ["extra", "retry_delays_s", "p99"], F.ms),
      value("td", ["extra", "retry_delays_s", "max"], F.ms)]]);
  }

  function runResources() {
    section("Resources", "Per pool/resource: attempts that leased it, and how the pacer " +
      "spaced its leases.");
    var res = R.attempts.by_resource || {};
    table(root, ["resource", "attempts", "ok", "failed", "cancelled", "throttled"],
      Object.keys(res).map(function (r) {
        return [r].concat(["attempts", "ok", "failed", "cancelled", "throttled"].map(function (k) {
          return value("td", ["attempts", "by_resource", r, k], F.int);
        }));
      }));
    var pacing = R.pacing || {};
    var names = Object.keys(pacing);
    add(root, "h3", "", "Pacing");
    if (!names.length) { note(root, "No resource declared a rate to keep to."); return; }
    table(root, ["resource", "leases", "paced", "paced for (s)", "rpm", "tpm", "rpd", "burst"],
      names.map(function (r) {
        var p = ["pacing", r];
        return [r, value("td", p.concat(["leases"]), F.int), value("td", p.concat(["paced"]), F.int),
          value("td", p.concat(["paced_s"]), F.s), value("td", p.concat(["rpm"]), F.int),
          value("td", p.concat(["tpm"]), F.int), value("td", p.concat(["rpd"]), F.int),
          value("td", p.concat(["burst"]), F.int)];
      }));
  }

  function runErrors() {
    section("Errors", R.errors_distinct + " distinct error message(s); the most frequent here.");
    if (!R.errors.length) { note(root, "none"); return; }
    table(root, ["class", "message", "count", "gave up", "tasks"], R.errors.map(function (e, i) {
      return [e.error_class, el("td", "long", e.message), value("td", ["errors", i, "count"], F.int),
        value("td", ["errors", i, "gave_up"], F.int), e.tasks.join(", ")];
    }));
  }

  function runFailedItems() {
    var f = X.failed_items;
    section("Failed items", f.count + " item(s) did not succeed" + (f.count > f.shown.length
      ? "; the first " + f.shown.length + " are listed (pyattacker export --rows results has all)."
      : "."));
    if (!f.shown.length) return;
    table(root, ["key", "state", "step", "class", "attempts", "error"], f.shown.map(function (r, i) {
      return [String(r.key), r.state, r.step || "–", r.error_class || "–",
        value("td", ["extra", "failed_items", "shown", i, "attempts"], F.int),
        el("td", "long", r.error || "–")];
    }));
  }

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
    section("Each metric with its spread and confidence intervals", "Mean, spread over the " +
      "seeds, and each challenger's paired difference from the leader with its 95% " +
      "confidence interval.");
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
    var headers = ["algorithm", "n", "mean", "min", "max", "stdev"];
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
    var row = [a].concat(["n", "mean", "min", "max", "stdev"].map(function (k) {
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
      series.push({ label: "run " + (i + 1), pointsOnly: true, points: true, size: 6,
        values: algs.map(function (a) { var v = agg[a].values || []; return i < v.length ? v[i] : null; }) });
    }
    // the mean last, as a large ring, so the runs' dots never hide it
    series.push({ label: "mean", values: algs.map(function (a) { return agg[a].mean; }),
      pointsOnly: true, points: true, size: 16, ring: true, color: "#1d2330" });
    chart({ title: m + " by algorithm", x: x, xLabel: "algorithm", xName: "algorithm",
      xSplits: x, xValues: function (v) { return algs[v] || ""; }, xRange: [-0.5, algs.length - 0.5],
      yLabel: meta.unit, series: series, height: 220,
      caption: "Rings: the mean over the seeds; dots: one run each (one per seed)." });
  }

  // ------------------------------------------------------------------------ dispatch

  var pages = { attack: attackPage, run: runPage, bench: benchPage };
  root.textContent = "";
  pages[payload.kind]();
  add(root, "footer", "", "Written by pyattacker " + payload.version + ". Every figure " +
    "here is a value of the JSON report embedded in this file (view the source).");
  document.body.setAttribute("data-rendered", "true");
})();
