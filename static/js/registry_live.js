// Registry operator page: every registry event for this operator (promotion, rollback, alarm)
// re-fetches the live section once (debounced), unless the user is typing in one of its forms.
(function () {
  var timer = null;
  function refresh() {
    var live = document.getElementById("registry-live");
    if (!live) return;
    var active = document.activeElement;
    if (active && live.contains(active) && /INPUT|TEXTAREA|SELECT/.test(active.tagName)) {
      timer = setTimeout(refresh, 2000);
      return;
    }
    htmx.ajax("GET", window.location.pathname, {
      target: "#registry-live", select: "#registry-live", swap: "outerHTML",
    });
  }
  document.body.addEventListener("htmx:wsAfterMessage", function () {
    clearTimeout(timer);
    timer = setTimeout(refresh, 300);
  });
})();
