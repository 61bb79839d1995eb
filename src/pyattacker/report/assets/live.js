/* The live page of `pyattacker attack --serve`: polls /progress.json every second and
   redraws its charts. Builds the DOM with textContent only: no value is ever HTML. */
(function () {
  "use strict";
  var CHARTS = [
    { id: "rate", title: "Finished requests per second", unit: "req/s",
      series: [["rate", "finished/s"]] },
    { id: "in_flight", title: "In flight", unit: "requests", series: [["in_flight", "in flight"]] },
    { id: "latency", title: "Latency so far, both clocks (ms)", unit: "ms", series: [
      ["latency_p50", "p50 scheduled"], ["latency_p99", "p99 scheduled"],
      ["service_p50", "p50 sent"], ["service_p99", "p99 sent"]] },
    { id: "errors", title: "Failed, throttled and dropped requests (cumulative)", unit: "requests",
      series: [["failed", "failed"], ["throttled", "throttled"], ["dropped", "dropped"]] },
    { id: "ttft", title: "Time to first token so far (ms)", unit: "ms", llm: true,
      series: [["ttft_p50", "p50"], ["ttft_p99", "p99"]] },
  ];
  var COLORS = ["#2f6fdf", "#d9480f", "#2b8a3e", "#9c36b5"];
  var MS = { latency_p50: 1, latency_p99: 1, service_p50: 1, service_p99: 1, ttft_p50: 1,
    ttft_p99: 1 };
  var plots = {};

  function el(parent, tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    parent.appendChild(node);
    return node;
  }

  function column(cols, name) {
    if (name === "rate") {
      var t = cols.elapsed, c = cols.completed;
      return t.map(function (x, i) {
        return i === 0 ? (x > 0 ? c[0] / x : null) : (c[i] - c[i - 1]) / ((x - t[i - 1]) || 1);
      });
    }
    var values = cols[name] || [];
    return MS[name] ? values.map(function (v) { return v === null ? null : v * 1000; }) : values;
  }

  function draw(spec, cols) {
    var data = [cols.elapsed].concat(spec.series.map(function (s) { return column(cols, s[0]); }));
    if (plots[spec.id]) { plots[spec.id].setData(data); return; }
    var box = el(document.getElementById("charts"), "figure", "chart");
    box.dataset.chart = spec.title;
    var opts = {
      title: spec.title, width: 540, height: 240,
      scales: { x: { time: false } },
      axes: [{ label: "seconds since the start" }, { label: spec.unit }],
      series: [{ label: "s" }].concat(spec.series.map(function (s, i) {
        return { label: s[1], stroke: COLORS[i % COLORS.length], width: 2, spanGaps: true };
      })),
    };
    plots[spec.id] = new uPlot(opts, data, box);
  }

  function tile(parent, label, value) {
    var t = el(parent, "div", "tile");
    el(t, "div", "label", label);
    el(t, "div", "value", value);
  }

  function last(values) { return values.length ? values[values.length - 1] : null; }

  function fmt(v, ms) {
    if (v === null || v === undefined) return "\u2013";
    return ms ? (v * 1000).toFixed(1) + " ms" : Math.round(v).toLocaleString("en-US");
  }

  // Every snapshot so far: each poll asks only for those after the last one it has.
  var cols = null;

  function append(fresh) {
    if (cols === null) { cols = fresh; return; }
    Object.keys(fresh).forEach(function (name) { cols[name] = cols[name].concat(fresh[name]); });
  }

  function render(data) {
    append(data.columns);
    var status = data.done ? "finished" + (data.stop_reason ? " (" + data.stop_reason + ")" : "")
      : "running";
    document.getElementById("status").textContent = "Attack " + status + ", " +
      fmt(last(cols.elapsed) || 0) + " s in; " + data.requests.toLocaleString("en-US") +
      " requests finished.";
    document.getElementById("targets").textContent = "Targets: " + data.targets.join(", ");
    var tiles = document.getElementById("tiles");
    tiles.textContent = "";
    tile(tiles, "finished", fmt(data.requests));
    tile(tiles, "in flight", fmt(last(cols.in_flight)));
    tile(tiles, "failed", fmt(last(cols.failed)));
    tile(tiles, "p99 latency (scheduled)", fmt(last(cols.latency_p99), true));
    tile(tiles, "p99 service time (sent)", fmt(last(cols.service_p99), true));
    if (!cols.elapsed.length) return;
    CHARTS.forEach(function (spec) { if (!spec.llm || data.llm) draw(spec, cols); });
    document.body.dataset.rendered = "true";
    if (data.done) document.body.dataset.done = "true";
  }

  function poll() {
    var since = cols && cols.elapsed.length ? "?since=" + last(cols.elapsed) : "";
    fetch("/progress.json" + since, { cache: "no-store" })
      .then(function (r) { return r.json(); })
      .then(function (data) { render(data); if (!data.done) setTimeout(poll, 1000); })
      .catch(function () {
        document.getElementById("status").textContent =
          "The attack's server has stopped: these are its last figures.";
      });
  }
  poll();
})();
