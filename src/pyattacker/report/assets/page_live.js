/* pyattacker HTML reports, the live part: the page of `attack --serve` (an attack) and of
 * `pyattacker serve STORE` (a run).
 *
 * Fetches /report.json (the payload the report file embeds, for what has been measured or
 * recorded so far) every live.every_s seconds (2 unless the server says) and draws the
 * whole page again from it with the kit: the root is cleared and drawn anew, at the same
 * scroll position, with no reload. A status line on top says whether it is live or
 * finished; once finished, polling stops and the final figures stay. An error answer keeps
 * the last figures and asks again; a server gone stops the asking. Text goes in through
 * textContent only. Each draw counts itself in body[data-draws]; the last sets
 * body[data-done].
 */
(function (k) {
  "use strict";
  var draws = 0;
  var every = 2;
  var what = "the attack";

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
        ": " + what + "'s final figures."
      : "live \u2014 updated every " + every + " s");
    window.scrollTo(x, y);
    draws += 1;
    document.body.setAttribute("data-draws", String(draws));
    if (live.done) document.body.setAttribute("data-done", "true");
  }

  function poll() {
    fetch("/report.json", { cache: "no-store" })
      .then(function (r) {
        if (!r.ok) {  // the server is up but could not build it (a store busy or moved)
          status("The server answered " + r.status + "; these are the last figures it " +
            "gave. Asking again in " + every + " s.");
          setTimeout(poll, every * 1000);
          return null;
        }
        return r.json();
      })
      .then(function (payload) {
        if (payload === null) return;
        if (payload.live.every_s) every = payload.live.every_s;
        if (payload.kind === "run") what = "the run";
        if (payload.report) render(payload);  // none until the attack has started
        if (!payload.live.done) setTimeout(poll, every * 1000);
      })
      .catch(function () {
        status("The server has stopped answering: these are " + what + "'s last figures.");
      });
  }
  poll();
})(pyattackerKit);
