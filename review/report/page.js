// Hover and click details for the timeline. Everything a tooltip shows comes
// from the JSON in #data and is inserted as text, never as HTML.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("data").textContent);
  var svg = document.getElementById("timeline");
  var tip = document.getElementById("tip");
  var details = document.getElementById("details");
  var pinned = null;

  function fmtMS(ms) {
    if (ms < 0) return "unknown";
    if (ms < 1000) return ms + "ms";
    var s = ms / 1000;
    if (s < 60) return s.toFixed(1) + "s";
    var m = Math.floor(s / 60);
    if (m < 60) return m + "m" + String(Math.floor(s % 60)).padStart(2, "0") + "s";
    return Math.floor(m / 60) + "h" + String(m % 60).padStart(2, "0") + "m";
  }
  function fmtBytes(n) {
    if (n < 1024) return n + " B";
    var u = ["KiB", "MiB", "GiB", "TiB"], i = -1;
    do { n /= 1024; i++; } while (n >= 1024 && i < u.length - 1);
    return n.toFixed(1) + " " + u[i];
  }
  // A command row: [cmd_id, seq, status, exit_reason, run_ms, queue_ms, bytes, start, payload, error, trace]
  function barText(l, i) {
    var c = data.lanes[l].c[i];
    var t = c[0] + "  (seq " + c[1] + ", " + data.lanes[l].name + ")\n" +
      "status: " + c[2] + (c[3] ? "  exit_reason: " + c[3] : "") + "\n" +
      "run: " + fmtMS(c[4]) + "  queue wait: " + fmtMS(c[5]) + "  output: " + fmtBytes(c[6]) + "\n" +
      "start: " + c[7] + "\n" + "payload: " + c[8];
    if (c[9]) t += "\nerror: " + c[9];
    if (c[10]) t += "\ntrace: " + c[10];
    return t;
  }
  function textOf(el) {
    if (el.classList.contains("b")) return barText(+el.dataset.l, +el.dataset.i);
    if (el.classList.contains("bin")) return data.lanes[+el.dataset.l].bins[+el.dataset.b];
    var t = el.querySelector("title");
    return t ? t.textContent : "";
  }
  function target(e) {
    return e.target.closest ? e.target.closest(".b,.bin,.mk") : null;
  }
  svg.addEventListener("mousemove", function (e) {
    var el = target(e);
    if (!el) { tip.style.display = "none"; return; }
    tip.textContent = textOf(el);
    tip.style.display = "block";
    var x = e.clientX + 14, y = e.clientY + 14;
    if (x + tip.offsetWidth > window.innerWidth) x = Math.max(0, e.clientX - tip.offsetWidth - 14);
    if (y + tip.offsetHeight > window.innerHeight) y = Math.max(0, e.clientY - tip.offsetHeight - 14);
    tip.style.left = x + "px";
    tip.style.top = y + "px";
  });
  svg.addEventListener("mouseleave", function () { tip.style.display = "none"; });
  function pin(el) {
    if (pinned) pinned.classList.remove("hl");
    pinned = el;
    if (!el) { details.textContent = "Click a bar for its details."; return; }
    el.classList.add("hl");
    details.textContent = textOf(el);
  }
  svg.addEventListener("click", function (e) { pin(target(e)); });

  // Rows of the "longest" table point at their bars.
  var rows = document.querySelectorAll("table.longest tr[data-l]");
  for (var r = 0; r < rows.length; r++) {
    rows[r].addEventListener("click", function () {
      var l = this.dataset.l, id = this.dataset.id, lane = data.lanes[+l];
      if (!lane.c) { details.textContent = this.dataset.text; return; }
      for (var i = 0; i < lane.c.length; i++) {
        if (lane.c[i][0] === id) {
          var el = svg.querySelector('rect.b[data-l="' + l + '"][data-i="' + i + '"]');
          pin(el);
          if (el && el.scrollIntoView) el.scrollIntoView({ block: "nearest", inline: "center" });
          return;
        }
      }
    });
  }

  // Zoom: widen the drawing inside its scrolling box.
  var zoom = 1;
  function setZoom(z) {
    zoom = Math.min(Math.max(z, 1), 64);
    svg.style.width = (zoom * 100) + "%";
    document.getElementById("zoomlevel").textContent = "×" + zoom;
  }
  document.getElementById("zoomin").addEventListener("click", function () { setZoom(zoom * 2); });
  document.getElementById("zoomout").addEventListener("click", function () { setZoom(zoom / 2); });
  document.getElementById("zoomreset").addEventListener("click", function () { setZoom(1); });

  document.body.dataset.bars = String(svg.querySelectorAll("rect.b").length);
  document.body.dataset.ready = "1";
})();
