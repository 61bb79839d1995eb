/* pyattacker HTML reports, the live part: the attack page of `attack --serve`.
 *
 * Fetches /report.json (the payload `attack --html` embeds, for what has been measured so
 * far) every 2 seconds and draws the whole attack page again from it with the kit: the
 * root is cleared and drawn anew, at the same scroll position. A status line on top says
 * whether the attack is live or finished. Text goes in through textContent only. Each
 * draw counts itself in body[data-draws]; the last sets body[data-done].
 */
(function (k) {
  "use strict";
  var EVERY_MS = 2000;
  var draws = 0;

  function status(text) {
    var line = document.getElementById("live-status");
    if (!line) {
      line = k.el("p", "sub", "");
      line.id = "live-status";
      var title = k.root.querySelector("h1");  // under the page's title
      k.root.insertBefore(line, title ? title.nextSibling : k.root.firstChild);
    }
    line.textContent = text;
  }

  function render(payload) {
    var x = window.scrollX, y = window.scrollY;
    k.load(payload);
    k.draw();
    var live = payload.live;
    status(live.done
      ? "finished" + (live.stop_reason ? " (" + live.stop_reason + ")" : "") +
        ": the attack's final figures."
      : "live \u2014 updated every 2 s");
    window.scrollTo(x, y);
    draws += 1;
    document.body.setAttribute("data-draws", String(draws));
    if (live.done) document.body.setAttribute("data-done", "true");
  }

  function poll() {
    fetch("/report.json", { cache: "no-store" })
      .then(function (r) {
        if (!r.ok) throw new Error("status " + r.status);
        return r.json();
      })
      .then(function (payload) {
        if (payload.report) render(payload);  // none until the attack has started
        if (!payload.live.done) setTimeout(poll, EVERY_MS);
      })
      .catch(function () {
        status("The attack's server has stopped: these are its last figures.");
      });
  }
  poll();
})(pyattackerKit);
