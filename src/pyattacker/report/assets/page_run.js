/* pyattacker HTML reports, part 3 of 5: the page of a run's store. */
(function (k) {
  "use strict";
  var R = k.R, X = k.X, root = k.root, F = k.F, QS = k.QS;
  var el = k.el, add = k.add, get = k.get, value = k.value, section = k.section;
  var note = k.note, table = k.table, tiles = k.tiles, kv = k.kv, chart = k.chart;
  var hdr = k.hdr, distTable = k.distTable, countsTable = k.countsTable, seconds = k.seconds;
  var windowsX = k.windowsX, perSecond = k.perSecond, payload = k.payload;

  // ------------------------------------------------------------------------ run page

  function runPage() {
    R = k.R; X = k.X; payload = k.payload;  // the live page loads a new one before each draw
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
        { label: "throttled (of failed)", values: ws.map(function (w) { return w.throttled || 0; }),
          dash: [2, 3] },
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
    errorsByTask();
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

  // failed attempts by task (rows) and error class (columns), from the store's attempts
  function errorsByTask() {
    var byTask = X.errors_by_task || {};
    var tasks = Object.keys(byTask);
    add(root, "h3", "", "Failed attempts by task and error class");
    if (!tasks.length) { note(root, "No attempt failed."); return; }
    var classes = [];
    tasks.forEach(function (t) {
      Object.keys(byTask[t]).forEach(function (c) { if (classes.indexOf(c) < 0) classes.push(c); });
    });
    table(root, ["task"].concat(classes), tasks.map(function (t) {
      return [t].concat(classes.map(function (c) {
        return value("td", ["extra", "errors_by_task", t, c], F.count);
      }));
    }));
  }

  function leasesChart() {
    var l = X.leases || { t: [] };
    var names = Object.keys(l.in_use || {});
    add(root, "h3", "", "Leases in use over time");
    if (!l.t.length) {
      note(root, "No lease counts recorded: a live run records each resource's leases at " +
        "its heartbeat (every second) when they change, so a run shorter than that has none.");
      return;
    }
    var tl = X.timeline, end = l.t[l.t.length - 1];
    if (tl.width_s) end = Math.max(end, tl.windows[tl.windows.length - 1].t + tl.width_s);
    chart({ title: "Leases in use per resource", x: l.t, xLabel: "time since first attempt (s)",
      xRange: [Math.min(0, l.t[0]), end],
      yLabel: "leases out", series: names.map(function (n) {
        var most = l.limit[n];
        return { label: n + (most !== undefined ? " (limit " + most + ")" : ""),
          values: l.in_use[n], stepped: true, points: true };
      }),
      caption: "As the run recorded them at its heartbeats, when they changed: each value " +
        "holds until the next point." });
  }

  function runResources() {
    section("Resources", "Per pool/resource: attempts that leased it, the leases it had out " +
      "over time, and how the pacer spaced its leases.");
    var res = R.attempts.by_resource || {};
    table(root, ["resource", "attempts", "ok", "failed", "cancelled", "throttled"],
      Object.keys(res).map(function (r) {
        return [r].concat(["attempts", "ok", "failed", "cancelled", "throttled"].map(function (k) {
          return value("td", ["attempts", "by_resource", r, k], F.int);
        }));
      }));
    leasesChart();
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


  k.pages.run = runPage;
})(pyattackerKit);
