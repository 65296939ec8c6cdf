/* The console's one time format (issue #15): every <time class="omr-time"> shows the
   browser's local time with seconds; "left" and "ago" ones count, with the local time
   in their tooltip. */
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
      el.title = local(d);
      if (mode === "left") el.textContent = delta > 0 ? span(delta) + " left" : "over";
      else if (mode === "ago") el.textContent = delta <= 0 ? span(-delta) + " ago" : "in " + span(delta);
      else el.textContent = local(d);
    });
  }
  window.omrTimes = render;
  document.addEventListener("DOMContentLoaded", function () {
    render(document);
    setInterval(function () { render(document); }, 1000);
  });
})();
