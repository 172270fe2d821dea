// Sorting, search, selection and the details panel of the compare report. No network, no libraries.
(function () {
  "use strict";
  window.addEventListener("error", function (event) {
    document.body.setAttribute("data-error", String(event.message));
  });
  var data = JSON.parse(document.getElementById("compare-data").textContent);
  var table = document.getElementById("nodes");
  var tbody = table.tBodies[0];
  var rows = Array.prototype.slice.call(tbody.rows);
  var details = document.getElementById("details");
  var nodes = {};
  data.nodes.forEach(function (n) { nodes[n.name] = n; });
  var tensors = {};
  data.tensors.forEach(function (t) { tensors[t.name] = t; });

  function cellValue(row, col) {
    var text = row.cells[col].getAttribute("data-v");
    var num = parseFloat(text);
    return text === "" ? null : (isNaN(num) ? text : num);
  }

  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th) {
    th.addEventListener("click", function () {
      var col = parseInt(th.getAttribute("data-col"), 10);
      var asc = !th.classList.contains("asc");
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (other) {
        other.classList.remove("asc", "desc");
      });
      th.classList.add(asc ? "asc" : "desc");
      rows.sort(function (a, b) {
        var x = cellValue(a, col), y = cellValue(b, col);
        if (x === null && y === null) { return 0; }
        if (x === null) { return 1; }   // unknown values always last
        if (y === null) { return -1; }
        var order = x < y ? -1 : (x > y ? 1 : 0);
        return asc ? order : -order;
      });
      rows.forEach(function (r) { tbody.appendChild(r); });
    });
  });

  function fmt(v, digits) {
    if (v === null || v === undefined) { return "-"; }
    if (typeof v === "string") { return v; }
    return Number(v).toFixed(digits);
  }

  function line(label, value) {
    var tr = document.createElement("tr");
    var a = document.createElement("td"); a.textContent = label;
    var b = document.createElement("td"); b.textContent = value;
    tr.appendChild(a); tr.appendChild(b);
    return tr;
  }

  function select(name) {
    document.querySelectorAll(".sel").forEach(function (el) { el.classList.remove("sel"); });
    document.querySelectorAll('[data-node="' + CSS.escape(name) + '"]').forEach(function (el) {
      el.classList.add("sel");
    });
    var n = nodes[name];
    var box = document.createElement("table");
    var heading = document.createElement("h3");
    heading.textContent = name;
    if (!n) {
      details.replaceChildren(heading, document.createTextNode("not quantized"));
      return;
    }
    box.appendChild(line("op", n.op_type));
    box.appendChild(line("output", n.output + (n.float_output && n.float_output !== n.output ? " (float: " + n.float_output + ")" : "")));
    box.appendChild(line("engine layer", (n.engine_layer || "-") + " " + (n.engine_precision || "")));
    box.appendChild(line("graph-wise SNR", fmt(n.graph && n.graph.snr_db, 2) + " dB"));
    box.appendChild(line("arriving SNR", fmt(n.arrival_snr_db, 2) + " dB"));
    box.appendChild(line("added noise SNR", fmt(n.added_snr_db, 2) + " dB"));
    box.appendChild(line("layer-wise SNR", fmt(n.local && n.local.snr_db, 2) + " dB"));
    n.weights.forEach(function (w) {
      box.appendChild(line("weight (input " + w.input_index + ")", fmt(w.snr_db, 1) + " dB; worst channel " + w.worst_channel + ": " + fmt(w.min_channel_snr_db, 1) + " dB"));
    });
    if (n.what_if) {
      box.appendChild(line("what-if FP16", "+" + fmt(n.what_if.snr_gain_db, 2) + " dB output SNR, " + fmt(n.what_if.reformats_added, 0) + " Reformats, " + fmt(n.what_if.int8_macs_lost, 0) + " INT8 MACs lost"));
    }
    var parts = [heading, box];
    n.quantized_inputs.forEach(function (t) {
      var fig = document.querySelector('#hists figure[data-tensor="' + CSS.escape(t) + '"]');
      if (fig) { fig.classList.add("sel"); parts.push(fig.cloneNode(true)); }
    });
    details.replaceChildren.apply(details, parts);
  }

  rows.forEach(function (r) {
    r.addEventListener("click", function () { select(r.getAttribute("data-node")); });
  });
  var boxes = Array.prototype.slice.call(document.querySelectorAll("#graph g.node"));
  boxes.forEach(function (g) {
    g.addEventListener("click", function () { select(g.getAttribute("data-node")); });
  });

  var search = document.getElementById("search");
  search.addEventListener("input", function () {
    var text = search.value.toLowerCase();
    rows.forEach(function (r) {
      r.style.display = !text || r.getAttribute("data-node").toLowerCase().indexOf(text) >= 0 ? "" : "none";
    });
  });

  // Start on the node the layer-wise view blames most.
  if (data.layer_ranking.length) { select(data.layer_ranking[0]); }
  document.body.setAttribute("data-ready", String(rows.length + boxes.length));
})();
