// Zoom, pan, search, hover card and details for the engine drawing. No network, no libraries.
(function () {
  "use strict";
  window.addEventListener("error", function (event) {
    document.body.setAttribute("data-error", String(event.message));
  });
  var svg = document.querySelector("#canvas svg");
  var canvas = document.getElementById("canvas");
  var baseWidth = parseFloat(svg.getAttribute("width"));
  var baseHeight = parseFloat(svg.getAttribute("height"));
  var legend = parseFloat(svg.getAttribute("data-legend") || "0");
  var zoomLevel = document.getElementById("zoom-level");
  var scale = 1;

  // Keep the drawing point under (clientX, clientY) in place while the scale changes.
  function setScale(next, clientX, clientY) {
    next = Math.max(0.03, Math.min(4, next));
    var rect = canvas.getBoundingClientRect();
    var px = clientX === undefined ? canvas.clientWidth / 2 : clientX - rect.left;
    var py = clientY === undefined ? canvas.clientHeight / 2 : clientY - rect.top;
    var sx = (canvas.scrollLeft + px) / scale;
    var sy = (canvas.scrollTop + py) / scale;
    scale = next;
    svg.setAttribute("width", String(baseWidth * scale));
    svg.setAttribute("height", String(baseHeight * scale));
    canvas.scrollLeft = sx * scale - px;
    canvas.scrollTop = sy * scale - py;
    zoomLevel.textContent = Math.round(scale * 100) + "%";
    svg.classList.toggle("overview", scale < 0.45);
  }
  function fitAll() {
    setScale(Math.min((canvas.clientWidth - 4) / baseWidth, (canvas.clientHeight - 4) / baseHeight));
    canvas.scrollLeft = 0;
    canvas.scrollTop = 0;
  }
  document.getElementById("zoom-in").addEventListener("click", function () { setScale(scale * 1.25); });
  document.getElementById("zoom-out").addEventListener("click", function () { setScale(scale / 1.25); });
  document.getElementById("fit").addEventListener("click", fitAll);
  document.getElementById("actual").addEventListener("click", function () { setScale(1); });
  canvas.addEventListener("wheel", function (event) {
    if (!event.ctrlKey && !event.metaKey) { return; }
    event.preventDefault();
    setScale(scale * Math.exp(-event.deltaY * 0.0015), event.clientX, event.clientY);
  }, { passive: false });

  var drag = null;
  var dragged = false;
  canvas.addEventListener("mousedown", function (event) {
    if (event.button !== 0) { return; }
    drag = { x: event.clientX, y: event.clientY, left: canvas.scrollLeft, top: canvas.scrollTop };
    dragged = false;
  });
  window.addEventListener("mousemove", function (event) {
    if (!drag) { return; }
    var dx = event.clientX - drag.x, dy = event.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 4) { dragged = true; canvas.classList.add("panning"); }
    canvas.scrollLeft = drag.left - dx;
    canvas.scrollTop = drag.top - dy;
  });
  window.addEventListener("mouseup", function () { drag = null; canvas.classList.remove("panning"); });

  var layers = Array.prototype.slice.call(svg.querySelectorAll("g.layer"));
  var byId = {};
  var full = new Map();
  layers.forEach(function (g) {
    // The hover card replaces the browser's slow tooltip; the text also feeds search.
    var title = g.querySelector("title");
    full.set(g, title ? title.textContent : g.getAttribute("data-name"));
    if (title) { title.remove(); }
    byId[g.id] = g;
  });

  var body = document.getElementById("detail-body");
  var selected = null;
  function show(g) {
    if (selected) { selected.classList.remove("selected"); }
    selected = g;
    g.classList.add("selected");
    var pre = document.createElement("pre");
    pre.textContent = full.get(g);
    body.replaceChildren(pre);
  }
  function focus(g) {
    if (scale < 0.5) { setScale(1); }
    var cx = parseFloat(g.getAttribute("data-cx"));
    var cy = parseFloat(g.getAttribute("data-cy")) + legend;
    canvas.scrollLeft = cx * scale - canvas.clientWidth / 2;
    canvas.scrollTop = cy * scale - canvas.clientHeight / 2;
  }

  var card = document.createElement("div");
  card.id = "hovercard";
  document.body.appendChild(card);
  layers.forEach(function (g) {
    g.addEventListener("click", function () { if (!dragged) { show(g); } });
    g.addEventListener("mouseenter", function () {
      var lines = full.get(g).split("\n");
      card.textContent = lines.slice(0, 4).join("\n");
      card.style.display = "block";
    });
    g.addEventListener("mousemove", function (event) {
      var x = Math.min(event.clientX + 14, window.innerWidth - card.offsetWidth - 8);
      card.style.left = x + "px";
      card.style.top = (event.clientY + 16) + "px";
    });
    g.addEventListener("mouseleave", function () { card.style.display = "none"; });
  });

  Array.prototype.forEach.call(document.querySelectorAll("#slowest li"), function (item) {
    item.addEventListener("click", function () {
      var g = byId[item.getAttribute("data-layer")];
      if (g) { focus(g); show(g); }
    });
  });

  var hits = document.getElementById("hits");
  var search = document.getElementById("search");
  var found = [];
  var current = -1;
  function jump() {
    if (!found.length) { return; }
    current = (current + 1) % found.length;
    focus(found[current]);
    hits.textContent = (current + 1) + "/" + found.length + " found";
  }
  search.addEventListener("input", function () {
    var needle = search.value.trim().toLowerCase();
    found = [];
    current = -1;
    layers.forEach(function (g) {
      var hit = needle.length > 0 && full.get(g).toLowerCase().indexOf(needle) >= 0;
      g.classList.toggle("hit", hit);
      if (hit) { found.push(g); }
    });
    hits.textContent = needle ? found.length + " found" : "";
    jump();
  });
  search.addEventListener("keydown", function (event) {
    if (event.key === "Enter") { event.preventDefault(); jump(); }
  });
  // Links can open the overview (#fit) or a search (#find=Conv_42).
  var hash = decodeURIComponent(window.location.hash.slice(1));
  if (hash === "fit") { fitAll(); }
  if (hash.indexOf("find=") === 0) {
    search.value = hash.slice(5);
    search.dispatchEvent(new Event("input"));
  }
  document.body.setAttribute("data-ready", svg.getAttribute("data-layers") || String(layers.length));
})();
