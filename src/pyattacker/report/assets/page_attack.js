/* pyattacker HTML reports, part 2 of 5: the attack page (HTTP and LLM). */
(function (k) {
  "use strict";
  var R = k.R, X = k.X, root = k.root, F = k.F, QS = k.QS;
  var el = k.el, add = k.add, get = k.get, value = k.value, section = k.section;
  var note = k.note, table = k.table, tiles = k.tiles, kv = k.kv, chart = k.chart;
  var hdr = k.hdr, distTable = k.distTable, countsTable = k.countsTable, seconds = k.seconds;
  var windowsX = k.windowsX, perSecond = k.perSecond, payload = k.payload;

  // ------------------------------------------------------------------------ attack page

  function attackPage() {
    R = k.R; X = k.X; payload = k.payload;  // the live page loads a new one before each draw
    var plan = R.plan, s = R.summary, llm = R.llm;
    add(root, "h1", "", payload.title);
    var load = plan.load;
    var what = load.model === "open"
      ? "open model: " + load.arrival + " arrivals at " + load.rate + "/s" +
        (load.stages.length ? " then stages " + JSON.stringify(load.stages) : "")
      : "closed model: " + load.clients + " clients, think " + load.think_time + " s";
    add(root, "p", "sub", plan.method + " " + plan.targets.join(", ") + " · " + what +
      " · retry " + plan.retry + " · started " + R.started_at);
    lead();
    warnings();
    // With a scenario the plan's rate counts flows and the achieved one requests (steps).
    var flows = !!R.flows;
    tiles(root, [
      ["requests sent", ["summary", "sent"], F.int],
      [flows ? "achieved rate (requests)" : "achieved rate", ["summary", "achieved_rate"], F.rate],
      [flows ? "planned rate (flows)" : "planned rate", ["summary", "planned_rate"], F.rate],
      ["ok", ["total", "outcomes", "ok"], F.count],
      ["failed", ["total", "outcomes", "failed"], F.count],
      ["throttled (ended)", ["total", "outcomes", "throttled"], F.count],
      ["p50 latency (scheduled)", ["total", "latency_s", "scheduled", "p50"], F.ms],
      ["p99 latency (scheduled)", ["total", "latency_s", "scheduled", "p99"], F.ms],
    ]);
    gateSection();
    latencySection();
    timeSection();
    outcomesSection();
    targetsSection();
    namesSection();
    flowsSection();
    if (llm) llmSection(llm);
    errorsSection();
    planSection();
  }

  // The headline an LLM report leads with, and what a warmup left out (report/_lead.py).
  function lead() {
    if (R.headline) {
      var h = add(root, "div", "headline");
      h.setAttribute("data-headline", "");
      tiles(h, [
        ["output tokens/s", ["headline", "output_tokens_per_s"], F.num],
        ["requests/s (OK)", ["headline", "requests_per_s"], F.num],
        ["TTFT p50 (scheduled)", ["headline", "ttft_p50_s"], F.ms],
        ["TTFT p99 (scheduled)", ["headline", "ttft_p99_s"], F.ms],
        ["ITL p50", ["headline", "itl_p50_s"], F.ms],
        ["ITL p99", ["headline", "itl_p99_s"], F.ms],
      ]);
    }
    var w = R.warmup;
    if (w) {
      var n = note(root, "Warmup: " + w.scheduled + " requests in " + (w.seconds !== null
        ? "the first " + w.seconds + " s" : "the first " + w.skipped_s.toFixed(2) + " s") +
        ", excluded from every figure on this page; it sent " + w.sent_attempts +
        " attempts for " + w.sent + " requests.");
      n.setAttribute("data-warmup", "");
    }
    var ws = R.workers;
    if (ws) {
      var ms = function (v) { return (v >= 0 ? "+" : "") + (v * 1000).toFixed(3) + "ms"; };
      var text = "Workers: " + ws.count + (ws.on_ray ? " on Ray" : " processes on this machine") +
        ", their figures merged";
      if (ws.clock_offset_min_s !== undefined) {
        text += "; clock offsets from this machine " + ms(ws.clock_offset_min_s) +
          (ws.clock_offset_max_s === ws.clock_offset_min_s ? "" : " to " + ms(ws.clock_offset_max_s)) +
          ", each within ±" + (ws.clock_uncertainty_s * 1000).toFixed(3) +
          "ms: the common start instant is no more exact than that";
      }
      if (ws.lost.length) text += "; lost: worker " + ws.lost.join(", ");
      note(root, text + ".").setAttribute("data-workers", "");
    }
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

  // A threshold's value is a share, a rate, or else a duration in seconds.
  function unitOf(r) {
    if (["error_rate", "throttled_rate", "goodput"].indexOf(r.figure) >= 0) return F.pct;
    if (["rate", "tokens_per_s", "goodput_rate"].indexOf(r.figure) >= 0) return F.rate;
    return F.ms;
  }

  // Thresholds (--threshold) and goodput (--goodput), when the attack declared them.
  function gateSection() {
    var th = R.thresholds, gp = R.goodput;
    if (th) {
      section("Thresholds", th.passed ? "Every threshold passed." :
        "A threshold failed: the attack exits " + th.exit_code_on_breach + ".");
      table(root, ["threshold", "measured", "verdict", "judged live"],
        th.results.map(function (r, i) {
          return [r.threshold, value("td", ["thresholds", "results", i, "value"], unitOf(r)),
            r.passed ? "pass" : "FAIL", r.live ? "yes" : "no"];
        }), function (i) { return th.results[i].passed ? "" : "fail"; });
      if (th.aborted) {
        note(root, "Aborted by --abort-on-fail at " + seconds(th.aborted.elapsed_s) + ": " +
          th.aborted.threshold + "; the figures cover what ran.");
      }
    }
    if (gp) {
      section("Goodput", "Requests that met every per-request SLO: " + gp.slos.join(", ") + ".");
      tiles(root, [
        ["good requests", ["goodput", "good"], F.count],
        ["of requests", ["goodput", "requests"], F.count],
        ["goodput share", ["goodput", "share"], F.pct],
        ["goodput rate", ["goodput", "rate_per_s"], F.rate],
      ]);
    }
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
        "was due in)." });
    p99ByKey(grid, x, ws, R.target_windows, "target", "Each target's requests by the " +
      "window they ended in; arrivals and drops belong to no target (one is chosen when a " +
      "request leases it).");
    p99ByKey(grid, x, ws, R.name_windows, "request name", "Each named request by the " +
      "window it ended in (dropped arrivals are in no name's line).");
    var codes = {};
    ws.forEach(function (w) { Object.keys(w.statuses || {}).forEach(function (c) { codes[c] = 1; }); });
    var sorted = Object.keys(codes).sort();
    if (sorted.length) {
      chart({ parent: grid, title: "Status codes over time", x: x,
        xLabel: "time since start (s)", yLabel: "requests per window",
        series: sorted.map(function (c) {
          return { label: c, values: ws.map(function (w) { return (w.statuses || {})[c] || 0; }) };
        }), caption: "Requests by their last HTTP status, in the window each ended in." });
    }
  }

  // p99 latency over time, one line per key of `windowsByKey` (targets, request names).
  function p99ByKey(grid, x, ws, windowsByKey, label, caption) {
    var tw = windowsByKey || {}, keys = Object.keys(tw);
    if (!keys.length) return;
    chart({ parent: grid, title: "p99 latency over time by " + label + " (scheduled clock)",
      x: x, xLabel: "time since start (s)", yLabel: "latency (ms)",
      series: keys.map(function (t) {
        return { label: t, values: ws.map(function (w, i) {
          var mine = tw[t][i];
          return mine && mine.latency.count ? mine.latency.p99 * 1000 : null;
        }) };
      }), caption: caption });
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
    breakdownTable("targets", "target");
    if (names.length > 1) note(root, "Each target's latency by percentile and its p99 over " +
      "time are charted above, one line per target.");
  }

  function namesSection() {
    var names = Object.keys(R.names || {});
    if (!names.length) return;
    section("Per request name", names.length + " name(s): each named request (a line of " +
      "the targets file, a step of a scenario) counted on its own.");
    breakdownTable("names", "name");
  }

  // A scenario's flows: how each ended, and the completed ones' duration (scheduled clock).
  function flowsSection() {
    if (!R.flows) return;
    section("Flows", "Scenario " + R.flows.scenario + ": each arrival ran one flow; each " +
      "step is a request, in the per-name rows above. A failed step ends its flow.");
    tiles(root, [
      ["flows scheduled", ["flows", "scheduled"], F.int],
      ["completed", ["flows", "completed"], F.int],
      ["failed", ["flows", "failed"], F.count],
      ["cancelled", ["flows", "cancelled"], F.count],
      ["dropped", ["flows", "dropped"], F.count],
      ["p50 duration (scheduled)", ["flows", "duration_s", "p50"], F.ms],
      ["p99 duration (scheduled)", ["flows", "duration_s", "p99"], F.ms],
    ]);
    countsTable(root, "Failed flows, by the step that ended them", ["flows", "failed_by_step"]);
  }

  // One row per key of R[key] (a target, a request name): counts, latency, status codes.
  function breakdownTable(key, label) {
    var keys = Object.keys(R[key]);
    table(root, [label, "requests", "ok", "failed", "throttled", "p50 sched (ms)",
      "p99 sched (ms)", "p50 sent (ms)", "p99 sent (ms)", "status codes"],
      keys.map(function (t) {
        var p = [key, t];
        var codes = R[key][t].status;
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
    if (llm.retry_after_s) {
      distTable(root, [{ label: "Retry-After asked", clock: "of throttled attempts",
        path: ["llm", "retry_after_s"] }], true);
    } else {
      note(root, "No throttled attempt carried a Retry-After header.");
    }
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
        "the scheduled clock." });
    chart({ parent: grid, title: "ITL and TPOT over time", x: x,
      xLabel: "time since start (s)", yLabel: "time (ms)", series: [
        { label: "ITL mean", values: q("itl_s", "mean") },
        { label: "ITL p95", values: q("itl_s", "p95") },
        { label: "TPOT mean", values: q("tpot_s", "mean"), dash: [6, 4] },
        { label: "TPOT p95", values: q("tpot_s", "p95"), dash: [6, 4] },
      ], caption: "Inter-token gaps and time per output token of the streams that ended " +
        "OK in each window." });
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


  k.pages.attack = attackPage;
})(pyattackerKit);
