// beachd console: live figures. Listens to /ui/events (server-sent events)
// and falls back to polling /ui/pulse. Elements with data-live="key" show a
// figure; when the figures change, regions marked data-live-region are
// reloaded from the server, unless the operator is typing in a form.
(function () {
  "use strict";
  var version = null;
  var status = document.querySelector("[data-live-status]");

  function typing() {
    var a = document.activeElement;
    return a && (a.tagName === "INPUT" || a.tagName === "TEXTAREA" || a.tagName === "SELECT");
  }

  function refreshRegions() {
    var regions = document.querySelectorAll("[data-live-region]");
    if (!regions.length || typing()) { return; }
    fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html || typing()) { return; }
        var doc = new DOMParser().parseFromString(html, "text/html");
        regions.forEach(function (el) {
          var fresh = doc.querySelector('[data-live-region="' + el.getAttribute("data-live-region") + '"]');
          if (fresh) { el.innerHTML = fresh.innerHTML; }
        });
      })
      .catch(function () {});
  }

  function apply(p) {
    Object.keys(p).forEach(function (k) {
      document.querySelectorAll('[data-live="' + k + '"]').forEach(function (el) {
        el.textContent = String(p[k]);
      });
    });
    if (status) { status.textContent = "Live · updated " + new Date().toLocaleTimeString(); }
    if (version !== null && p.version !== version) { refreshRegions(); }
    version = p.version;
  }

  var polling = null;
  function poll() {
    if (polling) { return; }
    var tick = function () {
      fetch("/ui/pulse", { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (p) { if (p) { apply(p); } })
        .catch(function () {});
    };
    tick();
    polling = setInterval(tick, 5000);
  }

  if (!window.EventSource) { poll(); return; }
  var failures = 0;
  var es = new EventSource("/ui/events");
  es.addEventListener("pulse", function (e) {
    failures = 0;
    try { apply(JSON.parse(e.data)); } catch (err) { /* ignore a bad event */ }
  });
  es.onerror = function () {
    failures++;
    if (failures >= 3) { es.close(); poll(); }
  };
})();
