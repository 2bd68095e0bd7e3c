// Campaign list: when any campaign changes (websocket) or the socket (re)opens, re-fetch the
// table with the user's own filters, sort and page (debounced: a busy search sends many events).
(function () {
  var timer = null;
  function refresh() {
    var wrap = document.getElementById("campaign-table-wrap");
    if (!wrap || document.visibilityState !== "visible") return;
    htmx.ajax("GET", wrap.dataset.liveUrl, { target: "#campaign-table-wrap", swap: "outerHTML" });
  }
  function soon() {
    clearTimeout(timer);
    timer = setTimeout(refresh, 500);
  }
  document.body.addEventListener("htmx:wsAfterMessage", soon);
  document.body.addEventListener("htmx:wsOpen", soon);
})();
