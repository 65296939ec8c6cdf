/* The console's one time format (issue #15): every <time class="omr-time"> shows the
   browser's local time with seconds (its age in the tooltip); "left" and "ago" ones
   count, with the local time in their tooltip.  The server writes these for every
   date-time the admin renders (gateway/ops/admin_display.py, the omr template filters).
   A chart whose figure is marked data-utc-times has its UTC "HH:MM" axis and tooltip
   times rewritten in local time once. */
(function () {
  function pad(n) { return (n < 10 ? "0" : "") + n; }
  function local(d) {
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " +
      pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
  }
  function span(seconds) {
    seconds = Math.max(0, Math.round(seconds));
    if (seconds < 60) return seconds + " s";
    var minutes = Math.floor(seconds / 60); seconds = seconds % 60;
    if (minutes < 60) return (seconds && minutes < 10) ? minutes + " min " + seconds + " s" : minutes + " min";
    var hours = Math.floor(minutes / 60); minutes = minutes % 60;
    if (hours < 48) return minutes ? hours + " h " + minutes + " min" : hours + " h";
    return Math.floor(hours / 24) + " d";
  }
  function render(root) {
    var now = Date.now();
    (root || document).querySelectorAll("time.omr-time").forEach(function (el) {
      var d = new Date(el.getAttribute("datetime"));
      if (isNaN(d)) return;
      var mode = el.dataset.mode, delta = (d.getTime() - now) / 1000;
      var age = delta <= 0 ? span(-delta) + " ago" : "in " + span(delta);
      if (mode === "left") el.textContent = delta > 0 ? span(delta) + " left" : "over";
      else if (mode === "ago") el.textContent = age;
      else el.textContent = local(d);
      el.title = mode === "abs" ? age : local(d);
    });
  }
  var UTC_TIME = /(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d)|\b(\d\d):(\d\d)\b/g;
  function localChartTimes(root) {
    var today = new Date();
    (root || document).querySelectorAll("figure[data-utc-times] svg text, figure[data-utc-times] svg title").forEach(function (el) {
      if (el.dataset && el.dataset.omrLocal) return;
      el.textContent = el.textContent.replace(UTC_TIME, function (all, y, mo, da, h, mi, sh, sm) {
        var d = y ? new Date(Date.UTC(+y, +mo - 1, +da, +h, +mi))
          : new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate(), +sh, +sm));
        var hm = pad(d.getHours()) + ":" + pad(d.getMinutes());
        return y ? local(d).slice(0, 11) + hm : hm;
      });
      if (el.dataset) el.dataset.omrLocal = "1";
    });
  }
  /* The theme's history page writes each action's time with the date filter (server
     time, UTC, in the format module's "Y-m-d H:i:s"): made a <time> like the rest. */
  var SERVER_TIME = /^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)$/;
  function serverTimes(root) {
    (root || document).querySelectorAll('[data-label="Date/time"]').forEach(function (cell) {
      var m = SERVER_TIME.exec(cell.textContent.trim());
      if (!m) return;
      var el = document.createElement("time");
      el.className = "omr-time"; el.dataset.mode = "abs";
      el.setAttribute("datetime", m[1] + "T" + m[2] + "Z");
      el.textContent = m[1] + " " + m[2] + " UTC";
      cell.textContent = ""; cell.appendChild(el);
    });
  }
  window.omrTimes = render;
  document.addEventListener("DOMContentLoaded", function () {
    serverTimes(document);
    localChartTimes(document);
    render(document);
    setInterval(function () { render(document); }, 1000);
  });
})();
