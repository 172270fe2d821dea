// Zoom, search and a details panel for the engine drawing. No network, no libraries.
(function () {
  "use strict";
  window.addEventListener("error", function (event) {
    document.body.setAttribute("data-error", String(event.message));
  });
  var svg = document.querySelector("#canvas svg");
  var canvas = document.getElementById("canvas");
  var baseWidth = parseFloat(svg.getAttribute("width"));
  var baseHeight = parseFloat(svg.getAttribute("height"));
  var scale = 1;

  function applyScale(next) {
    scale = Math.max(0.05, Math.min(4, next));
    svg.setAttribute("width", String(baseWidth * scale));
    svg.setAttribute("height", String(baseHeight * scale));
  }
  document.getElementById("zoom-in").addEventListener("click", function () { applyScale(scale * 1.25); });
  document.getElementById("zoom-out").addEventListener("click", function () { applyScale(scale / 1.25); });
  document.getElementById("fit").addEventListener("click", function () {
    applyScale((canvas.clientWidth - 4) / baseWidth);
  });

  var details = document.getElementById("details");
  var layers = Array.prototype.slice.call(svg.querySelectorAll("g.layer"));
  layers.forEach(function (g) {
    g.addEventListener("click", function () {
      var title = g.querySelector("title");
      var pre = document.createElement("pre");
      pre.textContent = title ? title.textContent : g.getAttribute("data-name");
      details.replaceChildren(pre);
    });
  });

  var hits = document.getElementById("hits");
  document.getElementById("search").addEventListener("input", function (event) {
    var needle = event.target.value.trim().toLowerCase();
    var found = [];
    layers.forEach(function (g) {
      var title = g.querySelector("title");
      var text = (title ? title.textContent : "").toLowerCase();
      var hit = needle.length > 0 && text.indexOf(needle) >= 0;
      g.classList.toggle("hit", hit);
      if (hit) { found.push(g); }
    });
    hits.textContent = needle ? found.length + " found" : "";
    if (found.length) {
      var box = found[0].getBBox();
      canvas.scrollTo({ left: Math.max(0, box.x * scale - 40), top: Math.max(0, box.y * scale - 80) });
    }
  });
  document.body.setAttribute("data-ready", String(layers.length));
})();
