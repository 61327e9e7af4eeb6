// pytest-roofline history site: draws the plotly figures embedded as JSON, filters the index, and switches
// a trajectory chart between sessions. Plain browser JavaScript; plotly.min.js is loaded before it.
(function () {
  "use strict";
  var CONFIG = { displaylogo: false, responsive: true, modeBarButtonsToRemove: ["lasso2d", "select2d"] };

  function figure(id) { return JSON.parse(document.getElementById(id).textContent); }

  function draw(div, fig) {
    return Plotly.react(div, fig.data, fig.layout, CONFIG).then(function () { div.classList.add("rendered"); });
  }

  function drawCharts() {
    document.querySelectorAll("div.chart[data-figure]").forEach(function (div) { draw(div, figure(div.dataset.figure)); });
  }

  function trajectories() {
    document.querySelectorAll("div.chart[data-trajectory]").forEach(function (div) {
      var spec = figure(div.dataset.trajectory);
      var select = document.getElementById(div.dataset.select);
      function show() {
        var chosen = spec.sessions[Number(select.value)];
        var data = spec.roofs.slice();
        if (spec.reference !== null && spec.reference !== Number(select.value)) {
          spec.sessions[spec.reference].lines.forEach(function (line) {
            data.push({ type: "scatter", mode: "lines+markers", name: line.name + " — " + spec.sessions[spec.reference].label,
                        x: line.x, y: line.y, text: line.text, hovertemplate: "%{text}<extra>first session</extra>",
                        line: { color: "#bbb", width: 1, dash: "dot" }, marker: { size: 5, color: "#bbb" } });
          });
        }
        chosen.lines.forEach(function (line, i) {
          data.push({ type: "scatter", mode: "lines+markers+text", name: line.name, x: line.x, y: line.y,
                      text: line.labels, customdata: line.text, textposition: line.positions || "top left",
                      hovertemplate: "%{customdata}<extra></extra>",
                      line: { color: spec.colours[i % spec.colours.length], width: 2.5 },
                      marker: { size: 9, color: spec.colours[i % spec.colours.length] } });
        });
        var layout = JSON.parse(JSON.stringify(spec.layout));
        layout.title.text = spec.layout.title.text + " — " + chosen.label;
        draw(div, { data: data, layout: layout });
      }
      select.addEventListener("change", show);
      show();
    });
  }

  function filters() {
    var box = document.querySelector(".filters");
    if (!box) { return; }
    var name = box.querySelector("[name=name]"), bound = box.querySelector("[name=bound]");
    var verdict = box.querySelector("[name=verdict]"), count = box.querySelector(".count");
    function apply() {
      var text = name.value.trim().toLowerCase(), shown = 0, total = 0;
      document.querySelectorAll("tr[data-test]").forEach(function (row) {
        var ok = row.dataset.test.toLowerCase().indexOf(text) >= 0 &&
          (!bound.value || row.dataset.bound === bound.value) && (!verdict.value || row.dataset.verdict === verdict.value);
        row.hidden = !ok; total += 1; shown += ok ? 1 : 0;
      });
      count.textContent = shown + " of " + total + " tests shown";
    }
    [name, bound, verdict].forEach(function (el) { el.addEventListener("input", apply); });
    apply();
  }

  document.addEventListener("DOMContentLoaded", function () { drawCharts(); trajectories(); filters(); });
})();
