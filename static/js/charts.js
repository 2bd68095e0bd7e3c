// Plotly figures built in Python: every element with data-figure="<json_script id>" is drawn,
// on load and after each htmx swap. Colours follow the page's light/dark variables.
(function () {
  function themed(layout) {
    var css = getComputedStyle(document.documentElement);
    var fg = css.getPropertyValue("--fg").trim() || "#1d2330";
    var line = css.getPropertyValue("--line").trim() || "#dde1e8";
    layout = Object.assign({}, layout);
    layout.font = Object.assign({}, layout.font || {}, { color: fg });
    ["xaxis", "yaxis"].forEach(function (axis) {
      layout[axis] = Object.assign({ gridcolor: line, zerolinecolor: line }, layout[axis] || {});
    });
    return layout;
  }
  function draw(root) {
    if (!window.Plotly) return;
    (root || document).querySelectorAll("[data-figure]").forEach(function (el) {
      var source = document.getElementById(el.dataset.figure);
      if (!source) return;
      var figure = JSON.parse(source.textContent);
      Plotly.react(el, figure.data, themed(figure.layout), { responsive: true, displaylogo: false });
    });
  }
  window.keCharts = { draw: draw, themed: themed };
  window.addEventListener("DOMContentLoaded", function () { draw(document); });
  document.addEventListener("htmx:afterSettle", function (event) { draw(event.target); });
})();
